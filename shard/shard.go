package shard

import (
	"sync/atomic"

	"github.com/zeebo/xxh3"

	"github.com/leasecached/leasecached/lease"
	"github.com/leasecached/leasecached/slab"
)

// shard is one lock domain: its index, its size classes and their pages,
// its counters. Every field but view is guarded by mu.
type shard struct {
	mu shardLock
	// missCause is why the last find came back empty while an item was indexed (expired or
	// flushed), so a fetch can count get_expired / get_flushed as memcached does.
	//
	// It and foundSlot are written by every find, so they share the lock's cache line: the two event
	// loops take every shard's lock in turn, and each other line a find writes would move between their
	// cores as well.
	missCause cause
	// foundSlot is the index slot where the last find found its key: where a store or delete that
	// follows (mutate) looks for the entry first. Anything that moves entries between the two (an
	// eviction while allocating) can leave it pointing at another entry, so it is a hint that only the
	// entry's ref confirms (index.holds).
	foundSlot uint64
	// totalItems is memcached's total_items, the one counter every store bumps: here rather than in stats,
	// on the line the store has just taken from the other CPU with the lock, it costs no second line moved.
	totalItems uint64
	st         *Store
	al         *slab.Allocator
	idx        index
	// view is a copy of idx as of its last resize, for Prefetch, which probes it without the lock: the
	// slots it names are current (the copy shares them), and a table it names stays mapped until no
	// Prefetch that could have loaded it is running (retireTable).
	view atomic.Pointer[index]
	// retired holds idx's outgrown tables, already given back to the system (slab.WordBuf.Discard) but
	// still mapped for Prefetch calls that may be reading them; freeRetired unmaps them.
	retired []*slab.WordBuf

	// ghosts indexes this shard's stale values (items with flagGhost); leases are its lease table.
	// Both change only under mu, in the same critical section as the item they concern.
	ghosts index
	leases *lease.Table
	// parked are the reads parked on this shard's keys, by key hash (hold.go); nil until the first.
	parked map[uint64][]*Waiter

	// share is this shard's part of the memory limit in bytes (byteShare): its pages and its hash tables
	// together stay within it (memlimit.go).
	share int64
	// roomShare is this shard's part of the pages the data directory's file system has room for
	// (fitRoom), 0 when that room is not short of the memory limit.
	roomShare int

	stats shardStats
	cls   []classStats // per size class, indexed like slab classes

	// noGhost is set while memory is being reclaimed for reuse: removed items must be freed, not kept
	// as stale values.
	noGhost bool

	// sums computes item seals in a data directory (persist.go); nil without one. sealKey is the
	// directory's (slab.Backing.SealKey), mixed into every seal.
	sums    *xxh3.Hasher
	sealKey uint64
	// undo is, by class, the chunk an item is copied into while it changes in place in a data directory
	// (undo.go); a NilRef ref until the first such change in the class, and after a page move took its
	// page. nil without a data directory.
	undo []undoChunk
	// kept is the versions changes keep until a sync (keep.go); nil unless the directory keeps them.
	kept *keeper

	reclaimCur    slab.Cursor
	reclaimOldest []uint32  // per class: oldest store time seen in the current reclaimer pass
	reclaimPass   passCount // what the current pass has seen (under mu)
	// The background reclaimer's back-off (see passWait), touched only by its goroutine.
	reclaimWait int  // ticks between passes
	reclaimIdle int  // ticks skipped since the last pass ended
	reclaimMid  bool // a pass is under way: the next tick goes on with it

	// Padding to a whole number of cache lines, which ends every shard with 8 bytes nobody touches
	// (TestShardLayout). Go places the shards' slice at a line boundary, or 8 bytes past one when it puts
	// its allocation header first, so each shard's lock and the fields every find writes are on one line,
	// which holds nothing else of any other shard but the previous one's padding.
	_ [8]byte
}

func (sh *shard) init(s *Store, self int, share int64) {
	sh.st = s
	sh.al = slab.NewAllocator(s.arena, s.classes, 1)
	sh.al.SetOwner(self)
	if s.persist != nil {
		sh.sums = xxh3.New() // and sealKey once the directory is open (adoptStored)
		sh.undo = make([]undoChunk, s.classes.Count())
		for i := range sh.undo {
			sh.undo[i].ref = slab.NilRef
		}
		if s.persist.back.Keeps() {
			sh.kept = &keeper{cls: make([]keptList, s.classes.Count()), keys: make(map[uint64]struct{})}
		}
	}
	sh.idx = newIndex(indexInitialSlots)
	sh.idx.retire = sh.retireTable
	sh.publishIndex()
	sh.ghosts = newIndex(ghostIndexInitialSlots)
	sh.share = share
	sh.fitShare()
	sh.leases = lease.NewTable(s.tokens, s.leaseWindow, s.leaseEntries)
	sh.cls = make([]classStats, s.classes.Count())
	sh.reclaimOldest = make([]uint32, s.classes.Count())
}

// chunk is the chunk at r.
func (sh *shard) chunk(r slab.Ref) []byte { return sh.al.Chunk(r) }

// find returns key's live item, or NilRef. A dead (expired or flushed) item
// met on the way is removed, as memcached does lazily on access.
func (sh *shard) find(h uint64, key []byte, now int64) (slab.Ref, []byte) {
	return sh.findHinted(Hashed{Sum: h}, key, now)
}

// findHinted is find for a key whose Hashed may carry Prefetch's slot hint. It tries the hinted slot
// first, and probes from the key's home slot when the entry there is not the key's.
//
// Why the hint: at the index's loads a probe reads about five slots, and a lookup after a Prefetch probed
// twice for the same entry (about 100 instructions of a pipelined get's 1900). The hint is checked, not
// trusted: the table may have shifted or grown since the Prefetch, which read it without the lock. Only the
// key decides; the tag check just spares reading an unrelated item.
func (sh *shard) findHinted(k Hashed, key []byte, now int64) (slab.Ref, []byte) {
	sh.missCause = causeNone
	ref, b := slab.NilRef, []byte(nil)
	slot := uint64(k.slot) - 1 // no hint (0) wraps to a slot past the table
	if r, ok := sh.idx.at(k.Sum, slot); ok {
		if c := sh.chunk(r); string(itemKey(c)) == string(key) {
			ref, b = r, c
		}
	}
	if ref == slab.NilRef {
		if slot, ref, b = sh.probeFor(k.Sum, key); ref == slab.NilRef {
			return slab.NilRef, nil
		}
	}
	sh.foundSlot = slot
	if why := sh.st.dead(b, now); why != causeNone {
		sh.missCause = why
		sh.mutate(k.Sum, ref, slab.NilRef, why, now)
		return slab.NilRef, nil
	}
	return ref, b
}

// probeFor returns the item indexed under key (of hash h), live or dead, and its slot; or NilRef.
func (sh *shard) probeFor(h uint64, key []byte) (uint64, slab.Ref, []byte) {
	p := sh.idx.probe(h)
	for {
		slot, ref, ok := sh.idx.next(&p)
		if !ok {
			return 0, slab.NilRef, nil
		}
		if b := sh.chunk(ref); string(itemKey(b)) == string(key) {
			return slot, ref, b
		}
	}
}

// hashOf rehashes an indexed item's key (index growth, eviction).
func (sh *shard) hashOf(r slab.Ref) uint64 { return Hash(itemKey(sh.chunk(r))) }

// freeItem returns all chunks of the item at head to their classes.
func (sh *shard) freeItem(head slab.Ref) { sh.freeHead(head, sh.chunk(head)) }

// freeHead is freeItem for a caller that has the head's chunk b.
func (sh *shard) freeHead(head slab.Ref, b []byte) {
	if itemChained(b) {
		for r := readRef(b[chainOff(b):]); r != slab.NilRef; {
			next := readRef(sh.chunk(r)[offPartNext:])
			sh.al.Free(r)
			r = next
		}
	}
	sh.al.Free(head)
}

// allocItem allocates the chunk(s) for an item of klen+vlen bytes with header layout lay (layoutOf)
// and returns its pinned head, state and layout set (chained or not), part links written.
// On failure nothing stays allocated.
func (sh *shard) allocItem(klen, vlen int, lay byte, now int64) (slab.Ref, []byte, bool) {
	c := sh.st.classes
	if id, ok := c.For(sh.room(headerLen(lay, false) + klen + vlen)); ok {
		r, ok := sh.allocChunk(id, now)
		if !ok {
			return slab.NilRef, nil, false
		}
		b := sh.chunk(r)
		sh.crashStep(newChunkTaken)
		// A free chunk may still hold an item whole, seal and all (a drained page's chunk is only marked
		// free): in a data directory its CAS must go first, so that a kill once the chunk is a head never
		// finds that item (doc/design/restart.md rule 1). Without one the store costs less than the check:
		// the header writes the line anyway.
		setItemCas(b, 0)
		b[offState] = kindHead | flagPinned
		b[offMeta] = lay
		sh.crashStep(newHeadTaken)
		return r, b, true
	}
	big := c.Largest()
	head, ok := sh.allocChunk(big, now)
	if !ok {
		return slab.NilRef, nil, false
	}
	hb := sh.chunk(head)
	setItemCas(hb, 0) // as above
	hb[offState] = kindHead | flagChained | flagPinned
	hb[offMeta] = lay
	link := hb[chainOff(hb):]
	writeRef(link, slab.NilRef)
	rem := vlen - (valueEnd(hb) - headerLen(lay, true) - klen)
	for rem > 0 {
		n := min(rem, slab.ChunkMax-partData)
		id, _ := c.For(partData + n)
		p, ok := sh.allocChunk(id, now)
		if !ok {
			sh.freeItem(head)
			return slab.NilRef, nil, false
		}
		pb := sh.chunk(p)
		pb[offState] = kindPart
		writeRef(pb[offPartNext:], slab.NilRef)
		writeRef(pb[offPartHead:], head)
		writeRef(link, p)
		link = pb[offPartNext:]
		rem -= n
	}
	return head, hb, true
}
