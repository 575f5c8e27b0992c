package slab

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"
)

// Seals and adoption: the arena's side of a data directory (doc/design/restart.md). The owner of a chunk
// seals an item once it is whole (SetSum with a non-zero value computed over what it stored). A restart
// keeps only items whose seal matches, so an item being written when the process died is never taken for
// a whole one. Free leaves the seal alone: the chunk's free state byte says it holds nothing, and a seal
// left over cannot match an item written there later, whose CAS differs (clearing it cost a cache miss
// a store).

// SetOwner names this allocator in its data directory's page records (the shard's index); call it before
// the first Alloc.
func (al *Allocator) SetOwner(owner int) { al.owner = uint8(owner) }

// sumAt is where chunk r's seal lives: a page's seals are indexed by chunk number.
func (al *Allocator) sumAt(r Ref) *uint32 {
	id := r.Page() & (MaxPages - 1)
	seg := al.arena.dir[id>>segmentShift].Load()
	return al.sealIn(seg, id&segmentMask, r.Offset())
}

// sealIn is where the seal of the chunk at offset off of page i of seg lives.
func (al *Allocator) sealIn(seg *segment, i, off uint32) *uint32 {
	return (*uint32)(unsafe.Pointer(&seg.sums[i][al.sealOffset(seg, i, off)]))
}

// sealOffset is where in its page's sums the seal of the chunk at offset off of page i of seg is: the
// chunk's number, times 4.
func (al *Allocator) sealOffset(seg *segment, i, off uint32) int {
	return int(uint64(off)*al.classes.recipOf[seg.class[i]]>>40) * 4
}

// NextAddrs is where the next Alloc(id) will write when it takes a chunk from the free list: the chunk's
// address and its seal's, for a prefetch; 0, 0 when the free list is empty or there is no data directory.
// One directory load serves both.
func (al *Allocator) NextAddrs(id int) (chunk, seal uintptr) {
	r := al.cls[id].free
	if r == NilRef || al.arena.back == nil {
		return 0, 0
	}
	p := r.Page() & (MaxPages - 1)
	seg := al.arena.dir[p>>segmentShift].Load()
	i := p & segmentMask
	return uintptr(unsafe.Pointer(unsafe.SliceData(seg.pages[i]))) + uintptr(r.Offset()),
		uintptr(unsafe.Pointer(al.sealIn(seg, i, r.Offset())))
}

// SetSum stores chunk r's seal (0: none) in the data directory; without one it does nothing. The store is
// ordered after the item's own bytes (storeSeal), so a process killed in between never leaves a seal over
// half-written bytes.
func (al *Allocator) SetSum(r Ref, v uint32) {
	b := al.arena.back
	if b == nil {
		return
	}
	id := r.Page() & (MaxPages - 1)
	seg, i := al.arena.dir[id>>segmentShift].Load(), id&segmentMask
	sealOff := al.sealOffset(seg, i, r.Offset())
	storeSeal((*uint32)(unsafe.Pointer(&seg.sums[i][sealOff])), v)
	if l := b.live; l != nil {
		l.mark(int(id)*sumsSlot+sealOff, 4, true)
		l.mark(int(id)*PageSize+int(r.Offset()), int(al.classes.sizeOf[seg.class[i]]), false)
	}
}

// Wrote tells a data directory's live copy that chunk r was written (SetSum does for the chunk it seals):
// the parts of a chained item. Without a live copy it does nothing.
func (al *Allocator) Wrote(r Ref) {
	if b := al.arena.back; b != nil && b.live != nil {
		b.live.mark(int(r.Page())*PageSize+int(r.Offset()), int(al.classes.sizeOf[al.arena.classOf(r.Page())]), false)
	}
}

// linked tells a data directory's live copy that chunk r's free-list link or state byte changed.
func (a *Arena) linked(r Ref) {
	if a.back != nil && a.back.live != nil {
		a.back.live.mark(int(r.Page())*PageSize+int(r.Offset()), StateOffset+1, false)
	}
}

// Sum is chunk r's seal, 0 without a data directory.
func (al *Allocator) Sum(r Ref) uint32 {
	if al.arena.back == nil {
		return 0
	}
	return atomic.LoadUint32(al.sumAt(r))
}

// StoredChunks calls fn with each chunk of stored page rec as its class in al's table lays them out, for
// a page no allocator adopts: what it holds can be counted before FinishAdopt empties it. The slices are
// valid until FinishAdopt.
func (al *Allocator) StoredChunks(rec PageRecord, fn func(b []byte)) {
	if al.arena.back == nil || rec.Class < 0 || rec.Class >= len(al.cls) {
		return
	}
	mem := al.arena.back.storedOnce(rec.ID) // nil: a page that cannot be read holds nothing to count
	size := al.classes.Size(rec.Class)
	for off := 0; off+size <= len(mem); off += size {
		fn(mem[off : off+size : off+size])
	}
}

// Adopt gives al page id of its arena's data directory, as class class: it joins the class fully carved,
// every chunk counted as used, until the owner frees those that hold nothing it keeps (Free puts them on
// the free list). It fails when the page id is taken, out of range or beyond the budget.
func (al *Allocator) Adopt(id uint32, class int) error {
	if class < 0 || class >= len(al.cls) {
		return fmt.Errorf("slab: page %d has class %d, outside the table", id, class)
	}
	if err := al.arena.adopt(id, uint8(class), al.owner); err != nil {
		return err
	}
	cs := &al.cls[class]
	cs.pages = append(cs.pages, id)
	cs.used += int(al.classes.perPage[class])
	al.owned++
	al.arena.markCarved(id, PageSize)
	return nil
}

// LoadPages readies the pages al adopted; the owner calls it before it reads or writes them. Each page's
// blocks are reserved in the files (Backing.reservePageLocked says why), and a live copy being made from
// the data directory's files (Backing.LiveLoaded) gets the page's contents. A page that cannot be
// reserved is given back (its items are lost, as a page a smaller -m has no room for); one that cannot be
// read reads as zeros, which hold no item. It runs in each shard's rebuild, not in Adopt, so that the
// listener does not wait for it (doc/design/restart.md rules 7 and 11).
func (al *Allocator) LoadPages() error {
	b := al.arena.back
	if b == nil {
		return nil
	}
	var errs []error
	for i := range al.cls {
		cs := &al.cls[i]
		for j := 0; j < len(cs.pages); j++ {
			id := cs.pages[j]
			if err := b.reservePage(id); err != nil {
				errs = append(errs, err)
				cs.pages = append(cs.pages[:j], cs.pages[j+1:]...)
				cs.used -= int(al.classes.perPage[i])
				al.owned--
				al.arena.releasePage(id)
				j--
				continue
			}
			errs = append(errs, b.loadPage(id))
		}
	}
	return errors.Join(errs...)
}

// adopt takes page id as stored in the data directory.
func (a *Arena) adopt(id uint32, class, owner uint8) error {
	if a.back == nil || id >= MaxPages {
		return fmt.Errorf("slab: page %d cannot be adopted", id)
	}
	a.mu.Lock()
	if a.inUse >= a.limit {
		a.mu.Unlock()
		return fmt.Errorf("slab: page %d is beyond the memory limit of %d pages", id, a.limit)
	}
	if a.dir[id>>segmentShift].Load() == nil {
		a.dir[id>>segmentShift].Store(new(segment))
	}
	seg := a.dir[id>>segmentShift].Load()
	if seg.pages[id&segmentMask] != nil {
		a.mu.Unlock()
		return fmt.Errorf("slab: page %d adopted twice", id)
	}
	a.inUse++
	a.inUseNow.Store(int64(a.inUse))
	a.next = max(a.next, id+1)
	a.mu.Unlock()
	mem, sums, err := a.back.page(id, false) // reserved by the owner's LoadPages
	if err != nil {
		a.mu.Lock()
		a.inUse--
		a.inUseNow.Store(int64(a.inUse))
		a.mu.Unlock()
		return err
	}
	seg.class[id&segmentMask] = class
	seg.owner[id&segmentMask] = owner
	a.back.setRecord(id, encodeRecord(class, owner))
	a.install(seg, id, mem, sums)
	return nil
}

// FinishAdopt ends the adoption of stored pages: every page id below the highest adopted one that was not
// adopted becomes free, and every stored page not adopted is emptied, so that no chunk of it is read again.
func (a *Arena) FinishAdopt() {
	if a.back == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	stored := uint32(min(a.back.itemsSize/PageSize, MaxPages))
	for id := uint32(0); id < max(stored, a.next); id++ {
		seg := a.dir[id>>segmentShift].Load()
		if seg != nil && seg.pages[id&segmentMask] != nil {
			continue
		}
		if id < stored {
			a.back.discard(id)
		}
		if id < a.next {
			if seg == nil {
				a.dir[id>>segmentShift].Store(new(segment))
			}
			a.freeIDs = append(a.freeIDs, id)
		}
	}
}

// Holds says whether r names a chunk of a page this allocator holds: a check for links read back from a
// data directory, which may be damaged.
func (al *Allocator) Holds(r Ref) bool {
	id := r.Page()
	if r == NilRef || id >= MaxPages {
		return false
	}
	seg := al.arena.dir[id>>segmentShift].Load()
	i := id & segmentMask
	if seg == nil || seg.pages[i] == nil || seg.owner[i] != al.owner {
		return false
	}
	size := al.classes.sizeOf[seg.class[i]]
	return size != 0 && r.Offset()%size == 0 && r.Offset()/size < PageSize/size
}
