package slab

import (
	"errors"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Full pages move onto huge pages after the fact.
//
// Why: a get reads an index slot and an item at random places. With 4 KiB pages each is likely a TLB miss as
// well as a cache miss, and in a VM with nested paging a page walk costs several memory accesses. Huge pages
// from the first touch (NewLargePageArena, -L) cost resident memory instead: a partly carved page is
// resident in full. NewArena's pages come two at a time, in a 2 MiB-aligned region advised against huge
// pages, so a partly carved page costs only what was written. Once both pages of a region have been carved
// to within collapseSlack of their ends, most of the region has been written and is resident anyway;
// Collapse then asks the kernel to back the region with one huge page (MADV_COLLAPSE). Nothing moves for
// the arena's users: the addresses and contents stay, only the page tables change.
//
// Collapsing copies 2 MiB in the kernel and holds the process's memory map lock for a moment (about a
// millisecond on the development VM), so it runs in the store's reclaimer, never in an event loop.

const (
	// collapseSlack is how much of a region may be still uncarved when it is collapsed: at most a quarter
	// of it becomes resident before it holds anything, so collapsed memory costs at most 4/3 of what was
	// written, and less as a growing class carves into the rest. A cache that stopped growing with its
	// pages short of full still gets huge pages: a prefill of 100k 100-byte items leaves each of 16
	// shards' pages 81% carved (RSS 23 -> 26 MB when they collapse; memcached 1.6.18: 25 MB).
	collapseSlack = hugePageSize / 4
	// carvedStepShift sets how often an owner reports its carving: each time it crosses a multiple of
	// 64 KiB, a few times per page, so that the report is not a shared write per allocation.
	carvedStepShift = 16
	// collapsePerCall bounds one Collapse call to one region. A collapse costs the kernel 1 to 9 ms a region
	// on the development VM (more when it must compact memory to find a huge page), taken from the cores the
	// event loops need, and an event loop that touches the region meanwhile waits for it. The store's
	// reclaimer calls Collapse at most CollapseCallsPerTick times a tick (16 MiB a second), spread over the
	// tick: with 64 regions at once, a 4 KB-value workload at pipeline 1 measured while 400 MB of fresh items
	// were being collapsed had 60% more system time per request and a p99 of 9 ms instead of 2.5; with 8 at
	// once, one at the start of each tick, p99.9 at pipeline 16 after a fill of 2M items was 26-46 ms while
	// regions were being collapsed and 6-17 ms after (spread: median 17.9 ms against 27). A cache growing
	// faster than 16 MiB a second gets the rest collapsed on later ticks: 1 GiB within about a minute.
	collapsePerCall = 1
	// CollapseCallsPerTick is how many Collapse calls the reclaimer spreads over one tick while regions wait.
	CollapseCallsPerTick = 8
)

// errCollapseUnsupported is collapseRegion's answer where the kernel cannot collapse (before Linux 6.1, or
// with huge pages disabled): the arena stops trying.
var errCollapseUnsupported = errors.New("slab: the kernel cannot collapse memory into huge pages")

// collapser is the arena's bookkeeping for Collapse.
type collapser struct {
	// mu is held while Collapse looks at and advises regions, and while released pages are unmapped, so a
	// region cannot be unmapped, or its addresses reused, while it is advised. A page released meanwhile
	// waits in unmapping for whoever holds mu: releasePage runs in event loops (an index that grows gives
	// pages back), which must not wait for a collapse.
	mu        sync.Mutex
	unmapMu   sync.Mutex
	unmapping [][]byte
	punched   []uintptr    // regions of a data directory's pages punched since mu was last released; under unmapMu
	carving   atomic.Int64 // carving reports since Collapse last looked
	// hugeAdvice is the advice the arena's memory is under: huge pages from the first touch (a data
	// directory with -L), or not (NewArena's regions). Set before the arena is shared.
	hugeAdvice  bool
	unsupported atomic.Bool
	// huge is len(done), kept apart so that stats can read it without waiting for mu (a collapse pass
	// holds mu for several milliseconds).
	huge atomic.Int64

	done map[uintptr]struct{}   // bases of the regions collapsed; under mu
	scan map[uintptr]regionScan // Collapse's scratch; under mu
}

// regionScan is what one Collapse pass found of a region.
type regionScan struct {
	first  *byte // the region's first byte
	carved int   // bytes carved in its pages in use
}

// regionOf is the base address of the region holding the byte at p.
func regionOf(p *byte) uintptr { return uintptr(unsafe.Pointer(p)) &^ (hugePageSize - 1) }

// unmap gives the memory of a released page (or of its whole region) back to the system: now, or when
// Collapse, which holds mu, is done.
func (c *collapser) unmap(mem []byte) {
	c.unmapMu.Lock()
	c.unmapping = append(c.unmapping, mem)
	c.unmapMu.Unlock()
	if c.mu.TryLock() {
		c.unlock()
	}
}

// punch records that a page of a data directory's live copy was punched out of its file (released, or
// emptied for another class): the kernel splits its region's huge page, so the region may be collapsed
// again once its pages are carved. Like unmap, it never waits for a collapse.
func (c *collapser) punch(page []byte) {
	c.unmapMu.Lock()
	c.punched = append(c.punched, regionOf(unsafe.SliceData(page)))
	c.unmapMu.Unlock()
	if c.mu.TryLock() {
		c.unlock()
	}
}

// unlock unmaps the memory waiting in unmapping, dropping its regions from the collapsed set (the kernel
// splits their huge pages), drops the punched regions from it too, and releases mu. Memory added after it
// looked is unmapped by the next holder of mu, or here again if there is none. The caller holds mu.
func (c *collapser) unlock() {
	for {
		c.unmapMu.Lock()
		mems, punched := c.unmapping, c.punched
		c.unmapping, c.punched = nil, nil
		c.unmapMu.Unlock()
		for _, mem := range mems {
			c.split(regionOf(unsafe.SliceData(mem)))
			unmapBytes(mem)
		}
		for _, r := range punched {
			c.split(r)
		}
		c.mu.Unlock()
		c.unmapMu.Lock()
		more := len(c.unmapping)+len(c.punched) > 0
		c.unmapMu.Unlock()
		if !more || !c.mu.TryLock() {
			return
		}
	}
}

// split drops region r from the collapsed set. The caller holds mu.
func (c *collapser) split(r uintptr) {
	if _, ok := c.done[r]; ok {
		delete(c.done, r)
		c.huge.Add(-1)
	}
}

// markCarved records that page id has been carved up to off (chunks before it have been handed out, and
// written), or to its end at PageSize. The page's owner calls it (Allocator), a few times per page; a
// page moved to another class keeps its mark, since its memory stays written.
func (a *Arena) markCarved(id uint32, off uint32) {
	if a.huge {
		return
	}
	c := &a.dir[id>>segmentShift].Load().carved[id&segmentMask]
	if off > c.Load() {
		c.Store(off)
		a.col.carving.Add(1)
	}
}

// Collapse moves regions whose pages are both in use and carved to within collapseSlack onto huge pages,
// up to collapsePerCall of them, and returns how many it moved. It returns at once when no carving was
// reported since its last call that finished. Anyone may call it at any time; it takes a few milliseconds
// per region, so the store's reclaimer calls it, up to CollapseCallsPerTick times a tick while it moves
// one. A region the kernel could not collapse (no huge page free) is tried again after the next report.
func (a *Arena) Collapse() int {
	c := &a.col
	if a.huge || c.unsupported.Load() {
		return 0
	}
	// Not while a live copy's sync runs: it scans the live file for holes, and before Linux 6.4 the kernel
	// shows a region being collapsed as one until the huge page is filled (see doc/design/restart-live.md
	// rule 13). What was reported waits for the next call.
	if !a.back.holdSyncs() {
		return 0
	}
	defer a.back.letSyncs()
	if c.carving.Swap(0) == 0 {
		return 0
	}
	a.mu.Lock()
	next := a.next
	a.mu.Unlock()
	c.mu.Lock()
	defer c.unlock()
	if c.scan == nil {
		c.scan, c.done = make(map[uintptr]regionScan), make(map[uintptr]struct{})
	}
	clear(c.scan)
	// Pages are taken and released concurrently, but a released page's memory stays mapped while mu is
	// held: at worst a region is collapsed just before it is unmapped.
	for id := range next {
		seg := a.dir[id>>segmentShift].Load()
		base := seg.base[id&segmentMask].Load()
		carved := seg.carved[id&segmentMask].Load()
		if base == nil || carved == 0 {
			continue
		}
		r := regionOf(base)
		if _, ok := c.done[r]; ok {
			continue
		}
		rs := c.scan[r]
		rs.carved += int(carved)
		if uintptr(unsafe.Pointer(base)) == r {
			rs.first = base
		}
		c.scan[r] = rs
	}
	n := 0
	for r, rs := range c.scan {
		if rs.carved < hugePageSize-collapseSlack || rs.first == nil {
			continue
		}
		if n == collapsePerCall {
			c.carving.Add(1) // the next call goes on
			return n
		}
		switch err := collapseRegion(unsafe.Slice(rs.first, hugePageSize), c.hugeAdvice); {
		case err == nil:
			c.done[r] = struct{}{}
			c.huge.Add(1)
			n++
		case errors.Is(err, errCollapseUnsupported):
			c.unsupported.Store(true)
			return n
		}
	}
	return n
}

// HugeRegions is how many regions Collapse has moved onto huge pages and are still whole.
func (a *Arena) HugeRegions() int { return int(a.col.huge.Load()) }

// HugeBytes is the item memory Collapse has moved onto huge pages: HugeRegions regions of 2 MiB.
func (a *Arena) HugeBytes() int64 { return a.col.huge.Load() * hugePageSize }

// Collapsing reports whether Collapse still has work it can do: false for a large-page arena, and once the
// kernel has said it cannot collapse.
func (a *Arena) Collapsing() bool { return !a.huge && !a.col.unsupported.Load() }
