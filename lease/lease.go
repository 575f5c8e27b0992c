// Package lease holds the rules of Facebook-style leases (NSDI 2013, section 3.2.1) for the keys of one
// shard: at most one valid lease per key per lease window, a hot miss for everyone else while it runs,
// and a token that stops being accepted once it is consumed, lapses, or is invalidated by a write.
//
// The wire contract is doc/leases.md. This package knows nothing of items or connections: the
// shard that owns a Table calls it under the same lock that guards the key's item, which is what makes
// "delete, then invalidate the lease" one atomic step (no stale set can slip between them).
//
// A Table is keyed by the key's 64-bit hash, not the key bytes: two keys would have to collide on all 64
// bits for a token issued for one to be checked against the other, and even then the token itself (unique
// per run) must match. That keeps the table a pointer-free map of integers, which the GC never scans.
//
// Memory is bounded: a Table holds at most MaxEntries leases. Lapsed entries are swept away; when the
// table is full of live leases, the one closest to lapsing is dropped (its holder's lease-set then gets
// NOT_STORED, which is always safe: it only costs one uncached fill).
package lease

import (
	"sync/atomic"
	"time"
)

// Tokens the wire contract reserves.
const (
	// HotMissToken is sent to readers that must wait: another client holds the key's lease.
	HotMissToken uint64 = 1
	// reservedPrefix is the top 32 bits of the tokens mcrouter issues itself on failover; ours never use it.
	reservedPrefix = 0x7aceb00c
	// firstToken is the smallest token we issue: 0 means "no token", 1 is the hot miss.
	firstToken = 2
)

// Defaults from the wire contract.
const (
	DefaultWindow      = 10 * time.Second
	DefaultStaleWindow = 10 * time.Second
)

// EntryBytes is what one outstanding lease costs in a Table: the key hash, the token and the deadline,
// plus the Go map's own per-entry overhead (measured: about 2x the payload). Owners size MaxEntries from
// their byte budget with it, so lease bookkeeping is counted against the memory limit.
const EntryBytes = 48

// sweepBudget bounds how many entries one Sweep call looks at, so reclaim never stalls a shard.
const sweepBudget = 1024

// victimSample is how many entries a full table samples to pick the one to drop.
const victimSample = 16

// Tokens issues lease tokens that are unique for the life of the process, shared by all shards.
type Tokens struct{ next atomic.Uint64 }

// NewTokens starts the sequence at start (values below firstToken are raised to it). Starting each run
// at a different point (e.g. from the clock) keeps a restarted server from accepting a token issued by
// its previous run.
func NewTokens(start uint64) *Tokens {
	t := &Tokens{}
	if start < firstToken {
		start = firstToken
	}
	// Keep far away from wrap-around so the sequence never returns to 0 and 1 within a run.
	start &= (1 << 62) - 1
	if start < firstToken {
		start = firstToken
	}
	t.next.Store(start - 1)
	return t
}

// Next returns a fresh token: never 0 or 1, never in mcrouter's reserved range, never repeated.
func (t *Tokens) Next() uint64 {
	for {
		v := t.next.Add(1)
		if v >= firstToken && v>>32 != reservedPrefix {
			return v
		}
		if v>>32 == reservedPrefix {
			// Jump past the whole reserved range at once; CompareAndSwap so concurrent callers skip it once.
			t.next.CompareAndSwap(v, (reservedPrefix+1)<<32-1)
		}
	}
}

// Counters are a Table's statistics, named as `stats` reports them.
type Counters struct {
	Grants        uint64 // lease_grants
	HotMisses     uint64 // lease_hot_misses
	StaleServed   uint64 // lease_stale_served (counted by the owner, which sees the stale value)
	SetsStored    uint64 // lease_sets_stored
	SetsRejected  uint64 // lease_sets_rejected
	Invalidations uint64 // lease_invalidations: valid leases cancelled by a write, delete or flush
	// Grace (doc/leases.md, "Grace and hold"), counted by the owner, which sees the grace copy.
	GraceHits    uint64 // get_grace_hits: get-family reads answered with a grace copy
	GraceRefills uint64 // grace_refills: get-family misses that took the key's lease to refill it
	GraceLapses  uint64 // grace_lease_lapses: grace refills handed out again because the last one lapsed
}

// Add accumulates o into c.
func (c *Counters) Add(o Counters) {
	c.Grants += o.Grants
	c.HotMisses += o.HotMisses
	c.StaleServed += o.StaleServed
	c.SetsStored += o.SetsStored
	c.SetsRejected += o.SetsRejected
	c.Invalidations += o.Invalidations
	c.GraceHits += o.GraceHits
	c.GraceRefills += o.GraceRefills
	c.GraceLapses += o.GraceLapses
}

type entry struct {
	token    uint64
	deadline int64 // unix nanoseconds at which the lease lapses
}

// Table is the lease state of one shard. It is not safe for concurrent use: its owner serializes calls.
type Table struct {
	leases     map[uint64]entry
	tokens     *Tokens
	window     int64
	maxEntries int
	Counters   Counters
}

// NewTable returns a table issuing tokens from tokens, each valid for window, holding at most maxEntries.
func NewTable(tokens *Tokens, window time.Duration, maxEntries int) *Table {
	if maxEntries < 1 {
		maxEntries = 1
	}
	return &Table{leases: make(map[uint64]entry), tokens: tokens, window: int64(window), maxEntries: maxEntries}
}

// Window is the lease window this table grants.
func (t *Table) Window() time.Duration { return time.Duration(t.window) }

// Len is the number of entries held, lapsed ones not yet swept included.
func (t *Table) Len() int { return len(t.leases) }

// Acquire is a lease-get miss on the key hashed to h at time now (unix ns). It grants a fresh token
// when no valid lease is outstanding, and otherwise reports a hot miss (HotMissToken, false).
func (t *Table) Acquire(h uint64, now int64) (token uint64, granted bool) {
	if token, granted = t.Claim(h, now); !granted {
		t.Counters.HotMisses++
	}
	return token, granted
}

// Claim is Acquire for a miss that is not a lease-get (a plain read in grace or hold, doc/leases.md): the
// same grant, without counting a hot miss, which names an LVALUE block.
func (t *Table) Claim(h uint64, now int64) (token uint64, granted bool) {
	if e, ok := t.leases[h]; ok && e.deadline > now {
		return HotMissToken, false
	}
	if _, ok := t.leases[h]; !ok && len(t.leases) >= t.maxEntries {
		t.makeRoom(now)
	}
	token = t.tokens.Next()
	t.leases[h] = entry{token: token, deadline: now + t.window}
	t.Counters.Grants++
	return token, true
}

// Valid reports whether the key hashed to h has a valid lease at now.
func (t *Table) Valid(h uint64, now int64) bool {
	e, ok := t.leases[h]
	return ok && e.deadline > now
}

// Consume is a lease-set: it reports whether token is the key's current valid lease and, if so, uses it
// up, so the same token cannot store twice. The owner stores the value only when this returns true, and
// counts SetsStored / SetsRejected itself, since only it knows whether the store then succeeded.
func (t *Table) Consume(h, token uint64, now int64) bool {
	e, ok := t.leases[h]
	if !ok || e.token != token || token < firstToken || e.deadline <= now {
		return false
	}
	delete(t.leases, h)
	return true
}

// Invalidate cancels the key's lease, if any: every write and delete of the key calls it, so a reader
// that started filling before the write cannot store its now-old value afterwards. It reports whether a
// valid lease was cancelled.
func (t *Table) Invalidate(h uint64, now int64) bool {
	e, ok := t.leases[h]
	if !ok {
		return false
	}
	delete(t.leases, h)
	if e.deadline > now {
		t.Counters.Invalidations++
		return true
	}
	return false
}

// InvalidateAll cancels every lease (flush_all).
func (t *Table) InvalidateAll(now int64) {
	for _, e := range t.leases {
		if e.deadline > now {
			t.Counters.Invalidations++
		}
	}
	clear(t.leases)
}

// Sweep drops lapsed entries, looking at no more than a bounded number of them, and reports how many it
// dropped. Owners call it from their background reclaim so memory is returned when windows pass.
func (t *Table) Sweep(now int64) int {
	dropped, seen := 0, 0
	for h, e := range t.leases {
		if seen++; seen > sweepBudget {
			break
		}
		if e.deadline <= now {
			delete(t.leases, h)
			dropped++
		}
	}
	if dropped > 0 && len(t.leases) == 0 {
		// Go maps never shrink; a fresh one gives back the buckets a burst of misses grew.
		t.leases = make(map[uint64]entry)
	}
	return dropped
}

// makeRoom frees one slot in a full table: a lapsed entry if the sweep finds one, else the sampled
// lease closest to lapsing.
func (t *Table) makeRoom(now int64) {
	if t.Sweep(now) > 0 {
		return
	}
	var victim uint64
	best, seen := int64(1<<63-1), 0
	for h, e := range t.leases {
		if e.deadline < best {
			victim, best = h, e.deadline
		}
		if seen++; seen >= victimSample {
			break
		}
	}
	delete(t.leases, victim)
}
