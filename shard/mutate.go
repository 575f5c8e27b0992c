package shard

import "github.com/leasecached/leasecached/slab"

// cause says why a shard's key->item mapping changes.
type cause uint8

const (
	causeNone     cause = iota
	causeStore          // set/add/replace/cas/append/prepend/incr/decr wrote a new value
	causeDelete         // delete command
	causeRejected       // a failed set dropped the old value (memcached's "avoid stale data")
	causeEvict          // memory pressure
	causeExpire         // exptime passed (lazy, reclaimer, or reused memory)
	causeFlush          // flush_all made the item invisible; also the flush_all event itself
	causeTouch          // mg T changed only the exptime (in place): like touch, no lease effect
	causeVivify         // mg N linked an empty placeholder: a read, so the key's lease stands
)

// mutate is the single choke point for changes to the shard's items, always
// called with sh.mu held:
//
//	old == NilRef, nu != NilRef: a new key is linked
//	old != NilRef, nu == old:    the item was rewritten in place (incr/decr)
//	old != NilRef, nu != NilRef: nu replaces old, old is freed
//	old != NilRef, nu == NilRef: old is unlinked and freed
//	old == nu == NilRef, causeFlush: flush_all (every key of the shard)
//
// h is the key's hash. Leases (a later issue) hook in here: invalidation on
// every write/delete/flush, keeping the last value as stale on delete or
// expiry, all atomically with the item change because we hold the lock.
func (sh *shard) mutate(h uint64, old, nu slab.Ref, why cause, now int64) {
	// Lease invalidation happens here, under the same lock as the item change, so no lease-set can
	// observe the key between "changed" and "lease cancelled" (the stale-set race leases exist for).
	sh.invalidateLeases(h, why)
	switch {
	case old == slab.NilRef && nu == slab.NilRef:
		return // flush_all: items and stale values die lazily via Store.dead; nothing to unlink now
	case old == nu:
		return // in place: index and accounting unchanged
	}
	if old != slab.NilRef && isGhost(sh.chunk(old)) {
		// A stale value leaving (window over, flushed, evicted): it was accounted out when it became one.
		sh.freeGhost(h, old)
		return
	}
	if nu != slab.NilRef {
		sh.dropGhost(h, itemKey(sh.chunk(nu)), now)
		sh.account(nu, +1)
		sh.stats.totalItems++
	}
	if old == slab.NilRef {
		grew := false
		if sh.idx.needsGrow() {
			sh.idx.grow(sh.hashOf)
			grew = true
		}
		for !sh.idx.insert(h, nu) {
			sh.idx.grow(sh.hashOf)
			grew = true
		}
		if grew {
			sh.indexGrew(nu, now)
		}
		return
	}
	slot, ok := sh.foundSlot, sh.idx.holds(sh.foundSlot, old)
	if !ok {
		slot, ok = sh.idx.slotOf(h, old)
	}
	if !ok {
		panic("shard: item to replace is not indexed") // broken invariant: memory would be corrupted
	}
	if nu != slab.NilRef {
		sh.idx.replace(slot, nu)
	} else {
		sh.idx.remove(slot)
	}
	sh.account(old, -1)
	sh.recordRemoval(old, why, now)
	if nu == slab.NilRef && sh.toGhost(h, old, why, now) {
		return
	}
	sh.freeItem(old)
}

// invalidateLeases applies leases.md rule 3: every change or removal of a key's value by a client
// cancels its outstanding lease, flush_all cancels all. Evictions and expiries are not client writes and
// leave leases alone (a refill in progress for an expired key is exactly what a lease is for).
func (sh *shard) invalidateLeases(h uint64, why cause) {
	if sh.leases.Len() == 0 {
		return // every write calls this: a store that hands out no leases should not pay for the clock
	}
	switch why {
	case causeStore, causeDelete, causeRejected:
		sh.leases.Invalidate(h, sh.st.nowNano())
	case causeFlush:
		if h == 0 {
			sh.leases.InvalidateAll(sh.st.nowNano())
		}
	}
}

// account adds (dir=+1) or removes (dir=-1) an item from the occupancy stats.
func (sh *shard) account(r slab.Ref, dir int64) {
	b := sh.chunk(r)
	cs := &sh.cls[sh.al.ClassOf(r)]
	n := itemBytes(b)
	sh.stats.currItems += dir
	sh.stats.bytes += dir * n
	cs.number += dir
	cs.memRequested += dir * n
}

// recordRemoval counts why an item left.
func (sh *shard) recordRemoval(r slab.Ref, why cause, now int64) {
	b := sh.chunk(r)
	cs := &sh.cls[sh.al.ClassOf(r)]
	unfetched := b[offState]&flagFetched == 0
	switch why {
	case causeEvict:
		sh.stats.evictions++
		cs.evicted++
		cs.evictsSinceCheck++
		if itemExp(b) != 0 {
			cs.evictedNonzero++
		}
		cs.evictedTime = now - int64(itemTime(b))
		if unfetched {
			sh.stats.evictedUnfetched++
			cs.evictedUnfetched++
		}
	case causeExpire, causeFlush:
		if unfetched {
			sh.stats.expiredUnfetched++
			cs.expiredUnfetched++
		}
	}
}
