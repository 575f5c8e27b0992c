package shard

import "github.com/leasecached/leasecached/slab"

const (
	// ghostIndexInitialSlots starts the ghost index small: most shards hold few stale values.
	ghostIndexInitialSlots = 1 << 6
	// leaseBudgetDivisor carves 1/64 of -m out for lease tables (e.g. 1 MiB of 64 MiB: about 21k
	// outstanding leases), so lease bookkeeping counts against the memory limit instead of adding to it.
	leaseBudgetDivisor = 64
	// minLeaseBudget keeps room for about 1,300 outstanding leases however small -m is.
	minLeaseBudget = 64 << 10
)

// splitMemory divides the -m limit between slab pages and lease bookkeeping. Below a page and a lease
// budget the arena keeps one whole page and the (small) lease budget comes on top: a server must be able
// to store something.
func splitMemory(limit int64) (arenaBytes, leaseBytes int64) {
	leaseBytes = max(limit/leaseBudgetDivisor, minLeaseBudget)
	arenaBytes = limit - leaseBytes
	if arenaBytes < slab.PageSize {
		arenaBytes = min(limit, slab.PageSize)
	}
	return arenaBytes, leaseBytes
}

// Stale values ("ghosts"). When a key is deleted or its item expires, leases.md rule 4 keeps the last value
// for the stale window so that lease-get can hand it to readers waiting on a refill. The item stays where it
// is in slab memory (so it counts against -m), moves from the main index to the ghost index (so no command
// but lease-get can see it), gets flagGhost, and its exptime becomes the end of its stale window. A ghost
// leaves when its window ends, when the key is stored again, on flush_all, or under memory pressure: its
// CLOCK bit is cleared, and sweep takes ghosts before live items. A ghost keeps the end of its window in its
// time field (every item has one; not every item has an exptime field), see Store.dead.

// toGhost moves the item at old, just unlinked from the main index at the hash h, into the ghost index,
// unless its stale window is already over. It reports whether it did; if not, the caller frees the item.
func (sh *shard) toGhost(h uint64, old slab.Ref, why cause, now int64) bool {
	if sh.noGhost {
		return false
	}
	b := sh.chunk(old)
	var until int64
	meta := b[offMeta] &^ (metaStale | metaTokenSent | metaGrace) // the meta protocol's bits mean nothing on a ghost
	switch why {
	case causeDelete:
		until = now + sh.st.staleSecs
	case causeExpire:
		until = int64(itemExp(b)) + sh.st.ghostSecs()
		if sh.st.graceSecs > 0 {
			meta |= metaGrace
		}
	default:
		return false
	}
	if until <= now {
		return false
	}
	b[offMeta] = meta
	sh.dropGhost(h, itemKey(b), now) // at most one ghost per key
	grew := false
	if sh.ghosts.needsGrow() {
		sh.ghosts.grow(sh.hashOf)
		grew = true
	}
	for !sh.ghosts.insert(h, old) {
		sh.ghosts.grow(sh.hashOf)
		grew = true
	}
	if grew {
		sh.fitShare() // pages over the new allowance go back within a reclaimer tick (releaseExcess)
	}
	b[offState] = b[offState]&^flagVisited | flagGhost
	setItemTime(b, uint32(until)) // a ghost's last access is never read: its time field is free
	// Changed in place: a live copy copies the chunk into DIR at the next sync, or a restart from DIR would
	// find the deleted item live (restart-live.md rule 10).
	sh.al.Wrote(old, len(b))
	sh.stats.staleItems++
	return true
}

// ghostSecs is how long an expired value is kept: the stale window, or the grace if longer.
func (s *Store) ghostSecs() int64 { return max(s.staleSecs, s.graceSecs) }

// ghostStart is when a stale value became stale: its item's expiry, or its delete.
func (s *Store) ghostStart(b []byte) int64 {
	if b[offMeta]&metaGrace != 0 {
		return int64(itemExp(b))
	}
	return int64(itemTime(b)) - s.staleSecs
}

// findGhost returns key's stale value, if one is within its window.
func (sh *shard) findGhost(h uint64, key []byte, now int64) (slab.Ref, []byte) {
	if sh.ghosts.count == 0 {
		return slab.NilRef, nil
	}
	p := sh.ghosts.probe(h)
	for {
		_, ref, ok := sh.ghosts.next(&p)
		if !ok {
			return slab.NilRef, nil
		}
		b := sh.chunk(ref)
		if string(itemKey(b)) != string(key) {
			continue
		}
		if why := sh.st.dead(b, now); why != causeNone {
			sh.ghostEnded(b, why)
			sh.freeGhost(h, ref)
			return slab.NilRef, nil
		}
		return ref, b
	}
}

// dropGhost discards key's stale value, if any: a successful store replaces it (rule 4).
func (sh *shard) dropGhost(h uint64, key []byte, now int64) {
	if sh.ghosts.count == 0 {
		return
	}
	if ref, _ := sh.findGhost(h, key, now); ref != slab.NilRef {
		sh.freeGhost(h, ref)
	}
}

// freeGhost unlinks a ghost from the ghost index and frees its chunks.
func (sh *shard) freeGhost(h uint64, ref slab.Ref) {
	slot, ok := sh.ghosts.slotOf(h, ref)
	if !ok {
		panic("shard: stale value to free is not indexed") // broken invariant: memory would be corrupted
	}
	sh.ghosts.remove(slot)
	sh.stats.staleItems--
	sh.freeItem(ref)
}

func isGhost(b []byte) bool { return b[offState]&flagGhost != 0 }
