package server

import (
	"github.com/leasecached/leasecached/protocol"
	"github.com/leasecached/leasecached/shard"
)

// metaDelete serves md.
func (cn *conn) metaDelete(req *protocol.Request) {
	var f metaFlags
	toks := req.Args
	if parseMetaFlags(&f, req.Key(), toks, cn.metaKey[:]) != nil {
		cn.out = append(cn.out, replyMetaInvalidOrDup...) // md reports every flag error alike
		return
	}
	if opaqueAbortAt(toks) >= 0 {
		cn.out = append(cn.out, replyMetaOpaqueLong...) // checked before the item is looked up
		return
	}
	mreq := shard.MetaDeleteRequest{
		HasCas:     f.hasCas,
		Cas:        f.cas,
		Invalidate: f.setStale,
		SetTTL:     f.newTTL,
		Exptime:    f.exptime,
	}
	res := cn.srv.store.MetaDelete(f.key, &mreq)
	var code string
	switch res {
	case shard.Deleted:
		if !f.setStale {
			cn.local[statDeleteHits]++ // marking stale is not counted at all
		}
		if f.noReply {
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
	cn.out = appendMissFlags(cn.out, toks, f.key, f.keyBinary)
	cn.out = append(cn.out, "\r\n"...)
}
