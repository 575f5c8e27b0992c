package slab

import (
	"reflect"
	"sync"
	"testing"
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
	a, err := NewArena(4 * PageSize)
	if err != nil {
		t.Fatal(err)
	}
	if k := reflect.TypeOf(a.pages).Elem().Elem().Kind(); k != reflect.Uint8 {
		t.Fatalf("page element kind %v", k)
	}
	if k := reflect.TypeOf(a.class).Elem().Kind(); k != reflect.Uint8 {
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
