package shard

import (
	"github.com/leasecached/leasecached/slab"
)

// allocAttempts bounds the free/sweep/move rounds of one chunk allocation;
// each successful round frees a chunk of the wanted class, so two suffice in
// practice and the bound only guards against a broken invariant.
const allocAttempts = 4

// allocChunk returns a chunk of class id, making room when the class has no
// free chunk and the page budget is spent: first a page that holds no item,
// from another class (emptypage.go), then CLOCK within the class (reclaiming
// dead items on the way), else a page taken from another class.
func (sh *shard) allocChunk(id int, now int64) (slab.Ref, bool) {
	for range allocAttempts {
		if r, ok := sh.al.Alloc(id); ok {
			return r, true
		}
		if sh.takeEmptyPage(id, now) || sh.keptOver(id) && sh.dropKeptOf(id) {
			continue
		}
		if sh.rebalanceDue(id) && sh.rebalance(id, now) {
			continue
		}
		if sh.sweep(id, now) {
			continue
		}
		if !sh.movePage(id, now) && !sh.dropKeptOf(id) {
			break
		}
	}
	sh.cls[id].outOfMemory++
	return slab.NilRef, false
}

// itemOf resolves a used chunk to the head of its item; ok is false for a
// chunk of no item (free, an undo chunk, a kept version's).
func (sh *shard) itemOf(r slab.Ref) (slab.Ref, []byte, bool) {
	b := sh.chunk(r)
	switch b[offState] & kindMask {
	case kindHead:
		return r, b, true
	case kindPart:
		h := readRef(b[offPartHead:])
		if hb := sh.chunk(h); hb[offState]&kindMask == kindHead {
			return h, hb, true
		}
		// a part of a kept version (keep.go): no item
	}
	return slab.NilRef, nil, false
}

// sweep runs class id's CLOCK hand until it frees one chunk of the class:
// a dead item is reclaimed whatever its bit, a visited one gets a second
// chance, the first unvisited one is evicted. Pinned items are skipped.
// Two turns of the hand always suffice unless everything is pinned.
func (sh *shard) sweep(id int, now int64) bool {
	st := sh.al.Stats(id)
	for range 2*(st.TotalChunks-st.FreeChunksEnd) + 1 {
		r := sh.al.Hand(id)
		if r == slab.NilRef {
			return false
		}
		head, b, ok := sh.itemOf(r)
		if !ok || b[offState]&flagPinned != 0 {
			continue
		}
		if why := sh.st.dead(b, now); why != causeNone {
			sh.stats.reclaimed++
			sh.cls[sh.al.ClassOf(head)].reclaimed++
			sh.release(head, why, now)
			sh.stats.directReclaims++
			return true
		}
		if b[offState]&flagVisited != 0 {
			b[offState] &^= flagVisited
			continue
		}
		sh.release(head, causeEvict, now)
		sh.stats.directReclaims++
		return true
	}
	return false
}

// unlink removes the indexed item at head. An expired one may stay on as a stale value (ghost.go).
func (sh *shard) unlink(head slab.Ref, why cause, now int64) {
	sh.mutate(sh.hashOf(head), head, slab.NilRef, why, now)
}

// release removes the item at head to reuse its memory now: unlike unlink it never keeps a stale value,
// since the caller needs the chunks back.
func (sh *shard) release(head slab.Ref, why cause, now int64) {
	sh.noGhost = true
	sh.unlink(head, why, now)
	sh.noGhost = false
}

// movePage gives class to a page taken from the class with the most pages (memcached's slab reassign),
// drained first: its hot items move to other chunks of their class, the rest are evicted (drainPage).
// Pages holding a pinned item are skipped. Where pages park (drain.go), class to needs the page now: its
// items are evicted, none moved.
func (sh *shard) movePage(to int, now int64) bool {
	moved, ok := sh.drainVictimPage(to, now, !sh.al.Parks())
	if !ok {
		return false
	}
	if gave, _ := sh.endDrain(to, moved); !gave {
		return false
	}
	sh.stats.slabsMoved++
	return true
}

// drainVictimPage picks a page of the class with the most pages (never class keep; -1 keeps none),
// skipping pages that hold a pinned item and falling back to the next largest class, and drains it
// (drainPage, which moves hot items when rescue is set): the caller ends the drain. moved is how many
// items moved; ok is false if no class has a page that can be emptied.
func (sh *shard) drainVictimPage(keep int, now int64, rescue bool) (moved int, ok bool) {
	n := sh.st.classes.Count()
	var tried [slab.MaxClasses]bool
	for range n {
		victim, most := -1, 0
		for id := range n {
			if id == keep || tried[id] {
				continue
			}
			if p := sh.al.Pages(id); p > most {
				victim, most = id, p
			}
		}
		if victim < 0 {
			return 0, false
		}
		tried[victim] = true
		if p, ok := sh.victimPage(victim); ok {
			return sh.drainPage(p, now, rescue), true
		}
	}
	return 0, false
}

// victimPage is the page class id gives up: the one under its CLOCK hand, whose items are those the class
// would evict next, else the first one holding no pinned item; false if every page holds one.
func (sh *shard) victimPage(id int) (uint32, bool) {
	if r := sh.al.PeekHand(id); r != slab.NilRef && !sh.pagePinned(r.Page()) {
		return r.Page(), true
	}
	for i := range sh.al.Pages(id) {
		if p := sh.al.PageAt(id, i); !sh.pagePinned(p) {
			return p, true
		}
	}
	return 0, false
}

func (sh *shard) pagePinned(p uint32) bool {
	first, size, n := sh.al.PageChunks(p)
	for i := range n {
		_, b, ok := sh.itemOf(first + slab.Ref(i*size))
		if ok && b[offState]&flagPinned != 0 {
			return true
		}
	}
	return false
}
