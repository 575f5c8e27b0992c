package server

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/leasecached/leasecached/protocol"
	"github.com/leasecached/leasecached/shard"
)

// Grace and hold on a connection (doc/leases.md, "Grace and hold"; the store's side is shard/grace.go and
// shard/hold.go). A get-family key that misses goes through the store's AppendMiss, which may answer it
// from a grace copy, make this read the refiller, or park it. A parked read suspends its request as a
// yield does (the request stays at the front of the input, to go on from cn.resume), and the connection
// executes nothing more until the read wakes, so replies keep their order and a multi-key get answers
// when all its keys are resolved. Parking never blocks the event loop: the Waiter's wake-up is the
// transport's Wake (wakerOf); a transport without one (the stream transport) never parks.

// holdInputLimit bounds what a client may send behind a parked read: past it the read is answered with a
// miss at once, and the input is served (doc/design/backpressure.md's bounds hold).
const holdInputLimit = 64 << 10

// holdStats are the hold counters of `stats`.
type holdStats struct {
	parked    atomic.Uint64 // hold_parked: reads parked
	filled    atomic.Uint64 // hold_filled: parked reads answered with a value after a write woke them
	timeouts  atomic.Uint64 // hold_timeouts: parked reads answered with a miss when their hold time was up
	cancelled atomic.Uint64 // hold_cancelled: parked reads answered with a miss by a delete, flush_all, or input over holdInputLimit
	refused   atomic.Uint64 // hold_refused: reads that would have parked, past shard.MaxParked
}

// connHold is a connection's hold state, made at its first herd-mode miss.
type connHold struct {
	w       *shard.Waiter // nil when the transport cannot be woken
	miss    bool          // the read that woke answers its key with a miss
	retried bool          // the read that woke was woken by a write: a value now counts as hold_filled
	// refills are the keys (hashes) the request being served was made the refiller of: a key it names
	// again misses again, or its client, seeing a value, would never refill (doc/leases.md rule 12).
	refills []uint64
}

// missed serves a get-family key that found no live item (retrieve) when grace or hold is on, appending
// a value block if the store answers with one. park reports that the read is parked.
func (cn *conn) missed(key []byte, k shard.Hashed, withCas bool) (hit, park bool) {
	h := cn.holdState()
	if h.miss || slices.Contains(h.refills, k.Sum) {
		return false, false
	}
	w := h.w
	if w != nil && w.Deadline == 0 {
		w.Deadline = time.Now().Add(cn.srv.store.HoldFor()).UnixNano()
	}
	var out shard.MissOutcome
	cn.out, out = cn.srv.store.AppendMiss(cn.out, key, k, withCas, protocol.AppendValueHeader, w)
	switch out {
	case shard.MissParked:
		cn.parked = true
		cn.srv.stats.hold.parked.Add(1)
		return false, true
	case shard.MissRefill:
		h.refills = append(h.refills, k.Sum)
	case shard.MissRefused:
		cn.srv.stats.hold.refused.Add(1)
	case shard.MissHit, shard.MissGrace:
		return true, false
	}
	return false, false
}

// answered ends the hold of a read whose key was just answered (hit or not): its hold time and what
// woke it apply to that key only.
func (h *connHold) answered(hit bool, st *holdStats) {
	if h.retried && hit {
		st.filled.Add(1)
	}
	h.miss, h.retried = false, false
	if h.w != nil {
		h.w.Deadline = 0
	}
}

// holdState is cn.hold, made on first use with the transport being served.
func (cn *conn) holdState() *connHold {
	if cn.hold == nil {
		cn.hold = &connHold{}
		if wake := wakerOf(cn.gc); wake != nil && cn.srv.store.HoldFor() > 0 {
			cn.hold.w = shard.NewWaiter(wake)
		}
	}
	return cn.hold
}

// woke reports whether cn's parked read has woken (and records how), so that serve goes on; c is the
// transport. A client that sends more than holdInputLimit behind a parked read has it answered now.
func (cn *conn) woke(c Transport) bool {
	h, st := cn.hold, &cn.srv.stats.hold
	switch h.w.State() {
	case shard.WokeRetry:
		h.retried = true
	case shard.WokeMiss:
		h.miss = true
		st.cancelled.Add(1)
	case shard.WokeTimeout:
		h.miss = true
		st.timeouts.Add(1)
	default: // still parked
		if c.InboundBuffered() <= holdInputLimit {
			return false
		}
		if !cn.srv.store.Unpark(h.w) {
			return cn.woke(c) // it woke meanwhile
		}
		h.miss = true
		st.cancelled.Add(1)
	}
	h.w.Reset()
	cn.parked = false
	return true
}

// unpark takes back a closing connection's parked read: it costs nothing afterwards.
func (cn *conn) unpark() {
	if cn.parked {
		cn.srv.store.Unpark(cn.hold.w)
	}
}
