package shard

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/leasecached/leasecached/slab"
)

// Hold (doc/leases.md, "Grace and hold"): with Config.Hold, a get-family read of a key that has no value
// to answer with takes the key's lease (the one lease-get shares) and misses, so that its client refills
// the key; while that lease runs, further reads of the key are parked (a Waiter in the shard's parked
// table) instead of missing. A write of the key wakes them to read again (usually a hit: the refill
// landed); a delete or flush_all wakes them to answer a miss; a parked read whose hold time is up wakes
// to answer a miss. The store never blocks: parking registers a Waiter and returns, and waking calls its
// wake function, which has the connection served again on its own event loop.

// MaxParked bounds the reads parked at once across the store; past it a read that would park misses.
// Each parked read is one connection's (a connection parks at most one read at a time) and costs its
// Waiter and timer, about 300 bytes, outside -m like the connection's own buffers.
const MaxParked = 1 << 16

// MissOutcome is what AppendMiss did with a get-family read that found no live item.
type MissOutcome uint8

const (
	MissPlain   MissOutcome = iota // a miss: no grace copy, hold off or this read may not park
	MissHit                        // a value was appended: a live item after all, or a grace copy
	MissGrace                      // the grace copy was appended (an ordinary hit to the client)
	MissRefill                     // a miss, and this read now holds the key's lease: its client refills
	MissParked                     // parked: the Waiter wakes when the key is written, deleted or the hold is up
	MissRefused                    // a miss: MaxParked reads are parked already
)

// Waiter states: idle, parked, then why it woke.
const (
	waiterIdle uint32 = iota
	waiterParked
	WokeRetry   // the key was written (or its lease cancelled): read it again
	WokeMiss    // the key was deleted or flushed: answer a miss
	WokeTimeout // the hold time is up: answer a miss
	waiterGone  // taken back by its owner (Unpark)
)

// Waiter is one connection's parked read. Its owner (the connection's event loop) reads State after each
// wake-up and calls Reset before parking it again; the store sets the state from parked to the reason it
// woke exactly once (CompareAndSwap), so a write, the timer and Unpark never both act on one parking.
type Waiter struct {
	state atomic.Uint32
	wake  func() // has the owner served again: any goroutine may call it
	// Deadline is when the read's hold time is up (unix ns, wall clock), set by the owner for a read's
	// first parking and kept across its re-parkings, so a read is held at most Config.Hold in all.
	Deadline int64
	// until is Deadline as the timer reads it: the owner may change Deadline while a timer of an
	// earlier parking fires.
	until atomic.Int64
	// Set while parked, under the shard's lock.
	h     uint64
	sh    *shard
	store *Store
	timer *time.Timer
}

// NewWaiter returns a Waiter that calls wake when it wakes.
func NewWaiter(wake func()) *Waiter { return &Waiter{wake: wake} }

// State is waiterIdle, waiterParked or the reason the last parking woke (WokeRetry, WokeMiss, WokeTimeout).
func (w *Waiter) State() uint32 { return w.state.Load() }

// Parked reports whether w is parked.
func (w *Waiter) Parked() bool { return w.state.Load() == waiterParked }

// Reset makes a woken Waiter idle again.
func (w *Waiter) Reset() { w.state.Store(waiterIdle) }

// fire wakes w for why, if it is still parked; the caller has removed it from its shard's table.
func (w *Waiter) fire(why uint32) bool {
	if !w.state.CompareAndSwap(waiterParked, why) {
		return false
	}
	w.timer.Stop()
	w.store.parked.Add(-1)
	w.wake()
	return true
}

// timeout is w's timer: the hold time is up. A timer that fired for an earlier parking of w, whose owner
// has parked it again with a later Deadline since, re-arms itself instead.
func (w *Waiter) timeout() {
	if d := time.Until(time.Unix(0, w.until.Load())); d > 0 {
		w.timer.Reset(d)
		return
	}
	sh := w.sh
	sh.mu.Lock()
	if w.state.Load() == waiterParked {
		sh.unpark(w)
	}
	sh.mu.Unlock()
	w.fire(WokeTimeout)
}

// Unpark takes w back from the store if it is parked (its connection closed, or must answer now); it
// reports whether it did. A Waiter that woke meanwhile stays woken.
func (s *Store) Unpark(w *Waiter) bool {
	if !w.Parked() {
		return false
	}
	sh := w.sh
	sh.mu.Lock()
	ok := w.state.CompareAndSwap(waiterParked, waiterGone)
	if ok {
		sh.unpark(w)
	}
	sh.mu.Unlock()
	if ok {
		w.timer.Stop()
		s.parked.Add(-1)
	}
	return ok
}

// unpark removes w from the shard's parked table, under the shard lock.
func (sh *shard) unpark(w *Waiter) {
	ws := sh.parked[w.h]
	if i := slices.Index(ws, w); i >= 0 {
		ws = slices.Delete(ws, i, i+1)
	}
	if len(ws) == 0 {
		delete(sh.parked, w.h)
	} else {
		sh.parked[w.h] = ws
	}
}

// wakeParked wakes the reads parked on the key hashed to h after a client's write of it (why: the write's
// cause), or every parked read of the shard for flush_all (h == 0). Under the shard lock.
func (sh *shard) wakeParked(h uint64, why cause) {
	var reason uint32
	switch why {
	case causeStore, causeRejected:
		reason = WokeRetry
	case causeDelete:
		reason = WokeMiss
	case causeFlush:
		if h != 0 {
			return // an item flush_all made invisible, found later: not a write
		}
		for k, ws := range sh.parked {
			delete(sh.parked, k)
			for _, w := range ws {
				w.fire(WokeMiss)
			}
		}
		return
	default:
		return // expiries and evictions are not writes
	}
	ws, ok := sh.parked[h]
	if !ok {
		return
	}
	delete(sh.parked, h)
	for _, w := range ws {
		w.fire(reason)
	}
}

// AppendMiss serves a get-family read of key (hashed k) that found no live item, when grace or hold is on:
// it appends the value block (hdr, as AppendGet) when a value is there after all or the key is in grace,
// and otherwise takes the key's lease for this read or parks w (nil: this read may not park). See
// grace.go and the comment at the top of this file.
func (s *Store) AppendMiss(dst, key []byte, k Hashed, withCas bool, hdr ValueHeader, w *Waiter) ([]byte, MissOutcome) {
	if !validKey(key) || (s.graceSecs == 0 && s.hold == 0) {
		return dst, MissPlain
	}
	sh, now := s.lockHashed(k.Sum)
	defer sh.mu.Unlock()
	out := MissHit
	ref, b := sh.findForRead(k, key, now) // a write may have landed since the caller's read
	if ref != slab.NilRef {
		sh.bumpRead(ref, b, now)
	} else {
		var refill bool
		if b, refill = sh.graceRead(k.Sum, key, now); refill {
			return dst, MissRefill
		}
		out = MissGrace
	}
	if b != nil {
		return appendBlock(sh.al, dst, key, b, withCas, hdr), out
	}
	if s.hold == 0 {
		return dst, MissPlain
	}
	if _, granted := sh.leases.Claim(k.Sum, s.nowNano()); granted {
		return dst, MissRefill
	}
	if w == nil {
		return dst, MissPlain
	}
	if s.parked.Add(1) > s.maxParked {
		s.parked.Add(-1)
		return dst, MissRefused
	}
	sh.park(w, k.Sum)
	return dst, MissParked
}

// park registers w for the key hashed to h until its Deadline, under the shard lock.
func (sh *shard) park(w *Waiter, h uint64) {
	w.h, w.sh, w.store = h, sh, sh.st
	if sh.parked == nil {
		sh.parked = make(map[uint64][]*Waiter)
	}
	sh.parked[h] = append(sh.parked[h], w)
	w.until.Store(w.Deadline)
	w.state.Store(waiterParked)
	d := max(time.Until(time.Unix(0, w.Deadline)), 0)
	if w.timer == nil {
		w.timer = time.AfterFunc(d, w.timeout)
	} else {
		w.timer.Reset(d)
	}
}

// HoldFor is Config.Hold: how long a read may stay parked in all (0: hold is off).
func (s *Store) HoldFor() time.Duration { return s.hold }

// Parked is how many reads are parked now.
func (s *Store) Parked() int64 { return s.parked.Load() }

// Herd reports whether grace or hold is on: a get-family miss then goes through AppendMiss.
func (s *Store) Herd() bool { return s.graceSecs > 0 || s.hold > 0 }
