package server

import (
	"github.com/leasecached/leasecached/protocol"
	"github.com/leasecached/leasecached/shard"
	"github.com/leasecached/leasecached/watch"
)

// leaseGet serves lease-get (doc/leases.md): per key, in request order, VALUE on a hit, LVALUE
// with a fresh token or the hot-miss token 1 on a miss (carrying the stale value when one is held), then
// one END. A lease-get miss is never silent. It reports whether it stopped part-way (yield), to go on
// from key cn.resume: the keys before it were answered once, so none is granted a second lease.
func (cn *conn) leaseGet(req *protocol.Request) bool {
	for i := cn.resume; i < len(req.Keys); i++ {
		key := req.Keys[i]
		var kind shard.LeaseKind
		// The store appends the VALUE or LVALUE block (a miss without a stale value is
		// "LVALUE <key> <token> 0 0" and an empty line) straight into the output.
		cn.out, kind = cn.srv.store.AppendLeaseGetHashed(cn.out, key, cn.hashOf(i, key), protocol.AppendValueHeader,
			protocol.AppendLValueHeader)
		cn.local[statCmdGet]++
		cn.countHit(kind == shard.LeaseHit, statGetHits, statGetMisses)
		cn.srv.detail.record(key, prefixGet, kind == shard.LeaseHit)
		if cn.yield(i+1 < len(req.Keys)) {
			cn.resume = i + 1
			return true
		}
	}
	cn.resume = 0
	cn.out = append(cn.out, protocol.ReplyEnd...)
	return false
}

// leaseSet serves lease-set: STORED only with the key's current valid token, NOT_STORED otherwise.
func (cn *conn) leaseSet(req *protocol.Request) {
	cn.local[statCmdSet]++
	cn.srv.detail.record(req.Key(), prefixSet, false)
	res := cn.srv.store.LeaseSet(req.Key(), req.Cas, req.Flags, req.Exptime, req.Data)
	if cn.srv.watch.On(watch.Mutations) {
		cn.logStore(shard.ModeSet, "lease-set", req.Key(), res, req.Flags, req.Exptime, len(req.Data))
	}
	cn.countStoreFailure(res)
	cn.reply(req, resultReply(res))
}
