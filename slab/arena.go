package slab

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Ref addresses a chunk: page id in the high bits, byte offset in the page
// in the low PageShift bits. Only the low RefBits bits are ever used, so a
// hash index can keep the rest of a uint64 for its own bits.
type Ref uint64

const (
	// PageShift is log2(PageSize): the width of the offset part of a Ref.
	PageShift = 20
	// RefBits is how many low bits of a Ref are significant.
	RefBits = 40
	// MaxPages is the most pages a Ref can address (1 TiB of items).
	MaxPages = 1 << (RefBits - PageShift)
	// NilRef is no chunk. Its offset is not a multiple of ChunkAlign, so it
	// can never be the address of a real chunk, and it fits in RefBits.
	NilRef Ref = 1<<RefBits - 1

	// LinkSize is the space at the start of a free chunk holding the Ref of
	// the next free chunk.
	LinkSize = 8
	// StateOffset is the byte, inside every chunk, that says whether it is
	// free (StateFree); users put their own non-zero state there. It comes
	// right after the free-list link so that an item header can start using
	// bytes at StateOffset+1.
	StateOffset = LinkSize
	// StateFree marks a free chunk.
	StateFree = 0
)

// MakeRef packs a page id and an offset.
func MakeRef(page uint32, off uint32) Ref { return Ref(page)<<PageShift | Ref(off) }

// Page is the page id part of r.
func (r Ref) Page() uint32 { return uint32(r >> PageShift) }

// Offset is the byte offset part of r.
func (r Ref) Offset() uint32 { return uint32(r & (PageSize - 1)) }

// Arena is the global page budget shared by all shards. Its page table is two-level: a fixed directory
// of segments of segmentPages pages, each segment allocated the first time a page id in it is handed
// out. That lets the budget change at run time (cache_memlimit) anywhere up to the MaxPages a Ref can
// address without preallocating a table for that maximum (a flat one would cost 25 MiB) and without
// ever moving the table, so readers need no lock: a page, once taken, is read and written only by the
// Allocator that took it, under its owner's lock. The directory's entries and each page's base address
// are also published atomically, for ChunkHint, which may be asked about any page at any time.
//
// Taking and releasing pages is serialised by mu: it happens once per MiB of items at most, next to a
// 1 MiB allocation, so the lock is never contended in a way that matters.
type Arena struct {
	dir *directory
	// spare holds the second pages of mapped regions: pages are mapped two at a time (collapse.go).
	spare *spareHalves
	// huge is set for NewLargePageArena: regions are huge pages from their first touch, and col is idle.
	huge bool
	col  collapser
	// back is the data directory holding the pages (backing.go), nil for anonymous memory.
	back *Backing

	mu      sync.Mutex
	limit   int      // page budget; may be below inUse right after it is lowered
	inUse   int      // pages handed out and not released
	next    uint32   // lowest page id never handed out
	freeIDs []uint32 // released page ids, reused before next grows
	// inUseNow and limitNow mirror inUse and limit for lock-free readers (stats).
	inUseNow atomic.Int64
	limitNow atomic.Int64
}

const (
	// segmentShift sizes a page-table segment: 256 pages (256 MiB of items) per segment keeps the
	// fixed directory at 32 KiB and a segment at 16.5 KiB.
	segmentShift = 8
	segmentPages = 1 << segmentShift
	segmentMask  = segmentPages - 1
)

// directory is the fixed first level of the page table. It is its own object so that the cleanup that
// unmaps the pages of an arena that became garbage can hold it without holding the arena.
type directory [MaxPages >> segmentShift]atomic.Pointer[segment]

// segment is one block of the page table. pages[i] is nil while the id is not in use.
type segment struct {
	pages [segmentPages][]byte
	class [segmentPages]uint8 // size class of each page, owned like the page itself
	owner [segmentPages]uint8 // the owning allocator's SetOwner name, owned like the page itself
	// base[i] is the first byte of pages[i], or nil, for lock-free readers (ChunkHint).
	base [segmentPages]atomic.Pointer[byte]
	// carved[i] is how far pages[i] has been carved, as its owner last reported it (markCarved); 0 while
	// the page is not in use.
	carved [segmentPages]atomic.Uint32
	// read[i] is the last second an item in pages[i] was read (NoteRead), 0 for none; owned like the page.
	read [segmentPages]uint32
}

// NewArena sets the page budget to limit bytes (at least one page).
// Its pages are mapped memory (offheap.go): they go back to the system when released, or all at once
// when the Arena becomes garbage. They are ordinary pages until Collapse moves full ones onto huge pages.
func NewArena(limit int64) (*Arena, error) {
	return newArena(limit, false)
}

// NewLargePageArena is NewArena with pages backed by 2 MiB transparent huge pages where the kernel allows
// them (memcached's -L). Pages are mapped two at a time, in one aligned huge-page region; the second
// waits in reserve for the next taker.
//
// Why: a get touches an index slot and an item, at random, and with 4 KiB pages each is likely a TLB miss
// as well as a cache miss; in a VM with nested paging a page walk costs several memory accesses. On the
// development VM, pipelined 10-key gets over 100k items took 7-12% less CPU per request with it.
//
// What it costs:
//   - A huge page is resident in full once any byte of it is touched, while pages are carved lazily: a
//     class's partly used page, and the page in reserve, cost a whole MiB of RSS each instead of what
//     was written (memcached's own pages are resident in full from the start).
//   - A released page leaves the process's RSS at once, but while the other page of its region is in
//     use the kernel keeps the huge page whole and frees the released half only when it needs the
//     memory (it splits partly unmapped huge pages under memory pressure). A released page whose
//     partner is still in reserve takes the partner with it, so that region is freed at once.
//
// NewArena's Collapse gets most of the gain without those costs, on a kernel that can collapse.
func NewLargePageArena(limit int64) (*Arena, error) {
	return newArena(limit, true)
}

// NewBackedArena is NewArena with its pages in data directory b (backing.go, persist.go): what is stored
// in them survives the process. The pages of a live copy on tmpfs move onto huge pages as NewArena's do
// (Collapse); DIR's own files' pages never do: the kernel would write a huge page back whole for any byte
// changed in it (doc/design/restart-costs.md).
func NewBackedArena(limit int64, b *Backing) (*Arena, error) {
	a := &Arena{dir: new(directory), spare: &spareHalves{}, back: b}
	ok, huge := b.collapsible()
	a.col.unsupported.Store(!ok)
	a.col.hugeAdvice = huge
	if err := a.SetLimit(limit); err != nil {
		return nil, err
	}
	return a, nil
}

func newArena(limit int64, huge bool) (*Arena, error) {
	a := &Arena{dir: new(directory), spare: &spareHalves{}, huge: huge}
	if err := a.SetLimit(limit); err != nil {
		return nil, err
	}
	runtime.AddCleanup(a, unmapAll, arenaMemory{a.dir, a.spare})
	return a, nil
}

// hugePagePages is how many pages one huge-page region holds.
const hugePagePages = hugePageSize / PageSize

// spareHalves holds the pages of regions that were mapped but not yet handed out.
type spareHalves struct {
	mu    sync.Mutex
	pages [][]byte
}

// withPartner returns the memory to unmap when page p is released: p alone, or p's whole huge-page
// region when the region's other page is still in reserve (taken out of it here), so that the huge page
// is freed at once rather than when the kernel next needs memory.
func (sp *spareHalves) withPartner(p []byte) []byte {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	for i, q := range sp.pages {
		if regionOf(unsafe.SliceData(q)) != regionOf(unsafe.SliceData(p)) {
			continue
		}
		sp.pages = slices.Delete(sp.pages, i, i+1)
		first := p // a region holds exactly two pages (hugePagePages): p and q, in address order
		if uintptr(unsafe.Pointer(unsafe.SliceData(q))) < uintptr(unsafe.Pointer(unsafe.SliceData(p))) {
			first = q
		}
		return unsafe.Slice(unsafe.SliceData(first), hugePageSize)
	}
	return p
}

// LargePages reports whether the arena was made by NewLargePageArena.
func (a *Arena) LargePages() bool { return a.huge }

// mapPage maps the memory of one page: a page of a region, the first of a new one or the second of the
// last one.
func (a *Arena) mapPage() ([]byte, error) {
	a.spare.mu.Lock()
	defer a.spare.mu.Unlock()
	if n := len(a.spare.pages); n > 0 {
		p := a.spare.pages[n-1]
		a.spare.pages = a.spare.pages[:n-1]
		return p, nil
	}
	region, err := mapHugeRegion(a.huge)
	if err != nil {
		return nil, err
	}
	for i := hugePagePages - 1; i > 0; i-- {
		a.spare.pages = append(a.spare.pages, region[i*PageSize:(i+1)*PageSize:(i+1)*PageSize])
	}
	return region[:PageSize:PageSize], nil
}

// arenaMemory is what the cleanup of an unreachable arena unmaps.
type arenaMemory struct {
	dir   *directory
	spare *spareHalves
}

// unmapAll gives back every page still mapped by an arena that is unreachable: nothing can use them.
func unmapAll(m arenaMemory) {
	for _, p := range m.spare.pages {
		unmapBytes(p)
	}
	m.spare.pages = nil
	for d := range m.dir {
		seg := m.dir[d].Load()
		if seg == nil {
			continue
		}
		for i, p := range seg.pages {
			if p != nil {
				seg.base[i].Store(nil)
				unmapBytes(p)
				seg.pages[i] = nil
			}
		}
	}
}

// LimitPages is the page count a limit of bytes allows: at least one page.
func LimitPages(limit int64) (int, error) {
	if limit <= 0 {
		return 0, fmt.Errorf("slab: memory limit %d must be positive", limit)
	}
	n := max(limit/PageSize, 1)
	if n > MaxPages {
		return 0, fmt.Errorf("slab: memory limit %d exceeds the addressable %d pages", limit, MaxPages)
	}
	return int(n), nil
}

// SetLimit changes the page budget to limit bytes. Raising it lets more pages be taken from now on;
// lowering it stops new pages beyond it, and owners over their share give pages back with
// Allocator.ReleasePage (pages are never taken from their owner here).
func (a *Arena) SetLimit(limit int64) error {
	n, err := LimitPages(limit)
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.limit = n
	a.limitNow.Store(int64(n))
	a.mu.Unlock()
	return nil
}

// RoomPages is how many more pages the data directory's file system has room for (Backing.RoomPages), -1
// without one.
func (a *Arena) RoomPages() int {
	if a.back == nil {
		return -1
	}
	return a.back.RoomPages()
}

// MaxPages is the page budget.
func (a *Arena) MaxPages() int { return int(a.limitNow.Load()) }

// PagesTaken is how many pages are in use (handed out and not released).
func (a *Arena) PagesTaken() int { return int(a.inUseNow.Load()) }

// takePage reserves a page id within the budget and allocates its memory, or reports false when the
// budget is spent.
func (a *Arena) takePage() (uint32, bool) {
	a.mu.Lock()
	if a.inUse >= a.limit {
		a.mu.Unlock()
		return 0, false
	}
	var id uint32
	if n := len(a.freeIDs); n > 0 {
		id = a.freeIDs[n-1]
		a.freeIDs = a.freeIDs[:n-1]
	} else {
		if a.next >= MaxPages {
			a.mu.Unlock()
			return 0, false
		}
		id = a.next
		a.next++
		if a.dir[id>>segmentShift].Load() == nil {
			a.dir[id>>segmentShift].Store(new(segment))
		}
	}
	a.inUse++
	a.inUseNow.Store(int64(a.inUse))
	seg := a.dir[id>>segmentShift].Load()
	a.mu.Unlock()
	// The slot is the taker's alone from here on; mapping outside the lock keeps takers of other pages
	// from waiting on a system call.
	var (
		mem []byte
		err error
	)
	if a.back != nil {
		mem, err = a.back.page(id, true)
	} else {
		mem, err = a.mapPage()
	}
	if err != nil {
		a.giveBack(id) // out of address space, memory or disk: the caller evicts, as on an exhausted budget
		return 0, false
	}
	a.install(seg, id, mem)
	return id, true
}

// install makes mem the memory of page id, whose slot in seg is taken.
func (a *Arena) install(seg *segment, id uint32, mem []byte) {
	seg.pages[id&segmentMask] = mem
	seg.base[id&segmentMask].Store(unsafe.SliceData(mem))
}

// releasePage gives page id back to the budget and its memory back to the system at once. The caller
// owned the page and must not use it again.
func (a *Arena) releasePage(id uint32) {
	seg := a.dir[id>>segmentShift].Load()
	mem := seg.pages[id&segmentMask]
	seg.pages[id&segmentMask] = nil
	seg.base[id&segmentMask].Store(nil)
	seg.carved[id&segmentMask].Store(0)
	if a.back != nil {
		a.back.discard(id)
		a.col.punch(mem)
	} else {
		a.col.unmap(a.spare.withPartner(mem))
	}
	a.giveBack(id)
}

// giveBack returns page id to the budget.
func (a *Arena) giveBack(id uint32) {
	a.mu.Lock()
	a.freeIDs = append(a.freeIDs, id)
	a.inUse--
	a.inUseNow.Store(int64(a.inUse))
	a.mu.Unlock()
}

// page returns the memory of page id (the caller owns the page).
func (a *Arena) page(id uint32) []byte { return a.dir[id>>segmentShift].Load().pages[id&segmentMask] }

// classOf is the size class of page id.
func (a *Arena) classOf(id uint32) uint8 { return a.dir[id>>segmentShift].Load().class[id&segmentMask] }

// setClass records the size class of page id, and in a data directory its owner (the caller owns the
// page, which holds no chunk of another class there: taken fresh, or emptied by clearForClass).
func (a *Arena) setClass(id uint32, c uint8, owner uint8) {
	seg := a.dir[id>>segmentShift].Load()
	if a.back != nil {
		a.back.setRecord(id, encodeRecord(c, owner))
	}
	seg.class[id&segmentMask] = c
	seg.owner[id&segmentMask] = owner
	seg.read[id&segmentMask] = 0
}

// clearForClass empties page id in a data directory before it joins another class (the caller owns it
// and every chunk in it is free): chunks of the old geometry would read as chunks of the new one at a
// restart. A page taken from the arena is empty already (released pages are punched, new ones are holes).
// The punch gives the page's blocks back to the file system, so they are reserved again, as a new page's
// are: a store into a hole of a full file system gets SIGBUS. When the file system has no room for them
// by now (another shard or another process took it), the error says so and the page must not be used.
func (a *Arena) clearForClass(id uint32) error {
	if a.back == nil {
		return nil
	}
	a.back.discard(id)
	a.col.punch(a.page(id))
	return a.back.reservePage(id)
}

// ChunkHint is the address chunk r would start at, for a prefetch and nothing else: anyone may call it at
// any time, without owning r's page, so r may be stale or made up, and its page released or reused by the
// time the address is used. It is 0 when r's page is not mapped. Never dereference it: a prefetch
// instruction is the one use that cannot fault.
func (a *Arena) ChunkHint(r Ref) uintptr {
	id := r.Page() & (MaxPages - 1)
	seg := a.dir[id>>segmentShift].Load()
	if seg == nil {
		return 0
	}
	base := seg.base[id&segmentMask].Load()
	if base == nil {
		return 0
	}
	return uintptr(unsafe.Pointer(base)) + uintptr(r.Offset())
}

// chunkAt returns size bytes at r, capacity-limited so appends cannot spill
// into the neighbour chunk.
func (a *Arena) chunkAt(r Ref, size int) []byte {
	off := int(r.Offset())
	return a.page(r.Page())[off : off+size : off+size]
}

func readLink(b []byte) Ref     { return Ref(binary.LittleEndian.Uint64(b)) }
func writeLink(b []byte, r Ref) { binary.LittleEndian.PutUint64(b, uint64(r)) }
