package shard

import (
	"fmt"
	"testing"

	"github.com/leasecached/leasecached/slab"
)

// valueFor returns a value length whose item (key klen, no flags, no exptime) lands in class id.
func valueFor(t *testing.T, s *Store, id, klen int) int {
	t.Helper()
	size := s.classes.Size(id)
	for vlen := size - klen; vlen > 0; vlen-- {
		if got, ok := s.classes.For(headerLen(layoutOf(0, 0, vlen), false) + klen + vlen); ok && got == id {
			return vlen
		}
	}
	t.Fatalf("no value length for class %d", id)
	return 0
}

// TestEmptyPageBeforeEviction: a class with no free chunk takes a page that holds no item from another class
// before it evicts one of its own items. The integrity soak (integration/soak_test.go) lost a 346 KB value
// at -m 1024 with 12.7 MB stored: every page of its shard was assigned to some class, most of them empty.
func TestEmptyPageBeforeEviction(t *testing.T) {
	s, _ := newStore(t, Config{MemoryLimit: 8 << 20, Shards: 1, StaleWindow: -1})
	sh := &s.shards[0]
	const klen = 8
	key := func(prefix string, i int) []byte { return fmt.Appendf(nil, "%s-%05d", prefix, i)[:klen] }

	// Class a's one page, full.
	a := s.classes.Largest() - 3
	aLen := valueFor(t, s, a, klen)
	perPage := s.classes.PerPage(a)
	for i := range perPage {
		if r := s.Store(ModeSet, key("a", i), 0, 0, pattern(aLen, i), 0); r != Stored {
			t.Fatalf("set a %d: %v", i, r)
		}
	}
	// Every other page of the shard: one item each, in classes of their own, then deleted.
	other := 0
	for id := s.classes.Largest() - 4; sh.al.OwnedPages() < sh.al.MaxPages(); id-- {
		if id < 0 {
			t.Fatalf("ran out of classes with %d of %d pages taken", sh.al.OwnedPages(), sh.al.MaxPages())
		}
		if r := s.Store(ModeSet, key("o", other), 0, 0, pattern(valueFor(t, s, id, klen), other), 0); r != Stored {
			t.Fatalf("set o %d: %v", other, r)
		}
		other++
	}
	for i := range other {
		if r := s.Delete(key("o", i)); r != Deleted {
			t.Fatalf("delete o %d: %v", i, r)
		}
	}
	if st := sh.al.Stats(a); st.Pages != 1 || st.FreeChunks+st.FreeChunksEnd != 0 {
		t.Fatalf("class %d: %+v, want one full page", a, st)
	}

	// One more item of class a: it must get a chunk of an empty page, not evict one of the others.
	if r := s.Store(ModeSet, key("a", perPage), 0, 0, pattern(aLen, perPage), 0); r != Stored {
		t.Fatalf("set a %d: %v", perPage, r)
	}
	if ev := s.Stats().Evictions; ev != 0 {
		t.Errorf("evictions %d with %d empty pages in the shard", ev, other)
	}
	for i := range perPage + 1 {
		if _, _, ok := s.Get(nil, key("a", i)); !ok {
			t.Errorf("a %d: evicted", i)
		}
	}
	if st := sh.al.Stats(a); st.Pages != 2 {
		t.Errorf("class %d: %d pages, want 2 (one taken from another class)", a, st.Pages)
	}
}

// TestEmptyPageReleasedFirst: a shard over its page allowance (the limit lowered, or its index grown) gives
// back pages that hold no item before it evicts items to free one.
func TestEmptyPageReleasedFirst(t *testing.T) {
	s, _ := newStore(t, Config{MemoryLimit: 8 << 20, Shards: 1, StaleWindow: -1})
	sh := &s.shards[0]
	const klen = 8
	key := func(prefix string, i int) []byte { return fmt.Appendf(nil, "%s-%05d", prefix, i)[:klen] }

	// Class a: two full pages, the most of any class (the victim a page move picks).
	a := s.classes.Largest() - 3
	aLen := valueFor(t, s, a, klen)
	na := 2 * s.classes.PerPage(a)
	for i := range na {
		if r := s.Store(ModeSet, key("a", i), 0, 0, pattern(aLen, i), 0); r != Stored {
			t.Fatalf("set a %d: %v", i, r)
		}
	}
	// Every other page: one item each, in classes of their own, then deleted.
	other := 0
	for id := s.classes.Largest() - 4; sh.al.OwnedPages() < sh.al.MaxPages(); id-- {
		if r := s.Store(ModeSet, key("o", other), 0, 0, pattern(valueFor(t, s, id, klen), other), 0); r != Stored {
			t.Fatalf("set o %d: %v", other, r)
		}
		other++
	}
	for i := range other {
		if r := s.Delete(key("o", i)); r != Deleted {
			t.Fatalf("delete o %d: %v", i, r)
		}
	}
	if other < 2 {
		t.Fatalf("only %d empty pages", other)
	}
	owned := sh.al.OwnedPages()

	// Two pages less: the reclaimer gives two back, the empty ones.
	if err := s.SetMemoryLimit(s.MemoryLimit() - 2*slab.PageSize); err != nil {
		t.Fatal(err)
	}
	s.reclaimTick()
	if got, want := sh.al.OwnedPages(), min(owned, sh.al.MaxPages()); got != want {
		t.Fatalf("shard owns %d pages, allowance %d (was %d)", got, sh.al.MaxPages(), owned)
	}
	if ev := s.Stats().Evictions; ev != 0 {
		t.Errorf("evictions %d with %d empty pages to give back", ev, other)
	}
	for i := range na {
		if _, _, ok := s.Get(nil, key("a", i)); !ok {
			t.Errorf("a %d: evicted", i)
		}
	}
}
