package slab

// Allocator is one owner's (one shard's) set of size classes drawing pages
// from a shared Arena. Not safe for concurrent use.
type Allocator struct {
	arena    *Arena
	classes  *Classes
	cls      []classState
	owned    int // pages taken from the arena
	maxPages int // this allocator's share of the arena budget
	// owner names this allocator in a data directory's page records (SetOwner).
	owner uint8

	// drain is the page being emptied between BeginDrain and EndDrain (drain.go); drain.page is noDrain
	// when there is none.
	drain drainState
	// parked are the pages ParkDrained parked, until ReleaseParked gives them back (counted in owned).
	parked []parkedPage
}

type classState struct {
	pages []uint32 // owned pages, in the order they joined the class
	free  Ref      // head of the free list threaded through free chunks
	nfree int
	used  int // chunks handed out and not freed

	// New pages are carved lazily from bumpOff, so an untouched page costs
	// neither CPU nor resident memory until it is actually needed.
	bumping  bool
	bumpPage uint32
	bumpOff  uint32

	hand    int    // CLOCK hand: index into pages
	handOff uint32 // and offset within that page
}

// NewAllocator returns an empty allocator that takes pages from a on
// demand, at most maxPages of them (its share: a share per owner means one
// busy owner can never starve another of pages, since pages go back to the
// arena only when the budget is lowered). maxPages <= 0 means no share limit
// (the arena's budget still applies).
func NewAllocator(a *Arena, c *Classes, maxPages int) *Allocator {
	cls := make([]classState, c.Count())
	for i := range cls {
		cls[i].free = NilRef
	}
	al := &Allocator{arena: a, classes: c, cls: cls, drain: drainState{page: noDrain}}
	al.SetMaxPages(maxPages)
	return al
}

// SetMaxPages changes this allocator's share of the page budget (<= 0: no
// share limit). Lowering it below OwnedPages stops new pages; the owner gives
// the excess back with ReleasePage.
func (al *Allocator) SetMaxPages(n int) {
	if n <= 0 {
		n = MaxPages
	}
	al.maxPages = n
}

// OwnedPages is how many pages this allocator has taken from the arena, parked ones included.
func (al *Allocator) OwnedPages() int { return al.owned }

// HeldPages is how many pages this allocator's classes hold: OwnedPages less the parked ones, which
// go back to the arena at the next sync whatever the owner does.
func (al *Allocator) HeldPages() int { return al.owned - len(al.parked) }

// MaxPages is this allocator's share of the page budget.
func (al *Allocator) MaxPages() int { return al.maxPages }

// Classes is the allocator's size class table.
func (al *Allocator) Classes() *Classes { return al.classes }

// Arena is the shared page budget this allocator draws from.
func (al *Allocator) Arena() *Arena { return al.arena }

// Alloc returns a chunk of class id: from the free list, else carved from
// the class's newest page, else from a new page taken from the arena budget.
// It reports false when none is available: the caller evicts and retries.
// The chunk's content is undefined; the caller must set its state byte.
func (al *Allocator) Alloc(id int) (Ref, bool) {
	cs := &al.cls[id]
	if r := cs.free; r != NilRef {
		cs.free = readLink(al.arena.chunkAt(r, LinkSize))
		cs.nfree--
		cs.used++
		return r, true
	}
	size := uint32(al.classes.size[id])
	if !cs.bumping || cs.bumpOff+size > PageSize {
		if al.owned >= al.maxPages {
			return NilRef, false
		}
		p, ok := al.arena.takePage()
		if !ok {
			return NilRef, false
		}
		al.owned++
		al.arena.setClass(p, uint8(id), al.owner)
		cs.pages = append(cs.pages, p)
		cs.bumping, cs.bumpPage, cs.bumpOff = true, p, 0
	}
	r := MakeRef(cs.bumpPage, cs.bumpOff)
	cs.bumpOff += size
	if cs.bumpOff+size > PageSize {
		cs.bumping = false // page fully carved
		al.arena.markCarved(cs.bumpPage, PageSize)
	} else if cs.bumpOff>>carvedStepShift != (cs.bumpOff-size)>>carvedStepShift {
		al.arena.markCarved(cs.bumpPage, cs.bumpOff)
	}
	cs.used++
	return r, true
}

// Free returns chunk r to its class's free list and marks it StateFree. A chunk of the page being
// drained is only marked free: that page no longer hands chunks out.
func (al *Allocator) Free(r Ref) {
	if r.Page() == al.drain.page {
		al.freeDrained(r)
		return
	}
	id := al.arena.classOf(r.Page())
	cs := &al.cls[id]
	b := al.arena.chunkAt(r, StateOffset+1)
	writeLink(b, cs.free)
	b[StateOffset] = StateFree
	al.linked(r)
	cs.free = r
	cs.nfree++
	cs.used--
}

// ClassOf is the size class of the page holding r.
func (al *Allocator) ClassOf(r Ref) int { return int(al.arena.classOf(r.Page())) }

// Chunk is the whole chunk at r.
func (al *Allocator) Chunk(r Ref) []byte {
	// Every item access comes through here, several times per store: one directory load serves both the
	// class and the page, and the masks spare the bounds checks (r is the owner's, so always in range).
	id := r.Page() & (MaxPages - 1)
	seg := al.arena.dir[id>>segmentShift].Load()
	i := id & segmentMask
	size, off := al.classes.sizeOf[seg.class[i]], r.Offset()
	return seg.pages[i][off : off+size : off+size]
}

// carved is the end offset of the chunks handed out so far in page p of
// class id (the rest of a bump page has never been used).
func (al *Allocator) carved(cs *classState, id int, p uint32) uint32 {
	if cs.bumping && cs.bumpPage == p {
		return cs.bumpOff
	}
	return al.classes.perPage[id] * al.classes.size[id]
}

// Hand returns the chunk under class id's CLOCK hand and advances the hand,
// wrapping around the class's pages. NilRef if the class has no chunk yet.
func (al *Allocator) Hand(id int) Ref {
	cs := &al.cls[id]
	for tries := 0; tries <= len(cs.pages); tries++ {
		if cs.hand >= len(cs.pages) {
			cs.hand, cs.handOff = 0, 0
			if len(cs.pages) == 0 {
				return NilRef
			}
		}
		p := cs.pages[cs.hand]
		if cs.handOff < al.carved(cs, id, p) {
			r := MakeRef(p, cs.handOff)
			cs.handOff += al.classes.size[id]
			return r
		}
		cs.hand, cs.handOff = cs.hand+1, 0
	}
	return NilRef
}

// NoteRead records that an item in r's page was read at now (unix seconds), for PageRead. It writes only
// when the second changes. The owner keeps it apart from the item's header, which a read of an item read
// before leaves alone (shard.bump): that may be a file page of a data directory.
func (al *Allocator) NoteRead(r Ref, now uint32) {
	if p := al.readTime(r); *p != now {
		*p = now
	}
}

// PageRead is the last second NoteRead saw a read in r's page since the page joined its class, 0 if none.
func (al *Allocator) PageRead(r Ref) uint32 { return *al.readTime(r) }

func (al *Allocator) readTime(r Ref) *uint32 {
	id := r.Page() & (MaxPages - 1)
	return &al.arena.dir[id>>segmentShift].Load().read[id&segmentMask]
}

// PeekHand returns the chunk under class id's CLOCK hand without advancing it (the chunk Hand would
// return next), and its page; NilRef if the class has no chunk yet.
func (al *Allocator) PeekHand(id int) Ref {
	cs := &al.cls[id]
	hand, off := cs.hand, cs.handOff
	for tries := 0; tries <= len(cs.pages); tries++ {
		if hand >= len(cs.pages) {
			hand, off = 0, 0
			if len(cs.pages) == 0 {
				return NilRef
			}
		}
		p := cs.pages[hand]
		if off < al.carved(cs, id, p) {
			return MakeRef(p, off)
		}
		hand, off = hand+1, 0
	}
	return NilRef
}

// Pages is how many pages class id owns.
func (al *Allocator) Pages(id int) int { return len(al.cls[id].pages) }

// PageAt is the i-th page of class id.
func (al *Allocator) PageAt(id, i int) uint32 { return al.cls[id].pages[i] }

// PageChunks describes the chunks handed out so far in page p: the first
// chunk, the stride (chunk size) and how many there are.
func (al *Allocator) PageChunks(p uint32) (first Ref, size, n int) {
	id := int(al.arena.classOf(p))
	cs := &al.cls[id]
	size = int(al.classes.size[id])
	carved := al.carved(cs, id, p)
	if p == al.drain.page {
		carved = al.drain.carved
	}
	return MakeRef(p, 0), size, int(carved) / size
}

// ClassStats is one class's occupancy.
type ClassStats struct {
	ChunkSize     int
	ChunksPerPage int
	Pages         int
	TotalChunks   int // Pages * ChunksPerPage
	UsedChunks    int
	FreeChunks    int // on the free list
	FreeChunksEnd int // never carved yet (memcached's free_chunks_end)
}

// Stats reports class id's occupancy.
func (al *Allocator) Stats(id int) ClassStats {
	cs := &al.cls[id]
	st := ClassStats{
		ChunkSize:     int(al.classes.size[id]),
		ChunksPerPage: int(al.classes.perPage[id]),
		Pages:         len(cs.pages),
		UsedChunks:    cs.used,
		FreeChunks:    cs.nfree,
	}
	st.TotalChunks = st.Pages * st.ChunksPerPage
	st.FreeChunksEnd = st.TotalChunks - st.UsedChunks - st.FreeChunks
	return st
}

// Cursor walks every chunk handed out by an Allocator, class by class, page
// by page; the zero value starts at the beginning. It tolerates page moves
// between calls (it may skip or revisit some chunks, never fault).
type Cursor struct {
	class, page int
	off         uint32
}

// Next returns the chunk at c and advances it. At the end of a full pass it
// returns NilRef and rewinds c to the beginning.
func (al *Allocator) Next(c *Cursor) Ref {
	for c.class < len(al.cls) {
		cs := &al.cls[c.class]
		if c.page < len(cs.pages) {
			p := cs.pages[c.page]
			if c.off < al.carved(cs, c.class, p) {
				r := MakeRef(p, c.off)
				c.off += al.classes.size[c.class]
				return r
			}
			c.page, c.off = c.page+1, 0
			continue
		}
		c.class, c.page, c.off = c.class+1, 0, 0
	}
	*c = Cursor{}
	return NilRef
}
