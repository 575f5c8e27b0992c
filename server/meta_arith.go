package server

import (
	"strconv"

	"github.com/leasecached/leasecached/protocol"
	"github.com/leasecached/leasecached/shard"
)

// metaArith serves ma.
func (cn *conn) metaArith(req *protocol.Request) {
	f := protocol.MetaFlags{Delta: 1} // no D: by one
	toks := req.Args
	if protocol.ParseMetaFlags(&f, req.Key(), toks, cn.metaKey[:]) != nil {
		cn.out = append(cn.out, protocol.ReplyInvalidOrDuplicateFlag...)
		return
	}
	incr := true
	switch f.Mode {
	case 0, 'I', '+':
	case 'D', '-':
		incr = false
	default:
		cn.out = append(cn.out, protocol.ReplyInvalidMaModeFlag...)
		return
	}
	// memcached notices an over-long opaque only while writing the reply, after the arithmetic and
	// the T/N flags before it took effect.
	abort := protocol.OpaqueAbortAt(toks)
	mreq := shard.MetaArithRequest{
		Incr:    incr,
		Delta:   f.Delta,
		Vivify:  f.Vivify,
		Initial: f.Initial,
		Ops:     metaExpOps(toks, abort, &f),
	}
	if f.HasCas {
		mreq.Cas = f.Cas
	}
	res := cn.srv.store.MetaArith(f.Key, &mreq)
	switch res.Result {
	case shard.Stored:
		if !res.Created {
			cn.countHit(incr, statIncrHits, statDecrHits)
		}
	case shard.NotFound:
		cn.countHit(incr, statIncrMisses, statDecrMisses)
	case shard.NonNumeric:
		cn.out = append(cn.out, protocol.ReplyClientErrorNonNumber...)
		return
	case shard.NoMemory:
		if res.Found {
			cn.out = append(cn.out, protocol.ReplyServerErrorOOM...)
		} else {
			cn.out = append(cn.out, protocol.ReplyServerErrorOOMVivify...)
		}
		return
	}
	if abort >= 0 {
		cn.out = append(cn.out, protocol.ReplyOpaqueTooLong...)
		return
	}
	switch res.Result {
	case shard.NotFound, shard.Exists:
		code := "NF"
		if res.Result == shard.Exists {
			code = "EX"
		}
		cn.out = append(cn.out, code...)
		cn.out = appendMissFlags(cn.out, toks, f.Key, f.KeyBinary)
		cn.out = append(cn.out, "\r\n"...)
		return
	}
	// q elides a changed counter's reply, value included, but not a vivified one (memcached's quirk).
	if f.NoReply && !res.Created {
		return
	}
	var digits [20]byte
	num := strconv.AppendUint(digits[:0], res.Value, 10)
	out := cn.out
	if f.Value {
		out = append(out, "VA "...)
		out = strconv.AppendInt(out, int64(len(num)), 10)
	} else {
		out = append(out, "HD"...)
	}
	ops := 0
	for _, tok := range toks {
		switch tok[0] {
		case 'T', 'N':
			ops++
		case 'c':
			out = append(out, " c"...)
			out = strconv.AppendUint(out, res.Cas, 10)
		case 't':
			out = append(out, " t"...)
			out = appendTTL(out, res.TTL[ops])
		case 'O':
			out = protocol.AppendOpaque(out, tok)
		case 'k':
			out = protocol.AppendFlagKey(out, f.Key, f.KeyBinary)
		}
	}
	out = append(out, "\r\n"...)
	if f.Value {
		out = append(out, num...)
		out = append(out, "\r\n"...)
	}
	cn.out = out
}
