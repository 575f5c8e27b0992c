package shard

import (
	"bytes"
	"testing"
)

// fillItems stores itemBytesForLimitTest-byte items from key(from) on until count of them are stored; it returns how many
// are resident afterwards among all keys below from+count.
func fillItems(t *testing.T, s *Store, from, count int) int {
	t.Helper()
	for i := from; i < from+count; i++ {
		if r := s.Store(ModeSet, key(i), 0, 0, pattern(itemBytesForLimitTest, i), 0); r != Stored {
			t.Fatalf("item %d: %v", i, r)
		}
	}
	present := 0
	for i := range from + count {
		if v, _, ok := s.Get(nil, key(i)); ok {
			if !bytes.Equal(v, pattern(itemBytesForLimitTest, i)) {
				t.Fatalf("item %d corrupted", i)
			}
			present++
		}
	}
	return present
}

// itemBytesForLimitTest is the value size of TestSetMemoryLimit: about 880 items per page.
const itemBytesForLimitTest = 1000

// cache_memlimit: raising the limit lets more pages be taken, lowering it stops new pages and the
// reclaimer gives the excess back, evicting what was in it; the reported limit follows.
func TestSetMemoryLimit(t *testing.T) {
	cases := []struct {
		name      string
		shards    int
		startMB   int64
		raiseMB   int64
		lowerMB   int64
		wantPages [3]int // arena pages in use: full at start, full after raising, after lowering
	}{
		// 1/64 of the limit (at least 1 MiB) is lease bookkeeping, the rest whole pages.
		{"one shard", 1, 8, 16, 10, [3]int{7, 15, 9}},
		{"four shards", 4, 16, 32, 12, [3]int{15, 31, 11}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newStore(t, Config{MemoryLimit: tc.startMB << 20, Shards: tc.shards})
			const batch = 40_000 // more items than any of the limits holds
			before := fillItems(t, s, 0, batch)
			if got := s.arena.PagesTaken(); got != tc.wantPages[0] {
				t.Fatalf("pages at start: %d, want %d", got, tc.wantPages[0])
			}
			if err := s.SetMemoryLimit(tc.raiseMB << 20); err != nil {
				t.Fatal(err)
			}
			after := fillItems(t, s, batch, batch)
			if got := s.arena.PagesTaken(); got != tc.wantPages[1] {
				t.Fatalf("pages after raising: %d, want %d", got, tc.wantPages[1])
			}
			if after < before*3/2 {
				t.Fatalf("raising the limit: %d items resident, %d before", after, before)
			}
			if st := s.Stats(); st.LimitMaxbytes != tc.raiseMB<<20 || s.MemoryLimit() != tc.raiseMB<<20 {
				t.Fatalf("limit_maxbytes %d", st.LimitMaxbytes)
			}

			if err := s.SetMemoryLimit(tc.lowerMB << 20); err != nil {
				t.Fatal(err)
			}
			// Stores go on within the pages held; the reclaimer gives the excess back over ticks.
			fillItems(t, s, 2*batch, 1000)
			for range 100 {
				s.reclaimTick()
			}
			st := s.Stats()
			if got := s.arena.PagesTaken(); got != tc.wantPages[2] || st.TotalMalloced != int64(got)<<20 {
				t.Fatalf("pages after lowering: %d (malloced %d), want %d", got, st.TotalMalloced, tc.wantPages[2])
			}
			present := fillItems(t, s, 2*batch+1000, 1000)
			if int64(present) != s.Stats().CurrItems {
				t.Fatalf("%d items readable, curr_items %d", present, s.Stats().CurrItems)
			}
			if got := s.arena.PagesTaken(); got != tc.wantPages[2] {
				t.Fatalf("pages after storing under the lowered limit: %d", got)
			}
		})
	}
}

func TestSetMemoryLimitRefused(t *testing.T) {
	s, _ := newStore(t, Config{MemoryLimit: 64 << 20, MaxItemSize: 16 << 20})
	for _, limit := range []int64{8 << 20, 1 << 62} {
		if err := s.SetMemoryLimit(limit); err == nil {
			t.Errorf("limit %d accepted", limit)
		}
	}
	if s.MemoryLimit() != 64<<20 || s.arena.MaxPages() != 63 {
		t.Fatalf("a refused limit changed the store: %d, %d pages", s.MemoryLimit(), s.arena.MaxPages())
	}
}
