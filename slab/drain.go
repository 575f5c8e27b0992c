package slab

import (
	"errors"
	"fmt"
	"math"
)

// Page moves (memcached's slab reassign) and draining.
//
// A page leaves its class either empty (MovePage, ReleasePage: the caller has already freed every chunk
// in it) or by draining, which is how the owner keeps the live items it still wants. BeginDrain takes
// the page out of its class at once: its free chunks leave the free list, it stops being carved, and the
// class's CLOCK hand and cursors no longer visit it, while the chunks still in use stay where they are,
// readable and writable as before. Whatever the owner allocates from the class meanwhile therefore comes
// from the class's other pages (or evicts from them), never from the page being emptied: this is how
// the owner moves an item it wants to keep out of the page (memcached's slab_rebalance_move, which
// copies a live item into another chunk of its class). Freeing a chunk of the draining page just marks
// it free. Once every chunk of the page is free, EndDrain gives the page to a class or back to the arena.
//
// One page drains at a time per allocator, and only within one critical section of its owner: nothing
// else (a stats reader, a dump's cursor) ever sees a page in the middle of a drain.

// noDrain is drainState.page when no page is draining: no page has this id (ids stay below MaxPages).
const noDrain = math.MaxUint32

// drainState is the page being drained, between BeginDrain and EndDrain.
type drainState struct {
	page   uint32 // noDrain when none
	class  int    // the class it was taken from
	carved uint32 // end of its chunks handed out (as carved() said when the drain began)
	used   int    // its chunks still in use
	// freed has a bit per chunk freed since the drain began (by offset/MinChunk): where pages park,
	// freeDrained writes no state byte, and this is how the owner tells a freed chunk (DrainFreed).
	freed [(PageSize/MinChunk + 63) / 64]uint64
}

// BeginDrain takes page p out of its class to be emptied (see above): no chunk is handed out of p from
// now on. It fails when another page is draining or p is not this allocator's.
func (al *Allocator) BeginDrain(p uint32) error {
	if al.drain.page != noDrain {
		return fmt.Errorf("slab: page %d is already draining", al.drain.page)
	}
	idx, ok := al.pageIndex(p)
	if !ok {
		return fmt.Errorf("slab: page %d is not owned by this allocator", p)
	}
	from := int(al.arena.classOf(p))
	cs := &al.cls[from]
	carved := al.carved(cs, from, p)
	size := al.classes.size[from]
	page := al.arena.page(p)
	used := 0
	for off := uint32(0); off+size <= carved; off += size {
		if page[off+StateOffset] != StateFree {
			used++
		}
	}
	// Unthread p's chunks from the free list: O(free chunks), fine for a rare operation, and it keeps
	// free chunks free of any per-page bookkeeping.
	prev, r := NilRef, cs.free
	for r != NilRef {
		next := readLink(al.arena.chunkAt(r, LinkSize))
		if r.Page() == p {
			if prev == NilRef {
				cs.free = next
			} else {
				writeLink(al.arena.chunkAt(prev, LinkSize), next)
				al.linked(prev)
			}
			cs.nfree--
		} else {
			prev = r
		}
		r = next
	}
	cs.pages = append(cs.pages[:idx], cs.pages[idx+1:]...)
	if cs.hand > idx {
		cs.hand--
	} else if cs.hand == idx {
		cs.handOff = 0
	}
	if cs.bumping && cs.bumpPage == p {
		cs.bumping = false
	}
	cs.used -= used
	al.arena.back.drainBegins(p)
	al.drain = drainState{page: p, class: from, carved: carved, used: used}
	clear(al.drain.freed[:])
	return nil
}

// pageIndex is where page p is in its class's page list; false if p is not one of this allocator's pages
// (or is draining).
func (al *Allocator) pageIndex(p uint32) (int, bool) {
	for i, q := range al.cls[al.arena.classOf(p)].pages {
		if q == p {
			return i, true
		}
	}
	return 0, false
}

// Draining is the page being drained, and how many of its chunks are still in use; ok is false when
// no page is draining.
func (al *Allocator) Draining() (p uint32, used int, ok bool) {
	if al.drain.page == noDrain {
		return 0, 0, false
	}
	return al.drain.page, al.drain.used, true
}

// freeDrained is Free for a chunk of the draining page. Where page moves park (Parks), nothing is written
// into the page: it must reach a reboot as it was until its items' copies are on disk (ParkDrained).
func (al *Allocator) freeDrained(r Ref) {
	if !al.Parks() {
		al.arena.chunkAt(r, StateOffset+1)[StateOffset] = StateFree
		al.linked(r)
	}
	i := r.Offset() / MinChunk
	al.drain.freed[i/64] |= 1 << (i % 64)
	al.drain.used--
}

// DrainFreed says whether chunk r of the draining page was freed since the drain began: its state byte
// may still say otherwise (freeDrained).
func (al *Allocator) DrainFreed(r Ref) bool {
	i := r.Offset() / MinChunk
	return r.Page() == al.drain.page && al.drain.freed[i/64]&(1<<(i%64)) != 0
}

// ErrPageRefused is EndDrain's (and MovePage's) answer when the page could not join its new class: in a
// data directory, the file system had no room left for the page's blocks once they were emptied
// (Arena.clearForClass). The page went back to the arena, and the drain is over.
var ErrPageRefused = errors.New("slab: no room in the data directory for the page moved")

// EndDrain ends the drain, every chunk of the page being free by now: the page joins class to (which
// may be the class it came from), or goes back to the arena when to < 0.
func (al *Allocator) EndDrain(to int) error {
	d := al.drain
	if err := al.drained(); err != nil {
		return err
	}
	al.drain = drainState{page: noDrain}
	defer al.arena.back.drainEnds()
	var refused error
	// A page that parks was not written as its chunks were freed (freeDrained): emptied here even for
	// its own class, whose chunks would otherwise still hold what they held.
	if to >= 0 && (to != d.class || al.Parks()) && al.arena.clearForClass(d.page) != nil {
		to, refused = -1, ErrPageRefused
	}
	if to < 0 {
		al.owned--
		al.arena.releasePage(d.page)
		return refused
	}
	al.arena.setClass(d.page, uint8(to), al.owner)
	ts := &al.cls[to]
	ts.pages = append(ts.pages, d.page)
	if !ts.bumping {
		ts.bumping, ts.bumpPage, ts.bumpOff = true, d.page, 0
		return nil
	}
	// The target still has an uncarved page (callers normally move a page only when it has none):
	// carve all of the page onto the free list.
	tsize := al.classes.size[to]
	for off := uint32(0); off+tsize <= PageSize; off += tsize {
		b := al.arena.chunkAt(MakeRef(d.page, off), StateOffset+1)
		writeLink(b, ts.free)
		b[StateOffset] = StateFree
		al.linked(MakeRef(d.page, off))
		ts.free = MakeRef(d.page, off)
		ts.nfree++
	}
	al.arena.markCarved(d.page, PageSize) // every chunk's link was written
	return nil
}

// drained checks that every chunk of the draining page was freed.
func (al *Allocator) drained() error {
	d := &al.drain
	if d.page == noDrain {
		return fmt.Errorf("slab: no page is draining")
	}
	if d.used != 0 {
		return fmt.Errorf("slab: draining page %d counts %d used chunks", d.page, d.used)
	}
	if al.Parks() {
		return nil // its chunks keep their state bytes (freeDrained)
	}
	size := al.classes.size[d.class]
	page := al.arena.page(d.page)
	for off := uint32(0); off+size <= d.carved; off += size {
		if page[off+StateOffset] != StateFree {
			return fmt.Errorf("slab: draining page %d still holds a used chunk at offset %d", d.page, off)
		}
	}
	return nil
}

// Parking: where a data directory's own items file is mapped (no live copy, not on tmpfs) and synced
// periodically, a page move that rescued items must not let its page be written again before the copies
// it made are on disk, or a machine reboot could find the page's new contents (or its new record) and
// not the copies: items unchanged since long before the last sync would be lost. So such a move ends
// with ParkDrained: the page, left as it was (freeDrained writes nothing into it; only bits no seal
// covers, CLOCK's and a pin, may change), leaves its class and stays out of use, its record saying
// parked, until a Sync begun after it has finished; then ReleaseParked gives it back to the arena. A
// start after a reboot with no such Sync reads a parked page as in use (Backing.Records), and of an item
// found twice the larger CAS wins; a start after a kill does not read it (the copies are in the page
// cache, and its items may have been deleted since) and keeps it parked until its own first Sync
// (AdoptParked), as the copies may not be on disk yet.
// doc/design/restart.md rule 9.

// parkedPage is a parked page and the number of the last Sync begun when it was parked.
type parkedPage struct {
	id uint32
	at uint64
}

// Parks says whether a drain that rescued items must end with ParkDrained rather than EndDrain.
func (al *Allocator) Parks() bool { b := al.arena.back; return b != nil && b.Parks() }

// ParkDrained ends the drain, every chunk of the page being free, by parking the page (see above): it
// stays this allocator's, counted in OwnedPages, in no class, until ReleaseParked.
func (al *Allocator) ParkDrained() error {
	if !al.Parks() {
		return fmt.Errorf("slab: pages are not parked here")
	}
	if err := al.drained(); err != nil {
		return err
	}
	d := al.drain
	al.drain = drainState{page: noDrain}
	defer al.arena.back.drainEnds()
	at := al.arena.back.SyncsBegun()
	al.arena.back.setRecord(d.page, encodeParked(uint8(d.class), al.owner, at))
	al.parked = append(al.parked, parkedPage{id: d.page, at: at})
	al.arena.back.parkedBy(1)
	return nil
}

// ParkedPages is how many pages this allocator has parked.
func (al *Allocator) ParkedPages() int { return len(al.parked) }

// ReleaseParked gives back to the arena every parked page that a Sync begun after it was parked has
// covered, done being the number of the last Sync finished (Backing.SyncsDone); it returns how many.
func (al *Allocator) ReleaseParked(done uint64) int {
	n := 0
	for i := 0; i < len(al.parked); i++ {
		if p := al.parked[i]; p.at < done {
			al.owned--
			al.arena.releasePage(p.id)
			al.arena.back.parkedBy(-1)
			al.parked = append(al.parked[:i], al.parked[i+1:]...)
			i--
			n++
		}
	}
	return n
}

// MovePage reassigns page p to class to. Every chunk handed out in p must already be free: the caller
// evicts first (or drains, which keeps what it wants).
func (al *Allocator) MovePage(p uint32, to int) error {
	if from := int(al.arena.classOf(p)); from == to {
		return fmt.Errorf("slab: page %d already belongs to class %d", p, to)
	}
	return al.moveEmpty(p, to)
}

// ReleasePage gives page p back to the arena (memcached frees slab pages this way when its memory limit
// is lowered). Every chunk handed out in p must already be free: the caller evicts first.
func (al *Allocator) ReleasePage(p uint32) error { return al.moveEmpty(p, -1) }

// moveEmpty is MovePage (to >= 0) or ReleasePage (to < 0): the drain of a page that is already empty.
func (al *Allocator) moveEmpty(p uint32, to int) error {
	if _, ok := al.pageIndex(p); !ok {
		return fmt.Errorf("slab: page %d is not owned by this allocator", p)
	}
	first, size, n := al.PageChunks(p)
	page := al.arena.page(p)
	for i := range n {
		if page[int(first.Offset())+i*size+StateOffset] != StateFree {
			return fmt.Errorf("slab: page %d still holds a used chunk at offset %d", p, i*size)
		}
	}
	if err := al.BeginDrain(p); err != nil {
		return err
	}
	return al.EndDrain(to)
}
