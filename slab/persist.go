package slab

import (
	"errors"
	"fmt"
	"unsafe"
)

// Adoption and marks: the arena's side of a data directory (doc/design/restart.md). The owner of a chunk
// seals an item once it is whole (a checksum in the item's own chunk, StoreSeal, shard/persist.go). A
// restart keeps only items whose seal matches, so an item being written when the process died is never
// taken for a whole one. Free marks a chunk free by its state byte; the chunk may still hold the item it
// held, seal and all (a chunk of the page being drained keeps even its CAS, which the free-list link
// overwrites elsewhere): the owner that makes it a head again breaks that seal first (shard.allocItem).

// SetOwner names this allocator in its data directory's page records (the shard's index); call it before
// the first Alloc.
func (al *Allocator) SetOwner(owner int) { al.owner = uint8(owner) }

// NextAddr is where the next Alloc(id) will write when it takes a chunk from the free list, for a
// prefetch; 0 when the free list is empty or there is no data directory.
func (al *Allocator) NextAddr(id int) uintptr {
	r := al.cls[id].free
	if r == NilRef || al.arena.back == nil {
		return 0
	}
	p := r.Page() & (MaxPages - 1)
	seg := al.arena.dir[p>>segmentShift].Load()
	return uintptr(unsafe.Pointer(unsafe.SliceData(seg.pages[p&segmentMask]))) + uintptr(r.Offset())
}

// Wrote tells a data directory's live copy that the first size bytes of chunk r were written: the whole
// chunk (the length of Chunk(r)) for a sealed item's chunks and a head changed in place, fewer for a
// header bit. Without a live copy it does nothing. A page written during a drain is one a sync writes
// into the directory whole (restart-live.md rule 12). The caller passes the size of the chunk it holds
// rather than Wrote looking the page's class up again: every store calls it.
func (al *Allocator) Wrote(r Ref, size int) {
	if b := al.arena.back; b != nil && b.live != nil {
		b.live.mark(int(r.Page())*PageSize+int(r.Offset()), size)
		if al.drain.page != noDrain {
			b.live.moved(r.Page())
		}
	}
}

// linked tells a data directory's live copy that chunk r's free-list link or state byte changed.
func (al *Allocator) linked(r Ref) { al.Wrote(r, StateOffset+1) }

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
	if err := al.arena.adopt(id, uint8(class), al.owner, false); err != nil {
		return err
	}
	cs := &al.cls[class]
	cs.pages = append(cs.pages, id)
	cs.used += int(al.classes.perPage[class])
	al.owned++
	al.arena.markCarved(id, PageSize)
	return nil
}

// AdoptParked gives al page id of its arena's data directory, parked by the last server
// (Backing.ParkedRecords), as a page parked by this one: in no class, counted in OwnedPages (beyond the
// budget if need be: it goes back at the first Sync), untouched, until ReleaseParked finds a Sync this
// process began after it finished. Its record stays as it is.
func (al *Allocator) AdoptParked(id uint32, class int) error {
	if err := al.arena.adopt(id, uint8(class), al.owner, true); err != nil {
		return err
	}
	al.owned++
	al.parked = append(al.parked, parkedPage{id: id, at: al.arena.back.SyncsBegun()})
	al.arena.back.parkedBy(1)
	return nil
}

// LoadPages readies the pages al adopted; the owner calls it before it reads or writes them. Each page's
// blocks are reserved in the files (Backing.reservePageLocked says why), and a live copy being made from
// the data directory's files (Backing.LiveLoaded) gets the page's contents. A page that cannot be
// reserved is given back (its items are lost, as a page a smaller -m has no room for); one that cannot be
// read reads as zeros, which hold no item. It runs in each shard's rebuild, not in Adopt, so that the
// listener does not wait for it (doc/design/restart.md rule 7 and restart-live.md rule 11).
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
				b.drainBegins(id) // a punch, which a sync must not read through (restart-live.md rule 12)
				al.arena.releasePage(id)
				b.drainEnds()
				j--
				continue
			}
			errs = append(errs, b.loadPage(id))
		}
	}
	return errors.Join(errs...)
}

// adopt takes page id as stored in the data directory; a parked one (AdoptParked) whatever the budget,
// its record unchanged.
func (a *Arena) adopt(id uint32, class, owner uint8, parked bool) error {
	if a.back == nil || id >= MaxPages {
		return fmt.Errorf("slab: page %d cannot be adopted", id)
	}
	a.mu.Lock()
	if a.inUse >= a.limit && !parked {
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
	mem, err := a.back.page(id, false) // reserved by the owner's LoadPages
	if err != nil {
		a.mu.Lock()
		a.inUse--
		a.inUseNow.Store(int64(a.inUse))
		a.mu.Unlock()
		return err
	}
	seg.class[id&segmentMask] = class
	seg.owner[id&segmentMask] = owner
	if !parked {
		a.back.setRecord(id, encodeRecord(class, owner))
	}
	a.install(seg, id, mem)
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
	a.back.emptyingStored()
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
// data directory, which may be damaged. A ref with any bit at or above RefBits set is refused, not
// masked: Page drops such bits, so the chunk would be found while code that compares whole refs (a page
// move looking for the link that names a part) never matched the damaged one.
func (al *Allocator) Holds(r Ref) bool {
	if r >= NilRef { // NilRef is the largest ref of RefBits bits
		return false
	}
	id := r.Page()
	seg := al.arena.dir[id>>segmentShift].Load()
	i := id & segmentMask
	if seg == nil || seg.pages[i] == nil || seg.owner[i] != al.owner {
		return false
	}
	for _, p := range al.parked { // in no class: nothing in it is read
		if p.id == id {
			return false
		}
	}
	size := al.classes.sizeOf[seg.class[i]]
	return size != 0 && r.Offset()%size == 0 && r.Offset()/size < PageSize/size
}
