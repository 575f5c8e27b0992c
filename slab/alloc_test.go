package slab

import (
	"testing"
)

func newTestAllocator(t *testing.T, pages int) *Allocator {
	t.Helper()
	a, err := NewArena(int64(pages) * PageSize)
	if err != nil {
		t.Fatal(err)
	}
	return NewAllocator(a, DefaultClasses(), 0)
}

func mark(al *Allocator, r Ref) { al.Chunk(r)[StateOffset] = 1 }

func TestAllocFillFreeReuse(t *testing.T) {
	al := newTestAllocator(t, 1)
	id, _ := al.Classes().For(1000)
	per := al.Classes().PerPage(id)
	seen := map[Ref]bool{}
	var refs []Ref
	for i := 0; i < per; i++ {
		r, ok := al.Alloc(id)
		if !ok {
			t.Fatalf("alloc %d of %d failed", i, per)
		}
		if seen[r] || int(r.Offset())%al.Classes().Size(id) != 0 {
			t.Fatalf("bad or duplicate ref %x", r)
		}
		seen[r] = true
		mark(al, r)
		refs = append(refs, r)
	}
	if _, ok := al.Alloc(id); ok {
		t.Fatal("alloc beyond one page succeeded")
	}
	other, _ := al.Classes().For(100)
	if _, ok := al.Alloc(other); ok {
		t.Fatal("another class got a page beyond the budget")
	}
	st := al.Stats(id)
	if st.Pages != 1 || st.UsedChunks != per || st.FreeChunks != 0 || st.FreeChunksEnd != 0 {
		t.Fatalf("stats %+v", st)
	}
	al.Free(refs[3])
	al.Free(refs[7])
	if al.Chunk(refs[3])[StateOffset] != StateFree {
		t.Fatal("free did not mark the chunk")
	}
	for _, want := range []Ref{refs[7], refs[3]} { // LIFO reuse
		r, ok := al.Alloc(id)
		if !ok || r != want {
			t.Fatalf("reuse got %x ok=%v, want %x", r, ok, want)
		}
	}
}

func TestHandAndCursorVisitCarvedChunks(t *testing.T) {
	al := newTestAllocator(t, 4)
	c := al.Classes()
	small, _ := c.For(100)
	big := c.Largest()
	want := map[Ref]bool{}
	for i := 0; i < c.PerPage(small)+10; i++ { // one full page plus a partial one
		r, _ := al.Alloc(small)
		mark(al, r)
		want[r] = true
	}
	r, _ := al.Alloc(big)
	mark(al, r)
	want[r] = true

	// The hand visits exactly the carved chunks of its class, then wraps.
	n := c.PerPage(small) + 10
	first := al.Hand(small)
	got := map[Ref]bool{first: true}
	for i := 1; i < n; i++ {
		got[al.Hand(small)] = true
	}
	if len(got) != n {
		t.Fatalf("hand visited %d distinct chunks, want %d", len(got), n)
	}
	if h := al.Hand(small); h != first {
		t.Fatalf("hand did not wrap: %x vs %x", h, first)
	}
	if al.Hand(0) != NilRef {
		t.Fatal("hand of an empty class returned a chunk")
	}

	var cur Cursor
	visited := map[Ref]bool{}
	for r := al.Next(&cur); r != NilRef; r = al.Next(&cur) {
		if visited[r] {
			t.Fatalf("cursor revisited %x", r)
		}
		visited[r] = true
	}
	if len(visited) != len(want) {
		t.Fatalf("cursor visited %d, want %d", len(visited), len(want))
	}
	if r := al.Next(&cur); r != first && r == NilRef {
		t.Fatal("cursor did not rewind")
	}
}

func TestMovePage(t *testing.T) {
	al := newTestAllocator(t, 1)
	c := al.Classes()
	small, _ := c.For(100)
	big := c.Largest()
	var refs []Ref
	for {
		r, ok := al.Alloc(small)
		if !ok {
			break
		}
		mark(al, r)
		refs = append(refs, r)
	}
	p := refs[0].Page()
	if err := al.MovePage(p, big); err == nil {
		t.Fatal("moved a page with used chunks")
	}
	for _, r := range refs {
		al.Free(r)
	}
	if err := al.MovePage(p, small); err == nil {
		t.Fatal("moved a page to its own class")
	}
	if err := al.MovePage(p, big); err != nil {
		t.Fatal(err)
	}
	if st := al.Stats(small); st.Pages != 0 || st.FreeChunks != 0 || st.UsedChunks != 0 {
		t.Fatalf("source class after move %+v", st)
	}
	if _, ok := al.Alloc(small); ok {
		t.Fatal("source class still allocates")
	}
	for i := 0; i < c.PerPage(big); i++ {
		r, ok := al.Alloc(big)
		if !ok || r.Page() != p {
			t.Fatalf("alloc %d in moved page: %x %v", i, r, ok)
		}
		mark(al, r)
	}
	if _, ok := al.Alloc(big); ok {
		t.Fatal("target class allocated beyond its page")
	}
	if al.Arena().PagesTaken() != 1 {
		t.Fatalf("pages taken %d", al.Arena().PagesTaken())
	}
}

func TestMovePageIntoClassWithBumpSpace(t *testing.T) {
	al := newTestAllocator(t, 2)
	c := al.Classes()
	a, _ := c.For(100)
	b, _ := c.For(5000)
	ra, _ := al.Alloc(a)
	rb, _ := al.Alloc(b) // b's page is only partly carved
	mark(al, rb)
	al.Free(ra)
	if err := al.MovePage(ra.Page(), b); err != nil {
		t.Fatal(err)
	}
	st := al.Stats(b)
	if st.Pages != 2 || st.FreeChunks != c.PerPage(b) || st.UsedChunks != 1 {
		t.Fatalf("stats after carving move %+v", st)
	}
}

func TestAllocSteadyStateAllocatesNothing(t *testing.T) {
	al := newTestAllocator(t, 1)
	id, _ := al.Classes().For(200)
	r, _ := al.Alloc(id)
	al.Free(r)
	if n := testing.AllocsPerRun(1000, func() {
		r, _ := al.Alloc(id)
		al.Free(r)
	}); n != 0 {
		t.Fatalf("%v allocs per alloc/free", n)
	}
}

func TestAllocatorShare(t *testing.T) {
	a, _ := NewArena(10 * PageSize)
	c := DefaultClasses()
	one, two := NewAllocator(a, c, 3), NewAllocator(a, c, 7)
	for _, tc := range []struct {
		al   *Allocator
		want int
	}{{one, 3}, {two, 7}} {
		for tc.al.OwnedPages() < 20 {
			if _, ok := tc.al.Alloc(c.Largest()); !ok {
				break
			}
		}
		if tc.al.OwnedPages() != tc.want || tc.al.MaxPages() != tc.want {
			t.Fatalf("owned %d, want %d", tc.al.OwnedPages(), tc.want)
		}
	}
	if a.PagesTaken() != 10 {
		t.Fatalf("taken %d", a.PagesTaken())
	}
}

func TestPeekHand(t *testing.T) {
	al := newTestAllocator(t, 2)
	id, _ := al.Classes().For(100)
	if al.PeekHand(id) != NilRef {
		t.Fatal("peek in an empty class")
	}
	for range 3 {
		r, _ := al.Alloc(id)
		mark(al, r)
	}
	for range 5 { // wraps over the three carved chunks
		p := al.PeekHand(id)
		if p == NilRef || al.PeekHand(id) != p || al.Hand(id) != p {
			t.Fatalf("peek %x disagrees with the hand", p)
		}
	}
}
