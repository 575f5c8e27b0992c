package shard

import (
	"errors"

	"github.com/leasecached/leasecached/slab"
)

// Page moves keep what is hot.
//
// A page leaves its class for three reasons: the rebalancer gives it to a class evicting younger items
// (rebalance.go), a class with no page takes one (movePage), or the memory limit was lowered
// (releasePage). The items in it used to be evicted whole, whatever their use: the page is picked for the
// item under its class's CLOCK hand (or is simply the class's first page), not for the other items it
// holds, and one page holds hundreds of items. Keys read ten times a second went with it (issue 23: 4 of 12
// hot 3 KB keys lost under a flood of tiny sets at -m 64, which moved pages from their class to the tiny
// ones), although CLOCK itself, which spares a visited item, would never have evicted them.
//
// Now a page is drained instead (slab.Allocator.BeginDrain): it leaves its class first, so that
// allocations from the class cannot land in it, and then every item in it that its class's policy would
// keep is moved into another chunk of the same class (memcached's slab_rebalance_move "rescues" live items
// the same way); the rest are evicted, or reclaimed when dead. The chunk for a rescued item comes from the
// class's free list, else from the class's CLOCK hand (sweep), which evicts the class's next cold item in
// another page. A page move therefore costs its class the same number of items as before, but the ones
// CLOCK picks instead of the ones that happened to share the page. When the class has no other page, or
// every other item is pinned, the item is evicted as before.
//
// What a page move keeps (keepOnMove) is what CLOCK keeps, plus what was read in the last
// rescueRecentSecs: a page move acts as the hand passing over the page, but the hand may have cleared an
// item's bit a moment ago (the rebalancer takes the page the hand is in, which rescues of the previous move
// swept), and an item read several times a second must not lose on that timing. An item is kept by
// moving it: same CAS, flags, times, bits and value, and the same chunk size, so it stays in its class and
// its accounting does not change; leases name keys, not chunks, and are untouched. Ghosts (stale values for
// lease-get) are never rescued: they are what CLOCK takes first.
//
// Cost: a move copies at most the page's live bytes (1 MB) and sweeps the class for as many chunks, under
// the shard lock, once per page of evictions in the receiving class. Nothing changes on the read path
// (reads set the CLOCK bit and bump the item time exactly as before) and items keep their size: the
// only new state is the allocator's one draining page.

// rescueRecentSecs is how recent an item's last read must be for a page move to keep it whatever its CLOCK
// bit (see above). Item times are whole seconds, so 1 covers reads in the current and the previous second.
const rescueRecentSecs = 1

// keepOnMove says whether a page move should keep the live item whose head chunk is b (see above).
func keepOnMove(b []byte, now int64) bool {
	st := b[offState]
	if st&flagGhost != 0 {
		return false
	}
	if st&flagVisited != 0 {
		return true
	}
	// The time field moves on reads only once an item is fetched (bump): before that it is the store time.
	return st&flagFetched != 0 && now-int64(itemTime(b)) <= rescueRecentSecs
}

// drainPage empties page p, which holds no pinned item, for a page move: the hot items in it move to other
// chunks of its class (none unless rescue), the rest are evicted or reclaimed (see above), and so do its
// kept versions (keep.go), freed unless rescue. It returns how many items and kept versions moved. The
// caller ends the drain (endDrain).
//
// Where pages park (slab.Allocator.Parks), a chained item is evicted, not moved: moving it rewrites links
// in other pages in place, which a reboot could find without the copy they name (doc/design/restart.md
// rule 9).
func (sh *shard) drainPage(p uint32, now int64, rescue bool) (moved int) {
	first, size, n := sh.al.PageChunks(p)
	id := sh.al.ClassOf(first)
	if err := sh.al.BeginDrain(p); err != nil {
		panic("shard: " + err.Error()) // p is a page of this shard and nothing else drains: broken invariant
	}
	sh.dropUndo(p, id)
	parks := sh.al.Parks()
	for i := range n {
		r := first + slab.Ref(i*size)
		if sh.al.DrainFreed(r) { // a chained item's other part, freed with it
			continue
		}
		head, b, ok := sh.itemOf(r)
		if !ok {
			continue
		}
		why := sh.st.dead(b, now)
		if why == causeNone && rescue && keepOnMove(b, now) && !(parks && itemChained(b)) &&
			sh.rescue(r, head, id, now) {
			moved++
			continue
		}
		if why == causeNone {
			why = causeEvict
		}
		sh.release(head, why, now)
	}
	if rescue {
		moved += sh.rescueKept(p, id, now)
	} else {
		sh.dropKeptIn(p, id)
	}
	return moved
}

// endDrain ends the drain of a page from which moved items moved (drainPage): the page goes to class to
// (-1: back to the arena). Where pages park and an item moved, it is parked instead (slab.Allocator.
// ParkDrained), and no class gets it until the next sync: parked is true. gave is false when the page
// went to no class: parked, or refused (a data directory with no room left for it, slab.ErrPageRefused;
// the caller evicts, as when no page can move).
func (sh *shard) endDrain(to, moved int) (gave, parked bool) {
	var err error
	if moved > 0 && sh.al.Parks() {
		err, parked = sh.al.ParkDrained(), true
	} else {
		err = sh.al.EndDrain(to)
	}
	if errors.Is(err, slab.ErrPageRefused) {
		return false, false
	}
	if err != nil {
		panic("shard: " + err.Error()) // drainPage left a used chunk: broken invariant
	}
	return !parked, parked
}

// rescue moves chunk r of the draining page, the head or a part of the live item whose head is head, into
// another chunk of class id, the item otherwise unchanged; false if no chunk could be had (the caller
// evicts the item then).
func (sh *shard) rescue(r, head slab.Ref, id int, now int64) bool {
	hb := sh.chunk(head)
	pinned := hb[offState] & flagPinned
	hb[offState] |= flagPinned // the sweep that finds a chunk must not take this item (nor its other parts)
	nu, ok := sh.rescueChunk(id, now)
	hb[offState] = hb[offState]&^flagPinned | pinned
	if !ok {
		return false
	}
	// Same class, same size: header, key, value, seal, bits and links alike. A head's CAS and seal go
	// last, in that order, since copy writes its bytes in no set order: the chunk may hold an earlier
	// version of this item, which had the same CAS, with its seal (restart.md rule 1, as moveItem).
	nb, ob := sh.chunk(nu), sh.chunk(r)
	if r == head && sh.sums != nil {
		sh.copySealed(nb, ob)
	} else {
		copy(nb, ob)
	}
	// Every chunk written here is marked for a live copy's sync (Wrote): the copy, and the links
	// rewritten in place, or DIR keeps chains that lead to freed chunks (restart-live.md rule 10).
	sh.al.Wrote(nu, len(nb))
	if r == head {
		h := Hash(itemKey(nb))
		slot, found := sh.idx.slotOf(h, r)
		if !found {
			panic("shard: item to rescue is not indexed") // broken invariant: memory would be corrupted
		}
		sh.idx.replace(slot, nu)
		if itemChained(nb) {
			for pr := readRef(nb[chainOff(nb):]); pr != slab.NilRef; {
				pb := sh.chunk(pr)
				writeRef(pb[offPartHead:], nu)
				sh.al.Wrote(pr, len(pb))
				pr = readRef(pb[offPartNext:])
			}
		}
	} else {
		// r is a part: rewrite the link that names it, the head's or the previous part's.
		holder, hc := head, hb
		link := hb[chainOff(hb):]
		for readRef(link) != r {
			holder = readRef(link)
			hc = sh.chunk(holder)
			link = hc[offPartNext:]
		}
		writeRef(link, nu)
		sh.al.Wrote(holder, len(hc))
	}
	sh.al.Free(r)
	sh.cls[id].rescued++
	return true
}

// copySealed copies sealed head chunk ob into nb, a chunk of its class: header, key, value, seal, bits and
// links alike. The CAS and the seal go last, in that order, since copy writes its bytes in no set order:
// nb may hold an earlier version of this item, which had the same CAS, with its seal (restart.md rule 1,
// as moveItem).
func (sh *shard) copySealed(nb, ob []byte) {
	at := sealAt(ob)
	setItemCas(nb, 0)
	copy(nb[offState:at], ob[offState:at]) // the CAS is the bytes before the state byte
	copy(nb[at+sealLen:], ob[at+sealLen:])
	sh.crashStep(movedButCas)
	setItemCas(nb, itemCas(ob))
	slab.StoreSeal(itemSeal(nb), *itemSeal(ob))
}

// rescueKept moves the kept versions (keep.go) in page p, which is being drained, into other chunks of
// class id as rescue moves items, after them, so that a sync writes them with the moved items
// (restart-live.md rule 12) or the page parks (restart.md rule 9); a chained one with a chunk in p, and
// one no chunk can be had for, is freed (data_kept_dropped). It returns how many moved.
func (sh *shard) rescueKept(p uint32, id int, now int64) (moved int) {
	k := sh.kept
	if k == nil {
		return 0
	}
	l := &k.cls[id]
	for i := l.first; i < len(l.list); i++ {
		r := l.list[i].ref
		if r == slab.NilRef || r.Page() != p || itemChained(sh.chunk(r)) {
			continue // a chained one is freed below, as a chained item is evicted where pages park
		}
		nu, ok := sh.rescueChunk(id, now) // evictions keep nothing: l is only read meanwhile
		if !ok {
			break // none for the rest either
		}
		nb := sh.chunk(nu)
		sh.copySealed(nb, sh.chunk(r))
		sh.al.Wrote(nu, len(nb))
		sh.al.Free(r)
		l.list[i].ref = nu
		moved++
	}
	sh.dropKeptIn(p, id)
	return moved
}

// rescueChunk is a chunk of class id for a rescued item: a free one, else one CLOCK frees in the class's
// other pages (the draining page is out of the class). Neither the rebalancer nor another page move runs
// here: one page drains at a time.
func (sh *shard) rescueChunk(id int, now int64) (slab.Ref, bool) {
	for range allocAttempts {
		if r, ok := sh.al.Alloc(id); ok {
			return r, true
		}
		if !sh.sweep(id, now) {
			break
		}
	}
	return slab.NilRef, false
}
