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
//	old != NilRef, nu == old:    the item was rewritten in place (incr/decr; a store's value is
//	                             rewritten in place by overwrite, not here)
//	old != NilRef, nu != NilRef: nu replaces old, old is freed
//	old != NilRef, nu == NilRef: old is unlinked and freed
//	old == nu == NilRef, causeFlush: flush_all (every key of the shard)
//
// h is the key's hash. Leases (a later issue) hook in here: invalidation on
// every write/delete/flush, keeping the last value as stale on delete or
// expiry, all atomically with the item change because we hold the lock.
func (sh *shard) mutate(h uint64, old, nu slab.Ref, why cause, now int64) {
	var nb []byte // the new item's chunk, looked up once
	if nu != slab.NilRef && nu != old {
		nb = sh.chunk(nu)
		if sh.sums != nil {
			// The item is whole: it may survive a restart (persist.go). A change in place (nu == old) was
			// sealed already (undo.go).
			sh.seal(nu, nb)
		}
	}
	// Lease invalidation happens here, under the same lock as the item change, so no lease-set can
	// observe the key between "changed" and "lease cancelled" (the stale-set race leases exist for).
	sh.invalidateLeases(h, why)
	switch {
	case old == slab.NilRef && nu == slab.NilRef:
		return // flush_all: items and stale values die lazily via Store.dead; nothing to unlink now
	case old == nu:
		return // in place: index and accounting unchanged
	}
	var ob []byte
	if old != slab.NilRef {
		if ob = sh.chunk(old); isGhost(ob) {
			// A stale value leaving (window over, flushed, evicted): it was accounted out when it became one.
			sh.ghostEnded(ob, why)
			sh.freeGhost(h, old)
			return
		}
	}
	if nu != slab.NilRef {
		sh.dropGhost(h, itemKey(nb), now)
		sh.totalItems++
	}
	if old == slab.NilRef {
		sh.account(nu, +1)
		if sh.indexInsert(h, nu) {
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
	if nu != slab.NilRef {
		sh.accountReplace(old, nu, ob, nb)
	} else {
		sh.account(old, -1)
	}
	sh.recordRemoval(old, why, now)
	if nu == slab.NilRef {
		if !sh.toGhost(h, old, why, now) {
			sh.freeHead(old, ob)
		}
		return
	}
	sh.retire(h, old, ob)
}

// indexInsert files ref under hash h in the main index, growing it first when it is full and again while
// a probe would be too long; it reports whether it grew.
func (sh *shard) indexInsert(h uint64, ref slab.Ref) (grew bool) {
	if sh.idx.needsGrow() {
		sh.idx.grow(sh.hashOf)
		grew = true
	}
	for !sh.idx.insert(h, ref) {
		sh.idx.grow(sh.hashOf)
		grew = true
	}
	return grew
}

// inPlaceClass reports whether a store's new item of n bytes (header, key and value) belongs in the chunk
// b of a live item, and the chunk's class: b is not chained, and its chunk is of the very size class the
// new item would be allocated from (class sizes differ), so rewriting it wastes no more memory than a
// fresh chunk would.
func (sh *shard) inPlaceClass(b []byte, n int) (int, bool) {
	id, ok := sh.st.classes.For(n)
	return id, ok && !itemChained(b) && sh.st.classes.Size(id) == len(b)
}

// overwrite is a store's replacement of a live item (bytes b, its chunk of class id) done in its own
// chunk, when inPlaceClass says so: the same change as a new item linked in its place (mutate with
// causeStore), and it returns the new CAS. The chunk becomes a fresh item: new CAS and time, not fetched,
// not visited. storeItem has already cancelled the key's lease, as it does for every write. The key has no
// stale value to drop: linking the item dropped it, and none is made while the key has a live item.
//
// Why in place: a replacement through a new chunk pops a free chunk whose link and lines are cold (a
// cache miss per line written), rewrites the index entry and pushes the old chunk on the free list.
// Rewriting the old chunk, whose lines the lookup just brought in, does none of that. It is as safe as
// freeing it, which let the next store take it: no reader keeps a view of an item past the shard lock
// (replies copy values out).
//
// With a data directory storeItem keeps a sealed copy of the old item while it rewrites it (undo.go): a
// process killed during the rewrite would otherwise lose both values (doc/design/restart.md rule 2).
func (sh *shard) overwrite(b []byte, id int, key, value []byte, flags, exp uint32, meta, lay byte, now int64) uint64 {
	was := itemBytes(b)
	b[offState] = kindHead
	b[offMeta] = lay
	cas := sh.st.cas.Add(1)
	writeHeader(b, cas, exp, uint32(now), flags, key, len(value), meta)
	copy(b[dataOff(b):], value)
	// account's change, for an item that stays in its class. The counters are written only when it is not
	// zero: each is on a line that a write would take from the other CPU (the class counters' on every store).
	if d := itemBytes(b) - was; d != 0 {
		sh.stats.bytes += d
		sh.cls[id].memRequested += d
	}
	sh.totalItems++
	return cas
}

// invalidateLeases applies leases.md rule 3: every change or removal of a key's value by a client
// cancels its outstanding lease, flush_all cancels all. Evictions and expiries are not client writes and
// leave leases alone (a refill in progress for an expired key is exactly what a lease is for). The same
// writes end a hold (hold.go), and a delete a grace (rule 7, grace.go).
func (sh *shard) invalidateLeases(h uint64, why cause) {
	if len(sh.parked) > 0 {
		sh.wakeParked(h, why)
	}
	if why == causeDelete {
		sh.endGrace(h)
	}
	if sh.leases.Len() == 0 {
		return // every write calls this: a store that hands out no leases should not pay for the clock
	}
	switch why {
	case causeStore, causeDelete, causeRejected:
		if sh.leases.Invalidate(h, sh.st.nowNano()) {
			sh.unclaimGhost(h)
		}
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

// accountReplace moves the occupancy stats from old to nu (chunks ob and nb). Nothing is written when both
// have one size in one class, as when a set replaces a value with one of its size through a new chunk:
// each counter is on a line that a write would take from the other CPU (see overwrite).
func (sh *shard) accountReplace(old, nu slab.Ref, ob, nb []byte) {
	if len(ob) == len(nb) && itemBytes(ob) == itemBytes(nb) { // one chunk size is one class
		return
	}
	sh.account(nu, +1)
	sh.account(old, -1)
}

// recordRemoval counts why an item left.
func (sh *shard) recordRemoval(r slab.Ref, why cause, now int64) {
	if why != causeEvict && why != causeExpire && why != causeFlush {
		return // nothing is counted for the others
	}
	b := sh.chunk(r)
	cs := &sh.cls[sh.al.ClassOf(r)]
	unfetched := b[offState]&flagFetched == 0
	switch why {
	case causeEvict:
		sh.logEviction(b, now)
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
