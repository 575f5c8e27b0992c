package server

import (
	"github.com/leasecached/leasecached/protocol"
	"github.com/leasecached/leasecached/shard"
)

// metaDelete serves md.
func (cn *conn) metaDelete(req *protocol.Request) {
	var f protocol.MetaFlags
	toks := req.Args
	if protocol.ParseMetaFlags(&f, req.Key(), toks, cn.metaKey[:]) != nil {
		cn.out = append(cn.out, protocol.ReplyInvalidOrDuplicateFlag...) // md reports every flag error alike
		return
	}
	if protocol.OpaqueAbortAt(toks) >= 0 {
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
	res := cn.srv.store.MetaDelete(f.Key, &mreq)
	var code string
	switch res {
	case shard.Deleted:
		if !f.SetStale {
			cn.local[statDeleteHits]++ // marking stale is not counted at all
		}
		if f.NoReply {
			return
		}
		code = "HD"
	case shard.Exists:
		cn.local[statDeleteMisses]++
		code = "EX"
	default:
		cn.local[statDeleteMisses]++
		code = "NF"
	}
	cn.out = append(cn.out, code...)
	cn.out = appendMissFlags(cn.out, toks, f.Key, f.KeyBinary)
	cn.out = append(cn.out, "\r\n"...)
}
