package shard

import (
	"bytes"
	"fmt"
	"testing"
)

func key(i int) []byte { return fmt.Appendf(nil, "key:%08d", i) }

// Under an 8 MiB limit 200k 100-byte items cannot all fit: pages stay within
// the budget, evictions are counted, every surviving item is byte-exact.
func TestMemoryLimitEvicts(t *testing.T) {
	const n, size = 200_000, 100
	s, _ := newStore(t, Config{MemoryLimit: 8 << 20})
	for i := range n {
		if r := s.Store(ModeSet, key(i), uint32(i), 0, pattern(size, i), 0); r != Stored {
			t.Fatalf("item %d: %v", i, r)
		}
		if i%10_000 == 0 && s.arena.PagesTaken() > s.arena.MaxPages() {
			t.Fatalf("pages %d over budget %d", s.arena.PagesTaken(), s.arena.MaxPages())
		}
	}
	st := s.Stats()
	// 1/64 of the limit is lease bookkeeping, so the arena holds the 7 whole pages left.
	if st.TotalMalloced > 8<<20 || s.arena.PagesTaken() != 7 {
		t.Fatalf("malloced %d pages %d", st.TotalMalloced, s.arena.PagesTaken())
	}
	if st.Evictions == 0 || st.EvictedUnfetched != st.Evictions {
		t.Fatalf("evictions %d unfetched %d", st.Evictions, st.EvictedUnfetched)
	}
	present := 0
	var buf []byte
	for i := range n {
		v, info, ok := s.Get(buf[:0], key(i))
		if !ok {
			continue
		}
		present++
		if !bytes.Equal(v, pattern(size, i)) || info.Flags != uint32(i) {
			t.Fatalf("item %d corrupted", i)
		}
		buf = v
	}
	if int64(present) != st.CurrItems || uint64(present)+st.Evictions != n {
		t.Fatalf("present %d curr %d evictions %d", present, st.CurrItems, st.Evictions)
	}
	// Most of the memory holds items: the compact header pays off. Item 0 has flags 0, so a 16-byte header
	// and a 128-byte chunk: its class holds one of the 7 pages; the 6 others hold 136-byte chunks (20-byte
	// header, 12-byte key, 100-byte value), 6*7710 = 46260. Below 45000 something wastes memory.
	if present < 45_000 {
		t.Fatalf("only %d items fit in 8 MiB", present)
	}
	t.Logf("%d of %d 100-byte items resident in 8 MiB, %d evicted", present, n, st.Evictions)

	// The workload switches to 10 KB values: their class has no page and the
	// budget is spent, so a page moves over from the small class.
	big := 10_000
	for i := range 2000 {
		if r := s.Store(ModeSet, key(n+i), 0, 0, pattern(big, i), 0); r != Stored {
			t.Fatalf("10 KB item %d: %v", i, r)
		}
	}
	st = s.Stats()
	if st.SlabsMoved == 0 || s.arena.PagesTaken() != 7 {
		t.Fatalf("slabs moved %d pages %d", st.SlabsMoved, s.arena.PagesTaken())
	}
	hits := 0
	for i := range 2000 {
		if v, _, ok := s.Get(nil, key(n+i)); ok {
			hits++
			if !bytes.Equal(v, pattern(big, i)) {
				t.Fatalf("10 KB item %d corrupted", i)
			}
		}
	}
	if hits == 0 {
		t.Fatal("no 10 KB item resident")
	}
}

// CLOCK gives recently read items a second chance.
func TestClockKeepsHotItems(t *testing.T) {
	s, _ := newStore(t, Config{MemoryLimit: 2 << 20})
	const hot = 100
	for i := range 60_000 {
		if i >= hot && i%1000 == 0 {
			for h := range hot {
				s.Get(nil, key(h))
			}
		}
		s.Store(ModeSet, key(i), 0, 0, pattern(100, i), 0)
	}
	kept := 0
	for h := range hot {
		if _, _, ok := s.Get(nil, key(h)); ok {
			kept++
		}
	}
	if kept < hot*9/10 {
		t.Fatalf("only %d of %d hot items survived", kept, hot)
	}
}

// Expired items are reclaimed before live ones are evicted.
func TestEvictionPrefersDeadItems(t *testing.T) {
	s, c := newStore(t, Config{MemoryLimit: 1 << 20})
	i := 0
	for ; i < s.classes.PerPage(0); i++ { // exactly fill the only page
		s.Store(ModeSet, key(i), 0, 1, []byte("v"), 0)
	}
	if st := s.Stats(); st.Evictions != 0 || st.CurrItems != int64(i) {
		t.Fatalf("filling: evictions %d items %d", st.Evictions, st.CurrItems)
	}
	c.advance(2)
	for j := range 1000 {
		s.Store(ModeSet, key(i+j), 0, 0, []byte("v"), 0)
	}
	st := s.Stats()
	if st.Evictions != 0 || st.Reclaimed != 1000 {
		t.Fatalf("evictions %d reclaimed %d", st.Evictions, st.Reclaimed)
	}
}

// A store that cannot get memory fails and, for set, drops the key's old
// value like memcached. An item in use by the operation (pinned) is never
// evicted or moved to make room.
func TestNoMemory(t *testing.T) {
	s, _ := newStore(t, Config{MemoryLimit: 1 << 20}) // a single page
	set(t, s, "k", "old")
	v := pattern(100_000, 1)
	// The 100 KB class has no page and the only page holds "k", which is
	// being replaced: nothing can move.
	if r := s.Store(ModeSet, []byte("k"), 0, 0, v, 0); r != NoMemory {
		t.Fatalf("set needing the pinned page: %v", r)
	}
	miss(t, s, "k")
	if r := s.Store(ModeSet, []byte("k"), 0, 0, v, 0); r != Stored {
		t.Fatalf("set once the page is free: %v", r)
	}
	if r := s.Store(ModeAppend, []byte("k"), 0, 0, v, 0); r != NotStored {
		t.Fatalf("append needing the pinned page: %v", r)
	}
	if got, _ := mustGet(t, s, "k"); got != string(v) {
		t.Fatal("value changed by a failed append")
	}
	if r := s.Store(ModeAdd, []byte("other"), 0, 0, v, 0); r != Stored {
		t.Fatalf("another item of the same class: %v", r)
	}
	oom := uint64(0)
	for _, cl := range s.Stats().Classes {
		oom += cl.OutOfMemory
	}
	if oom != 2 {
		t.Fatalf("out of memory counted %d times, want 2", oom)
	}
}

func TestShardCount(t *testing.T) {
	for _, tc := range []struct {
		limit  int64
		forced int
		want   int
	}{
		{8 << 20, 0, 1}, {64 << 20, 0, 1}, {128 << 20, 0, 2}, {1 << 30, 0, 16},
		{3 << 30, 0, 32}, {64 << 30, 0, 64}, {64 << 20, 8, 8}, {64 << 20, 3, 3},
	} {
		s, err := New(Config{MemoryLimit: tc.limit, Shards: tc.forced, ReclaimInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		if s.Shards() != tc.want {
			t.Errorf("limit %d forced %d: %d shards, want %d", tc.limit, tc.forced, s.Shards(), tc.want)
		}
		s.Close()
	}
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []Config{
		{MemoryLimit: 0},
		{MemoryLimit: 64 << 20, MaxItemSize: 100},
		{MemoryLimit: 64 << 20, MaxItemSize: 2 << 30},
		{MemoryLimit: 1 << 20, MaxItemSize: 2 << 20},
		{MemoryLimit: 64 << 20, Shards: MaxShards + 1},
		{MemoryLimit: 64 << 20, Shards: -1},
		{MemoryLimit: 4 << 20, Shards: 8},
	} {
		if s, err := New(cfg); err == nil {
			s.Close()
			t.Errorf("%+v accepted", cfg)
		}
	}
}

// A shard that fills up first cannot take the pages other shards need.
func TestShardSharesPreventStarvation(t *testing.T) {
	s, _ := newStore(t, Config{MemoryLimit: 16 << 20, Shards: 2, MaxItemSize: 2 << 20})
	// Find keys of each shard, then fill shard 0 far beyond its share.
	var k0, k1 [][]byte
	for i := 0; len(k0) < 200 || len(k1) < 1; i++ {
		k := key(i)
		if s.shardOf(Hash(k)) == &s.shards[0] {
			k0 = append(k0, k)
		} else {
			k1 = append(k1, k)
		}
	}
	v := pattern(500_000, 1)
	for _, k := range k0 {
		s.Store(ModeSet, k, 0, 0, v, 0)
	}
	if got := s.shards[0].al.OwnedPages(); got != 8 {
		t.Fatalf("shard 0 owns %d pages, want its share 8", got)
	}
	if r := s.Store(ModeSet, k1[0], 0, 0, []byte("fits"), 0); r != Stored {
		t.Fatalf("shard 1 starved: %v", r)
	}
}

// The hash tables are paid for out of the memory limit: as the index grows a shard owns fewer pages,
// evicting what they held, so pages plus tables never exceed the shard's share; every item still
// resident reads back byte-exact.
func TestIndexCountsAgainstLimit(t *testing.T) {
	const limit = 8 << 20
	s, _ := newStore(t, Config{MemoryLimit: limit, Shards: 2})
	arenaBytes, _ := splitMemory(limit)
	const n = 600_000 // tiny items: about 22k per page, so the index grows to about a page and a half
	for i := range n {
		if r := s.Store(ModeSet, key(i), 0, 0, []byte{byte(i)}, 0); r != Stored {
			t.Fatalf("item %d: %v", i, r)
		}
		if i%50_000 == 0 || i == n-1 {
			total := int64(0)
			for j := range s.shards {
				sh := &s.shards[j]
				used := int64(sh.al.OwnedPages())<<20 + sh.idx.bytes() + sh.ghosts.bytes()
				if used > sh.share {
					t.Fatalf("item %d shard %d: pages %d + tables %d bytes over its share %d", i, j,
						sh.al.OwnedPages(), sh.idx.bytes()+sh.ghosts.bytes(), sh.share)
				}
				total += used
			}
			if total > arenaBytes {
				t.Fatalf("item %d: %d bytes in use, arena budget %d", i, total, arenaBytes)
			}
		}
	}
	st := s.Stats()
	if st.HashBytes < 1<<20 || s.arena.PagesTaken() >= 7 {
		t.Fatalf("hash bytes %d, pages %d: the index did not cost pages", st.HashBytes, s.arena.PagesTaken())
	}
	present := 0
	for i := range n {
		if v, _, ok := s.Get(nil, key(i)); ok {
			if len(v) != 1 || v[0] != byte(i) {
				t.Fatalf("item %d corrupted", i)
			}
			present++
		}
	}
	if int64(present) != st.CurrItems || uint64(present)+st.Evictions != n {
		t.Fatalf("present %d curr %d evictions %d", present, st.CurrItems, st.Evictions)
	}
	t.Logf("%d of %d items resident, %d pages, %d bytes of hash tables", present, n, s.arena.PagesTaken(), st.HashBytes)
}

// After most items leave, the reclaimer rebuilds the index smaller and the shard may own more pages.
func TestIndexShrinks(t *testing.T) {
	s, clk := newStore(t, Config{MemoryLimit: 64 << 20, StaleWindow: -1})
	const n = 200_000
	for i := range n {
		s.Store(ModeSet, key(i), 0, 0, []byte("v"), 0)
	}
	sh := &s.shards[0]
	big, pages := sh.idx.n, sh.al.MaxPages()
	for i := range n - n/10 {
		s.Delete(key(i))
	}
	s.reclaimTick()
	clk.advance(1)
	if sh.idx.n >= big/2 || sh.al.MaxPages() <= pages {
		t.Fatalf("index %d slots (was %d), max pages %d (was %d)", sh.idx.n, big, sh.al.MaxPages(), pages)
	}
	for i := n - n/10; i < n; i++ {
		mustGet(t, s, string(key(i)))
	}
}
