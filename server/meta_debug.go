package server

import (
	"strconv"

	"github.com/leasecached/leasecached/protocol"
)

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
