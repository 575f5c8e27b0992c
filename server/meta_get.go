package server

import (
	"strconv"

	"github.com/leasecached/leasecached/protocol"
	"github.com/leasecached/leasecached/shard"
)

// Meta commands (memcached 1.6.18's mg, ms, md, ma, me), byte for byte: reply flags are written in the
// order the client sent them, each command suppresses under q exactly what memcached suppresses, and
// errors use memcached's words. Item semantics live in shard (MetaGet, MetaSet, ...).

// metaExpOps collects the T, N and R flags in request order, stopping at index stop (-1: none).
func metaExpOps(toks [][]byte, stop int, f *protocol.MetaFlags) shard.ExpOps {
	var ops shard.ExpOps
	for i, tok := range toks {
		if i == stop {
			break
		}
		switch tok[0] {
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

// appendTTL appends a t value: -1, or memcached's unsigned remaining seconds.
func appendTTL(dst []byte, ttl int64) []byte {
	return strconv.AppendInt(dst, ttl, 10)
}

// metaGet serves mg.
func (cn *conn) metaGet(req *protocol.Request) {
	var f protocol.MetaFlags
	toks := req.Args
	if errReply := protocol.ParseMetaFlags(&f, req.Key(), toks, cn.metaKey[:]); errReply != nil {
		cn.out = append(cn.out, errReply...)
		return
	}
	abort := protocol.OpaqueAbortAt(toks)
	mreq := shard.MetaGetRequest{
		Ops:      metaExpOps(toks, abort, &f),
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
		cn.out = append(cn.out, "EN"...)
		cn.out = appendMissFlags(cn.out, toks, f.Key, f.KeyBinary)
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
	out := cn.out
	if f.Value {
		out = append(out, "VA "...)
		out = strconv.AppendInt(out, int64(res.Info.Len), 10)
	} else {
		out = append(out, "HD"...)
	}
	ops := 0
	for _, tok := range toks {
		switch tok[0] {
		case 'T', 'N', 'R':
			ops++
		case 's':
			out = append(out, " s"...)
			out = strconv.AppendInt(out, int64(res.Info.Len), 10)
		case 't':
			out = append(out, " t"...)
			out = appendTTL(out, res.TTL[ops])
		case 'c':
			out = append(out, " c"...)
			out = strconv.AppendUint(out, res.Info.Cas, 10)
		case 'f':
			out = append(out, " f"...)
			out = strconv.AppendUint(out, uint64(res.Info.Flags), 10)
		case 'l':
			out = append(out, " l"...)
			out = strconv.AppendUint(out, uint64(res.Idle), 10)
		case 'h':
			if res.Fetched {
				out = append(out, " h1"...)
			} else {
				out = append(out, " h0"...)
			}
		case 'O':
			out = protocol.AppendOpaque(out, tok)
		case 'k':
			out = protocol.AppendFlagKey(out, f.Key, res.KeyBinary)
		}
	}
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

// appendMissFlags appends the flags a meta miss (EN, NF, EX) echoes: O and k, in request order.
func appendMissFlags(dst []byte, toks [][]byte, key []byte, binary bool) []byte {
	for _, tok := range toks {
		switch tok[0] {
		case 'O':
			dst = protocol.AppendOpaque(dst, tok)
		case 'k':
			dst = protocol.AppendFlagKey(dst, key, binary)
		}
	}
	return dst
}
