package server

import (
	"strconv"

	"github.com/leasecached/leasecached/protocol"
	"github.com/leasecached/leasecached/shard"
)

// msModes maps ms's M token to a store mode; memcached 1.6.18 knows E(add), A(ppend), P(repend),
// R(eplace) and S(et), and the parser has already refused any other.
func msMode(m byte, hasCas bool) shard.Mode {
	mode := shard.ModeSet
	switch m {
	case 'E':
		mode = shard.ModeAdd
	case 'A':
		mode = shard.ModeAppend
	case 'P':
		mode = shard.ModePrepend
	case 'R':
		mode = shard.ModeReplace
	}
	// A CAS turns set and replace into cas (replace+cas is cas); add ignores it; append and prepend
	// compare it themselves.
	if hasCas && (mode == shard.ModeSet || mode == shard.ModeReplace) {
		mode = shard.ModeCas
	}
	return mode
}

// metaSet serves ms. The parser validated the flags (they decide the framing) and read the data.
func (cn *conn) metaSet(req *protocol.Request) {
	var f protocol.MetaFlags
	toks := req.Args
	if errReply := protocol.ParseMetaFlags(&f, req.Key(), toks, cn.metaKey[:]); errReply != nil {
		cn.out = append(cn.out, errReply...) // unreachable after the parser's check; never silent
		return
	}
	cn.local[statCmdSet]++
	mreq := shard.MetaSetRequest{
		Mode:       msMode(f.Mode, f.HasCas),
		Flags:      req.Flags,
		Exptime:    f.Exptime,
		Cas:        f.Cas,
		Invalidate: f.SetStale,
		KeyBinary:  f.KeyBinary,
	}
	res, cas := cn.srv.store.MetaSet(f.Key, req.Data, &mreq)
	if mreq.Mode == shard.ModeCas {
		switch res {
		case shard.Stored:
			cn.local[statCasHits]++
		case shard.Exists:
			cn.local[statCasBadval]++
		case shard.NotFound:
			cn.local[statCasMisses]++
		}
	}
	cn.countStoreFailure(res)
	var code string
	switch res {
	case shard.Stored:
		if f.NoReply {
			return // q elides only the success
		}
		code = "HD"
	case shard.Exists:
		code = "EX"
	case shard.NotFound:
		code = "NF"
	case shard.NotStored:
		code = "NS"
	case shard.TooLarge, shard.NoMemory:
		cn.out = append(cn.out, resultReply(res)...)
		return
	default:
		cn.out = append(cn.out, protocol.ReplyServerErrorUnhandledStorage...)
		return
	}
	out := append(cn.out, code...)
	for _, tok := range toks {
		switch tok[0] {
		case 'O':
			out = protocol.AppendOpaque(out, tok)
		case 'k':
			// memcached shows the key of the item it built, binary only if this ms said b.
			out = protocol.AppendFlagKey(out, f.Key, f.KeyBinary)
		case 'c':
			out = append(out, " c"...)
			out = strconv.AppendUint(out, cas, 10) // 0 unless stored, as memcached reports it
		}
	}
	cn.out = append(out, "\r\n"...)
}
