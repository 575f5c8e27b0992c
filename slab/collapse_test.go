package slab

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"
)

// collapseOrSkip is a.Collapse, skipping the test where the kernel cannot collapse.
func collapseOrSkip(t *testing.T, a *Arena) int {
	t.Helper()
	n := a.Collapse()
	if a.col.unsupported.Load() {
		t.Skip("this kernel cannot collapse memory into huge pages (MADV_COLLAPSE)")
	}
	return n
}

// A region moves onto a huge page once its two pages are carved to within collapseSlack, with every
// byte in place; not before; and releasing one of its pages forgets it while the other keeps its bytes.
func TestCollapse(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("huge pages are Linux's")
	}
	a, err := NewArena(8 * PageSize)
	if err != nil {
		t.Fatal(err)
	}
	checkCollapse(t, a, "AnonHugePages")
}

// checkCollapse is TestCollapse's walk through arena a, whose huge pages smaps counts in field.
func checkCollapse(t *testing.T, a *Arena, field string) {
	al := NewAllocator(a, DefaultClasses(), 8)
	id, _ := al.Classes().For(1000)
	size := al.Classes().Size(id)
	var refs []Ref
	fill := func(carved int) { // allocates until the second page is carved past carved bytes
		for al.Pages(id) < 2 || al.cls[id].bumpOff < uint32(carved) {
			r, ok := al.Alloc(id)
			if !ok {
				t.Fatal("arena exhausted")
			}
			c := al.Chunk(r)
			for i := range c {
				c[i] = byte(len(refs) + i)
			}
			refs = append(refs, r)
		}
	}
	check := func() {
		t.Helper()
		for k, r := range refs {
			if c := al.Chunk(r); c[0] != byte(k) || c[len(c)-1] != byte(k+len(c)-1) {
				t.Fatalf("chunk %d changed", k)
			}
		}
	}
	fill(PageSize/2 - 2<<carvedStepShift) // well short of the slack
	region := regionOf(unsafe.SliceData(a.page(al.PageAt(id, 0))))
	if regionOf(unsafe.SliceData(a.page(al.PageAt(id, 1)))) != region {
		t.Fatal("the class's two pages are not one region")
	}
	if n := collapseOrSkip(t, a); n != 0 || a.HugeRegions() != 0 {
		t.Fatalf("a region carved to 1.5 MiB less two steps: %d collapsed", n)
	}
	if kb := smapsField(t, region, field); kb != 0 {
		t.Fatalf("%s %d kB before any collapse", field, kb)
	}
	fill(PageSize/2 + size)
	if n := collapseOrSkip(t, a); n != 1 || a.HugeRegions() != 1 {
		t.Fatalf("a region carved to within the slack: %d collapsed, %d huge", n, a.HugeRegions())
	}
	if kb := smapsField(t, region, field); kb < hugePageSize>>10 {
		t.Errorf("%s %d kB after the collapse", field, kb)
	}
	check()
	if n := a.Collapse(); n != 0 {
		t.Errorf("a second call collapsed %d regions: nothing was carved since", n)
	}

	// Carving on into the collapsed region reports again, but there is nothing more to collapse.
	fill(PageSize/2 + 64*size)
	if n := a.Collapse(); n != 0 || a.HugeRegions() != 1 {
		t.Errorf("after more carving: %d collapsed, %d huge", n, a.HugeRegions())
	}
	second := al.PageAt(id, 1)
	var kept []Ref
	for _, r := range refs {
		if r.Page() == second {
			al.Free(r)
		} else {
			kept = append(kept, r)
		}
	}
	refs = kept
	if err := al.ReleasePage(second); err != nil {
		t.Fatal(err)
	}
	if a.HugeRegions() != 0 {
		t.Errorf("%d huge regions after a page of the only one was released", a.HugeRegions())
	}
	check()
}

// A large-page arena's regions are huge from the start: Collapse has nothing to do.
func TestCollapseLargePageArena(t *testing.T) {
	a, err := NewLargePageArena(4 * PageSize)
	if err != nil {
		t.Fatal(err)
	}
	al := NewAllocator(a, DefaultClasses(), 4)
	id, _ := al.Classes().For(PageSize / 4)
	for range 8 {
		if _, ok := al.Alloc(id); !ok {
			t.Fatal("arena exhausted")
		}
	}
	if n := a.Collapse(); n != 0 || a.HugeRegions() != 0 || a.col.carving.Load() != 0 {
		t.Errorf("large-page arena: %d collapsed, %d huge, %d reports", n, a.HugeRegions(), a.col.carving.Load())
	}
}

// Collapse runs beside pages being taken, carved, written and released (run with -race): no page loses
// a byte, and the count of huge regions ends at the number of whole collapsed regions.
func TestCollapseWhileReleasing(t *testing.T) {
	const pages = 16
	a, err := NewArena(pages * PageSize)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				a.Collapse()
				time.Sleep(100 * time.Microsecond)
			}
		}
	})
	held := map[uint32]byte{}
	deadline := time.Now().Add(time.Second)
	for round := 0; round < 400 && time.Now().Before(deadline); round++ {
		for len(held) < pages {
			id, ok := a.takePage()
			if !ok {
				t.Fatal("budget exhausted with pages to spare")
			}
			p, mark := a.page(id), byte(round+len(held))
			for i := 0; i < len(p); i += 4096 {
				p[i] = mark
			}
			a.markCarved(id, PageSize)
			held[id] = mark
		}
		for id, mark := range held {
			p := a.page(id)
			for i := 0; i < len(p); i += 4096 {
				if p[i] != mark {
					t.Fatalf("round %d: page %d byte %d is %d, want %d", round, id, i, p[i], mark)
				}
			}
			if (int(id)+round)%3 == 0 {
				a.releasePage(id)
				delete(held, id)
			}
		}
	}
	close(stop)
	wg.Wait()
	if a.col.unsupported.Load() {
		return
	}
	a.Collapse()
	whole := 0
	for r := range a.col.done {
		n := 0
		for id := range held {
			if regionOf(unsafe.SliceData(a.page(id))) == r {
				n++
			}
		}
		if n != hugePagePages {
			t.Errorf("region %#x counted as collapsed with %d of its pages in use", r, n)
		}
		whole++
	}
	if a.HugeRegions() != whole {
		t.Errorf("HugeRegions %d, %d regions recorded", a.HugeRegions(), whole)
	}
	t.Logf("%d regions collapsed at the end, of %d pages held", whole, len(held))
}

// Releasing a page never waits for a collapse under way (event loops release pages when an index grows):
// its memory waits, mapped, until the collapse ends, and is unmapped then.
func TestReleaseDoesNotWaitForCollapse(t *testing.T) {
	a, err := NewArena(4 * PageSize)
	if err != nil {
		t.Fatal(err)
	}
	var ids []uint32
	for range 3 {
		id, ok := a.takePage()
		if !ok {
			t.Fatal("budget exhausted")
		}
		ids = append(ids, id)
	}
	a.col.mu.Lock() // as Collapse holds it
	done := make(chan struct{})
	go func() {
		a.releasePage(ids[0])
		a.releasePage(ids[2]) // its partner is in reserve: the whole region waits
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("releasePage waited for the collapser's lock")
	}
	if n := len(a.col.unmapping); n != 2 {
		t.Fatalf("%d mappings waiting to be unmapped, want 2", n)
	}
	if a.PagesTaken() != 1 {
		t.Errorf("%d pages taken: the released ids did not go back to the budget at once", a.PagesTaken())
	}
	a.col.unlock() // as Collapse ends
	if n := len(a.col.unmapping); n != 0 {
		t.Errorf("%d mappings still waiting after the collapse ended", n)
	}
	if !a.col.mu.TryLock() {
		t.Fatal("the collapser's lock is still held")
	}
	a.col.unlock()
	if p := a.page(ids[1]); len(p) != PageSize {
		t.Fatal("the page kept lost its memory")
	} else {
		p[0], p[PageSize-1] = 1, 1 // still mapped and writable
	}
}

// smapsField is the value of field (e.g. "THPeligible", or "AnonHugePages" in kB) for the mapping that holds
// addr, from /proc/self/smaps.
func smapsField(t *testing.T, addr uintptr, field string) int {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in := false
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(sc.Text(), "%x-%x", &lo, &hi); n == 2 {
			in = lo <= addr && addr < hi
			continue
		}
		var v int
		if n, _ := fmt.Sscanf(sc.Text(), field+": %d", &v); n == 1 && in {
			return v
		}
	}
	t.Fatalf("no %s for the mapping that holds %#x", field, addr)
	return 0
}

// A table of a huge page or more starts on a huge-page boundary and is advised to be huge (where the
// kernel leaves huge pages to madvise, only such a mapping is eligible); a smaller one is an ordinary
// mapping. Either way it comes zeroed and keeps what is written.
func TestWordsHugeTables(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("huge pages are Linux's")
	}
	mode, _ := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	madvise := strings.Contains(string(mode), "[madvise]")
	for _, n := range []int{1 << 10, hugePageSize/8 - 1, hugePageSize / 8, hugePageSize/8*5/4 + 3, hugePageSize / 8 * 3} {
		w, err := Words(n)
		if err != nil {
			t.Fatal(err)
		}
		addr := uintptr(unsafe.Pointer(unsafe.SliceData(w)))
		big := n*wordSize >= hugePageSize
		if big && addr%hugePageSize != 0 {
			t.Errorf("%d words: table at %#x, not on a huge-page boundary", n, addr)
		}
		if madvise {
			want := 0
			if big {
				want = 1
			}
			if got := smapsField(t, addr, "THPeligible"); got != want {
				t.Errorf("%d words: THPeligible %d, want %d", n, got, want)
			}
		}
		for i := range w {
			if w[i] != 0 {
				t.Fatalf("%d words: word %d not zeroed", n, i)
			}
			w[i] = uint64(i) * 3
		}
		for i := range w {
			if w[i] != uint64(i)*3 {
				t.Fatalf("%d words: word %d lost its write", n, i)
			}
		}
		FreeWords(w)
	}
}
