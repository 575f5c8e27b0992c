package server

import (
	"strconv"

	"github.com/leasecached/leasecached/protocol"
	"github.com/leasecached/leasecached/shard"
	"github.com/leasecached/leasecached/watch"
)

// Meta commands (memcached 1.6.18's mg, ms, md, ma, me), byte for byte: reply flags are written in the
// order the client sent them, each command suppresses under q exactly what memcached suppresses, and
// errors use memcached's words. Item semantics live in shard (MetaGet, MetaSet, ...).

// metaExpOps is the store's form of the T, N and R flags the parser ordered (protocol.MetaFlags.ExpOps).
func metaExpOps(f *protocol.MetaFlags) shard.ExpOps {
	var ops shard.ExpOps
	for _, kind := range f.ExpOps[:f.NumExpOps] {
		switch kind {
		case 'T':
			ops.Add(shard.ExpTouch, f.Exptime)
		case 'N':
			ops.Add(shard.ExpVivify, f.VivifyExp)
		case 'R':
			ops.Add(shard.ExpRecache, f.RecacheExp)
		}
	}
	return ops
}

// metaGet serves mg.
func (cn *conn) metaGet(req *protocol.Request) {
	f, toks := &req.Meta, req.Args
	if req.MetaErr != nil {
		cn.out = append(cn.out, req.MetaErr...)
		return
	}
	abort := f.OpaqueAbort
	mreq := shard.MetaGetRequest{
		Ops:      metaExpOps(f),
		Vivify:   f.Vivify,
		NoUpdate: f.NoUpdate,
		Locked:   f.Locked,
		Aborted:  abort >= 0,
		Value:    f.Value,
	}
	var res shard.MetaGetResult
	cn.scratch, res = cn.srv.store.MetaGet(cn.scratch[:0], f.Key, &mreq)
	if abort >= 0 {
		cn.out = append(cn.out, protocol.ReplyOpaqueTooLong...)
		return
	}
	if !res.Hit {
		cn.local[statCmdGet]++
		cn.local[statGetMisses]++
		if f.NoReply {
			return // q elides the miss
		}
		cn.out = cn.appendMiss(protocol.MetaEN, toks, f)
		cn.out = append(cn.out, "\r\n"...)
		return
	}
	// memcached counts an mg with T as a touch, any other hit (vivified ones included) as a get.
	if f.NewTTL {
		cn.local[statCmdTouch]++
		cn.local[statTouchHits]++
	} else {
		cn.local[statCmdGet]++
		cn.local[statGetHits]++
	}
	echo := protocol.MetaEcho{Key: f.Key, KeyBinary: res.KeyBinary, Len: res.Info.Len, Cas: res.Info.Cas,
		Flags: res.Info.Flags, Idle: int64(res.Idle), Fetched: res.Fetched, TTLs: res.TTL[:], ExpOps: "TNR"}
	out := protocol.AppendMetaHead(cn.out, f.Value, res.Info.Len)
	out = protocol.AppendMetaFlags(out, toks, protocol.EchoGet, &echo)
	if res.TokenSent {
		out = append(out, " Z"...)
	}
	if res.Stale {
		out = append(out, " X"...)
	}
	if res.Won {
		out = append(out, " W"...)
	}
	out = append(out, "\r\n"...)
	if f.Value {
		out = append(out, cn.scratch...)
		out = append(out, "\r\n"...)
	}
	cn.out = out
}

// appendMiss appends a meta miss reply's code and its echoes (O and k) without the line's end.
func (cn *conn) appendMiss(code string, toks [][]byte, f *protocol.MetaFlags) []byte {
	echo := protocol.MetaEcho{Key: f.Key, KeyBinary: f.KeyBinary}
	return protocol.AppendMetaFlags(append(cn.out, code...), toks, protocol.EchoMiss, &echo)
}

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
	f, toks := &req.Meta, req.Args
	if req.MetaErr != nil {
		cn.out = append(cn.out, req.MetaErr...) // unreachable after the parser's check; never silent
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
		cn.countCas(res)
	}
	if cn.srv.watch.On(watch.Mutations) {
		cn.logStore(mreq.Mode, storeCmdName(mreq.Mode), f.Key, res, req.Flags, f.Exptime, len(req.Data))
	}
	cn.countStoreFailure(res)
	var code string
	switch res {
	case shard.Stored:
		if f.NoReply {
			return // q elides only the success
		}
		code = protocol.MetaHD
	case shard.Exists:
		code = protocol.MetaEX
	case shard.NotFound:
		code = protocol.MetaNF
	case shard.NotStored:
		code = protocol.MetaNS
	case shard.TooLarge, shard.NoMemory:
		cn.out = append(cn.out, resultReply(res)...)
		return
	default:
		cn.out = append(cn.out, protocol.ReplyServerErrorUnhandledStorage...)
		return
	}
	// memcached shows the key of the item it built, binary only if this ms said b, and c is 0 unless stored.
	echo := protocol.MetaEcho{Key: f.Key, KeyBinary: f.KeyBinary, Cas: cas}
	out := protocol.AppendMetaFlags(append(cn.out, code...), toks, protocol.EchoSet, &echo)
	cn.out = append(out, "\r\n"...)
}

// metaDelete serves md.
func (cn *conn) metaDelete(req *protocol.Request) {
	f, toks := &req.Meta, req.Args
	if req.MetaErr != nil {
		cn.out = append(cn.out, req.MetaErr...)
		return
	}
	if f.OpaqueAbort >= 0 {
		cn.out = append(cn.out, protocol.ReplyOpaqueTooLong...) // checked before the item is looked up
		return
	}
	mreq := shard.MetaDeleteRequest{
		HasCas:     f.HasCas,
		Cas:        f.Cas,
		Invalidate: f.SetStale,
		SetTTL:     f.NewTTL,
		Exptime:    f.Exptime,
	}
	lk := cn.peekDeleted(f.Key)
	res := cn.srv.store.MetaDelete(f.Key, &mreq)
	if res == shard.Deleted && cn.srv.watch.On(watch.Deletions) { // md I too: the value is stale (watch.md)
		cn.logDeleted("md", f.Key, lk)
	}
	var code string
	switch res {
	case shard.Deleted:
		if !f.SetStale {
			cn.local[statDeleteHits]++ // marking stale is not counted at all
		}
		if f.NoReply {
			return
		}
		code = protocol.MetaHD
	case shard.Exists:
		cn.local[statDeleteMisses]++
		code = protocol.MetaEX
	default:
		cn.local[statDeleteMisses]++
		code = protocol.MetaNF
	}
	cn.out = cn.appendMiss(code, toks, f)
	cn.out = append(cn.out, "\r\n"...)
}

// metaArith serves ma.
func (cn *conn) metaArith(req *protocol.Request) {
	f, toks := &req.Meta, req.Args
	if req.MetaErr != nil {
		cn.out = append(cn.out, req.MetaErr...)
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
	abort := f.OpaqueAbort
	mreq := shard.MetaArithRequest{
		Incr:    incr,
		Delta:   f.Delta,
		Vivify:  f.Vivify,
		Initial: f.Initial,
		Ops:     metaExpOps(f),
	}
	if f.HasCas {
		mreq.Cas = f.Cas
	}
	res := cn.srv.store.MetaArith(f.Key, &mreq)
	if res.Created && cn.srv.watch.On(watch.Fetchers|watch.Mutations) {
		cn.logVivified(f.Key)
	}
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
		code := protocol.MetaNF
		if res.Result == shard.Exists {
			code = protocol.MetaEX
		}
		cn.out = cn.appendMiss(code, toks, f)
		cn.out = append(cn.out, "\r\n"...)
		return
	}
	// q elides a changed counter's reply, value included, but not a vivified one (memcached's quirk).
	if f.NoReply && !res.Created {
		return
	}
	var digits [20]byte
	num := strconv.AppendUint(digits[:0], res.Value, 10)
	echo := protocol.MetaEcho{Key: f.Key, KeyBinary: f.KeyBinary, Cas: res.Cas, TTLs: res.TTL[:], ExpOps: "TN"}
	out := protocol.AppendMetaHead(cn.out, f.Value, len(num))
	out = protocol.AppendMetaFlags(out, toks, protocol.EchoArith, &echo)
	out = append(out, "\r\n"...)
	if f.Value {
		out = append(out, num...)
		out = append(out, "\r\n"...)
	}
	cn.out = out
}

// metaDebug serves me: "ME <key> exp=.. la=.. cas=.. fetch=yes|no cls=.. size=..", or EN.
// Unlike the other meta commands it knows one flag, and only right after the key: b.
func (cn *conn) metaDebug(req *protocol.Request) {
	key := req.Key()
	if len(req.Args) > 0 && string(req.Args[0]) == "b" {
		dec, ok := protocol.DecodeKeyBase64(cn.metaKey[:], key)
		if !ok {
			cn.out = append(cn.out, protocol.ReplyClientErrorBadFormat...)
			return
		}
		key = dec
	}
	cn.local[statCmdMeta]++
	info, ok := cn.srv.store.MetaDebug(key)
	if !ok {
		cn.out = append(cn.out, protocol.ReplyEN...)
		return
	}
	out := append(cn.out, "ME "...)
	if info.KeyBinary {
		out = protocol.AppendBase64(out, key)
	} else {
		out = append(out, key...)
	}
	out = append(out, " exp="...)
	out = strconv.AppendInt(out, info.Exp, 10)
	out = append(out, " la="...)
	out = strconv.AppendUint(out, uint64(info.LastAccess), 10)
	out = append(out, " cas="...)
	out = strconv.AppendUint(out, info.Cas, 10)
	if info.Fetched {
		out = append(out, " fetch=yes"...)
	} else {
		out = append(out, " fetch=no"...)
	}
	out = append(out, " cls="...)
	out = strconv.AppendInt(out, int64(info.Class), 10)
	out = append(out, " size="...)
	out = strconv.AppendInt(out, int64(info.Size), 10)
	cn.out = append(out, "\r\n"...)
}
