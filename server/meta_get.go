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
func metaExpOps(toks [][]byte, stop int, f *metaFlags) shard.ExpOps {
	var ops shard.ExpOps
	for i, tok := range toks {
		if i == stop {
			break
		}
		switch tok[0] {
		case 'T':
			ops.Add(shard.ExpTouch, f.exptime)
		case 'N':
			ops.Add(shard.ExpVivify, f.vivifyExp)
		case 'R':
			ops.Add(shard.ExpRecache, f.recacheExp)
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
	var f metaFlags
	toks := req.Args
	if errReply := parseMetaFlags(&f, req.Key(), toks, cn.metaKey[:]); errReply != nil {
		cn.out = append(cn.out, errReply...)
		return
	}
	abort := opaqueAbortAt(toks)
	mreq := shard.MetaGetRequest{
		Ops:      metaExpOps(toks, abort, &f),
		Vivify:   f.vivify,
		NoUpdate: f.noUpdate,
		Locked:   f.locked,
		Aborted:  abort >= 0,
		Value:    f.value,
	}
	var res shard.MetaGetResult
	cn.scratch, res = cn.srv.store.MetaGet(cn.scratch[:0], f.key, &mreq)
	if abort >= 0 {
		cn.out = append(cn.out, replyMetaOpaqueLong...)
		return
	}
	if !res.Hit {
		cn.local[statCmdGet]++
		cn.local[statGetMisses]++
		if f.noReply {
			return // q elides the miss
		}
		cn.out = append(cn.out, "EN"...)
		cn.out = appendMissFlags(cn.out, toks, f.key, f.keyBinary)
		cn.out = append(cn.out, "\r\n"...)
		return
	}
	// memcached counts an mg with T as a touch, any other hit (vivified ones included) as a get.
	if f.newTTL {
		cn.local[statCmdTouch]++
		cn.local[statTouchHits]++
	} else {
		cn.local[statCmdGet]++
		cn.local[statGetHits]++
	}
	out := cn.out
	if f.value {
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
			out = appendOpaque(out, tok)
		case 'k':
			out = appendFlagKey(out, f.key, res.KeyBinary)
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
	if f.value {
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
			dst = appendOpaque(dst, tok)
		case 'k':
			dst = appendFlagKey(dst, key, binary)
		}
	}
	return dst
}
