package server

import (
	"github.com/leasecached/leasecached/protocol"
	"github.com/leasecached/leasecached/shard"
)

// The pipelined fast path: requests parsed before they are executed, so that the memory of their keys is
// fetched together (shard.Store.Prefetch), and the hashes that leaves for their execution. See
// doc/design/batched-reads.md.

// batchRequests bounds how many requests serve parses ahead of executing them.
const batchRequests = 16

// ahead holds the requests of a pipelined read, parsed before any of them is executed so that the keys of
// all of them go to the store's Prefetch together, and the hashes Prefetch leaves. Nothing in it outlives
// the serve call that fills it, so the connections of an event loop share one (loopShared).
type ahead struct {
	reqs [batchRequests]protocol.Request
	ends [batchRequests]int // where each request ends in the read buffer
	// hs are the hashes Prefetch left for the keys of the requests before reqs[to] (prefetchAhead); hashAt[i]
	// is where request i's keys start in hs.
	hs     [shard.PrefetchMax]shard.Hashed
	hashAt [batchRequests]uint8
	to     int
}

// fastPath is what the fast path left a connection for the request it executes next.
type fastPath struct {
	// The store Hashed of the first hashN keys of the request being executed are loop.ahead.hs[hashAt:]
	// (hashOf): what Prefetch computed. Indexes rather than a slice, so setting them costs no write barrier.
	hashAt, hashN int
	// preParsed is how many bytes of the input's first request OnTrafficBatch already parsed into req (0:
	// none), and preHash that request's key's Hashed when preHashed. serve uses both for the first request
	// of its next call only.
	preParsed int
	preHash   shard.Hashed
	preHashed bool
}

// takePreParsed returns preParsed and forgets it: it describes the first request of one serve call only.
func (f *fastPath) takePreParsed() int {
	n := f.preParsed
	f.preParsed = 0
	return n
}

// executed forgets the prefetched hashes once their request has been executed.
func (f *fastPath) executed() { f.hashN = 0 }

// serveAhead serves a pipelined stretch of buf: the request parsed into cn.req, n bytes at pos, and up to
// batchRequests-1 more behind it, all parsed before the first is executed. It stops before an incomplete
// request, after a refused one, and once the connection is blocked. It returns where it stopped and what
// to do.
func (cn *conn) serveAhead(buf []byte, pos, n int) (int, Action) {
	a := cn.batch()
	// The first request moves into the batch: a swap, so both keep their slices' capacity.
	cn.req, a.reqs[0] = a.reqs[0], cn.req
	a.ends[0] = pos + n
	k, end := 1, pos+n
	var refused error
	refusedLen := 0
	for k < batchRequests && end < len(buf) {
		m, err := cn.parser.Parse(buf[end:], &a.reqs[k])
		if err != nil {
			refused, refusedLen = err, m
			break
		}
		if m == 0 {
			break
		}
		end += m
		a.ends[k] = end
		k++
	}
	a.to = 0
	for i := range k {
		if i >= a.to {
			cn.prefetchAhead(i, k) // covers request i at least
		}
		cn.fast.hashAt = int(a.hashAt[i])
		cn.fast.hashN = min(len(a.reqs[i].Keys), len(a.hs)-cn.fast.hashAt)
		var out outcome
		if lat := cn.loop.lat; lat == nil { // --metrics-listen off (metrics.go)
			out = cn.execute(&a.reqs[i])
		} else {
			out = cn.runTimed(&a.reqs[i], lat)
		}
		cn.fast.executed()
		if out == suspended {
			return pos, Continue // request i stays in the input
		}
		pos = a.ends[i]
		if len(cn.out) >= flushThreshold {
			cn.flush(cn.gc)
		}
		if out == closeConn || cn.closed {
			return pos, Close
		}
		if cn.blocked {
			return pos, Continue // the rest of the batch is parsed again once the client has read
		}
	}
	if refused != nil {
		return pos + refusedLen, cn.refuse(refused)
	}
	return pos, Continue
}

// prefetchAhead hands the keys of the batch's requests from i on (of k) to the store's Prefetch, as many
// whole requests as PrefetchMax keys allow (at least the first keys of request i), and records where each
// one's hashes are.
//
// The keys live on the stack: zeroing them costs a few nanoseconds per call, which runs only when there is
// a batch to gain from.
func (cn *conn) prefetchAhead(i, k int) {
	a := &cn.loop.ahead
	var keys [shard.PrefetchMax][]byte
	n := 0
	j := i
	for ; j < k; j++ {
		ks := a.reqs[j].Keys
		if n+len(ks) > len(keys) && j > i {
			break
		}
		a.hashAt[j] = uint8(n)
		for _, key := range ks[:min(len(ks), len(keys)-n)] { // not copy: that is a typed copy of pointers
			keys[n] = key
			n++
		}
	}
	a.to = j
	if n > 0 {
		cn.srv.store.Prefetch(keys[:n], a.hs[:])
	}
}

// prefetchKeys hands one request's keys to the store's Prefetch, and keeps their hashes for its execution.
func (cn *conn) prefetchKeys(keys [][]byte) {
	a := cn.batch()
	cn.srv.store.Prefetch(keys, a.hs[:])
	cn.fast.hashAt, cn.fast.hashN = 0, min(len(keys), len(a.hs))
}

// batch is the ahead the connection fills: its event loop's.
func (cn *conn) batch() *ahead { return &cn.shared().ahead }

// hashOf is the store's Hashed of key i of the request being executed: the one Prefetch left, or computed now.
func (cn *conn) hashOf(i int, key []byte) shard.Hashed {
	if i < cn.fast.hashN {
		return cn.loop.ahead.hs[cn.fast.hashAt+i]
	}
	if i == 0 && cn.fast.preHashed {
		return cn.fast.preHash
	}
	return shard.HashOf(key)
}
