package slab

import (
	"reflect"
	"runtime"
	"sync"
	"testing"
	"unsafe"
)

func TestRefPacking(t *testing.T) {
	for _, tc := range []struct{ page, off uint32 }{{0, 0}, {1, 48}, {MaxPages - 1, PageSize - 8}} {
		r := MakeRef(tc.page, tc.off)
		if r.Page() != tc.page || r.Offset() != tc.off || uint64(r)>>RefBits != 0 {
			t.Errorf("ref %x: page %d off %d", r, r.Page(), r.Offset())
		}
		if r == NilRef {
			t.Errorf("real ref equals NilRef")
		}
	}
}

// The arena must hold no Go pointers in item memory: pages are byte slices
// and the class table is bytes, so the GC never scans item contents.
func TestArenaIsPointerFree(t *testing.T) {
	var seg segment
	if k := reflect.TypeOf(seg.pages).Elem().Elem().Kind(); k != reflect.Uint8 {
		t.Fatalf("page element kind %v", k)
	}
	if k := reflect.TypeOf(seg.class).Elem().Kind(); k != reflect.Uint8 {
		t.Fatalf("class table kind %v", k)
	}
	if k := reflect.TypeOf(classState{}.free).Kind(); k != reflect.Uint64 {
		t.Fatalf("free list head kind %v", k)
	}
}

func TestArenaLimits(t *testing.T) {
	for _, tc := range []struct {
		limit int64
		pages int
		err   bool
	}{
		{0, 0, true},
		{-1, 0, true},
		{1, 1, false},
		{PageSize, 1, false},
		{8*PageSize + 5, 8, false},
		{(MaxPages + 1) * PageSize, 0, true},
	} {
		a, err := NewArena(tc.limit)
		if tc.err {
			if err == nil {
				t.Errorf("limit %d: no error", tc.limit)
			}
			continue
		}
		if err != nil || a.MaxPages() != tc.pages {
			t.Errorf("limit %d: pages %v err %v, want %d", tc.limit, a, err, tc.pages)
		}
	}
}

// Many allocators racing for the budget never exceed it in total.
func TestPageBudgetConcurrent(t *testing.T) {
	const pages, owners = 16, 8
	a, _ := NewArena(pages * PageSize)
	c := DefaultClasses()
	big := c.Largest()
	var wg sync.WaitGroup
	got := make([]int, owners)
	for i := 0; i < owners; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			al := NewAllocator(a, c, 0)
			for n := 0; n < 4*pages; n++ {
				if _, ok := al.Alloc(big); !ok {
					break
				}
			}
			got[i] = al.Pages(big)
		}(i)
	}
	wg.Wait()
	total := 0
	for _, g := range got {
		total += g
	}
	if total != pages || a.PagesTaken() != pages {
		t.Fatalf("pages handed out %d, taken %d, budget %d", total, a.PagesTaken(), pages)
	}
}

// The budget can be raised and lowered at run time: raising lets more pages be
// taken, lowering stops new ones until owners release enough, and released
// page ids are reused.
func TestArenaSetLimit(t *testing.T) {
	a, _ := NewArena(2 * PageSize)
	c := DefaultClasses()
	big := c.Largest()
	al := NewAllocator(a, c, 0)
	fill := func() int { // allocates until refused; returns pages owned
		for n := 0; n < 4*c.PerPage(big)*8; n++ {
			r, ok := al.Alloc(big)
			if !ok {
				break
			}
			al.Chunk(r)[StateOffset] = 1
		}
		return al.Pages(big)
	}
	if got := fill(); got != 2 {
		t.Fatalf("pages under a 2-page budget: %d", got)
	}
	if err := a.SetLimit(5 * PageSize); err != nil {
		t.Fatal(err)
	}
	if got := fill(); got != 5 || a.PagesTaken() != 5 {
		t.Fatalf("after raising to 5: owned %d, taken %d", got, a.PagesTaken())
	}
	if err := a.SetLimit(3 * PageSize); err != nil {
		t.Fatal(err)
	}
	if _, ok := al.arena.takePage(); ok {
		t.Fatal("a page was taken over a lowered budget")
	}
	// Release two pages: free their chunks first, as the owner's eviction would.
	for i := 0; i < 2; i++ {
		p := al.PageAt(big, 0)
		first, size, n := al.PageChunks(p)
		for j := 0; j < n; j++ {
			al.Free(first + Ref(j*size))
		}
		if err := al.ReleasePage(p); err != nil {
			t.Fatal(err)
		}
		if a.page(p) != nil {
			t.Fatalf("released page %d still holds memory", p)
		}
	}
	if a.PagesTaken() != 3 || al.OwnedPages() != 3 || al.Pages(big) != 3 {
		t.Fatalf("after releasing: taken %d owned %d class pages %d", a.PagesTaken(), al.OwnedPages(), al.Pages(big))
	}
	if st := al.Stats(big); st.UsedChunks != 3*c.PerPage(big) || st.FreeChunks != 0 {
		t.Fatalf("stats after release: %+v", st)
	}
	if err := a.SetLimit(4 * PageSize); err != nil {
		t.Fatal(err)
	}
	p, ok := a.takePage()
	if !ok || p > 4 {
		t.Fatalf("page after raising again: %d %v (ids must be reused)", p, ok)
	}
	if err := a.SetLimit((MaxPages + 1) * PageSize); err == nil {
		t.Fatal("a limit beyond the addressable pages was accepted")
	}
}

// Page ids beyond the first segment work (the page table grows by segments).
func TestArenaSegments(t *testing.T) {
	a, _ := NewArena((segmentPages + 3) * PageSize)
	for i := 0; i < segmentPages+3; i++ {
		p, ok := a.takePage()
		if !ok || int(p) != i {
			t.Fatalf("take %d: %d %v", i, p, ok)
		}
		a.setClass(p, uint8(i), 0)
		a.page(p)[PageSize-1] = byte(i)
		if a.classOf(p) != uint8(i) {
			t.Fatalf("class of page %d", p)
		}
	}
	if a.dir[1].Load() == nil || a.dir[2].Load() != nil {
		t.Fatal("segments not allocated lazily")
	}
	if _, ok := a.takePage(); ok {
		t.Fatal("budget exceeded")
	}
}

// ChunkHint names a chunk's first byte while its page is taken and nothing once it is released, and takes
// any Ref without panicking: lock-free prefetchers hand it whatever they read.
func TestChunkHint(t *testing.T) {
	al := newTestAllocator(t, 2)
	id, _ := al.Classes().For(100)
	var refs []Ref
	for range 3 {
		r, ok := al.Alloc(id)
		if !ok {
			t.Fatal("alloc failed")
		}
		refs = append(refs, r)
	}
	for _, r := range refs {
		if got, want := al.arena.ChunkHint(r), uintptr(unsafe.Pointer(&al.Chunk(r)[0])); got != want {
			t.Errorf("ref %x: hint %#x, chunk at %#x", r, got, want)
		}
	}
	for _, r := range []Ref{NilRef, MakeRef(1, 0), MakeRef(MaxPages-1, 64), Ref(1<<64 - 1)} {
		if got := al.arena.ChunkHint(r); got != 0 {
			t.Errorf("ref %x of a page never taken: hint %#x", r, got)
		}
	}
	p := refs[0].Page()
	for _, r := range refs {
		al.Free(r)
	}
	if err := al.ReleasePage(p); err != nil {
		t.Fatal(err)
	}
	if got := al.arena.ChunkHint(refs[0]); got != 0 {
		t.Errorf("hint into a released page: %#x", got)
	}
}

// Both kinds of arena hand out whole, distinct, writable pages two to an aligned region (collapse.go
// needs the alignment), keep the page budget, and reuse released ids.
func TestArenaRegions(t *testing.T) {
	for _, c := range []struct {
		name string
		new  func(int64) (*Arena, error)
	}{{"NewArena", NewArena}, {"NewLargePageArena", NewLargePageArena}} {
		t.Run(c.name, func(t *testing.T) { testArenaRegions(t, c.new) })
	}
}

func testArenaRegions(t *testing.T, newArena func(int64) (*Arena, error)) {
	const pages = 5
	a, err := newArena(pages * PageSize)
	if err != nil {
		t.Fatal(err)
	}
	var ids []uint32
	for {
		id, ok := a.takePage()
		if !ok {
			break
		}
		ids = append(ids, id)
	}
	if len(ids) != pages || a.PagesTaken() != pages {
		t.Fatalf("took %d pages (arena says %d), budget %d", len(ids), a.PagesTaken(), pages)
	}
	addr := func(id uint32) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(a.page(id)))) }
	for i, id := range ids {
		p := a.page(id)
		if len(p) != PageSize || cap(p) != PageSize {
			t.Fatalf("page %d: len %d cap %d", id, len(p), cap(p))
		}
		for j := range p {
			if p[j] != 0 {
				t.Fatalf("page %d not zeroed at %d", id, j)
			}
		}
		p[0], p[PageSize-1] = byte(i+1), byte(i+1)
		// Pages are taken in region order: the first of each pair starts a region, the second follows it.
		if i%2 == 0 && runtime.GOOS == "linux" && addr(id)%hugePageSize != 0 {
			t.Errorf("page %d (the first of its region) at %#x: not aligned to %d", id, addr(id), hugePageSize)
		}
		if i%2 == 1 && addr(id) != addr(ids[i-1])+PageSize {
			t.Errorf("page %d at %#x does not follow its region's first page at %#x", id, addr(id), addr(ids[i-1]))
		}
	}
	for i, id := range ids { // no page overlaps another: each still holds its own marks
		if p := a.page(id); p[0] != byte(i+1) || p[PageSize-1] != byte(i+1) {
			t.Fatalf("page %d holds %d..%d, want %d", id, p[0], p[PageSize-1], i+1)
		}
	}
	// The odd page count left one page of the last region in reserve; a released page's memory is gone,
	// and its id comes back with fresh zeroed memory.
	if n := len(a.spare.pages); n != 1 {
		t.Errorf("%d pages in reserve, want 1", n)
	}
	a.releasePage(ids[1])
	id, ok := a.takePage()
	if !ok || id != ids[1] {
		t.Fatalf("retake: id %d ok %v, want id %d", id, ok, ids[1])
	}
	if p := a.page(id); p[0] != 0 || p[PageSize-1] != 0 {
		t.Errorf("retaken page not zeroed")
	}
	if n := len(a.spare.pages); n != 0 {
		t.Errorf("%d pages in reserve after the retake, want 0 (it used the reserve)", n)
	}
	for _, id := range ids {
		a.releasePage(id)
	}
	if a.PagesTaken() != 0 {
		t.Errorf("%d pages still taken", a.PagesTaken())
	}
}

// Releasing a page whose partner is still in reserve unmaps the whole region, the partner included; the
// cleanup of an unreachable arena unmaps what is left in reserve.
func TestLargePageArenaReleaseTakesReservedPartner(t *testing.T) {
	a, err := NewLargePageArena(4 * PageSize)
	if err != nil {
		t.Fatal(err)
	}
	if !a.LargePages() {
		t.Fatal("LargePages() is false for a large-page arena")
	}
	id, ok := a.takePage() // maps a region: the second page goes to the reserve
	if !ok || len(a.spare.pages) != 1 {
		t.Fatalf("take: ok %v, %d pages in reserve", ok, len(a.spare.pages))
	}
	a.releasePage(id)
	if n := len(a.spare.pages); n != 0 {
		t.Fatalf("%d pages in reserve after releasing the partner, want 0", n)
	}
	id, ok = a.takePage() // a fresh region again
	if !ok || len(a.spare.pages) != 1 {
		t.Fatalf("retake: ok %v, %d pages in reserve", ok, len(a.spare.pages))
	}
	unmapAll(arenaMemory{a.dir, a.spare}) // as the cleanup would, with a page in use and one in reserve
	if a.spare.pages != nil || a.page(id) != nil {
		t.Errorf("cleanup left %d pages in reserve, page in use mapped: %v", len(a.spare.pages), a.page(id) != nil)
	}
	if plain, _ := NewArena(PageSize); plain.LargePages() {
		t.Error("LargePages() is true for NewArena")
	}
}
