package shard

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

// A store on huge pages, from the start (-L) or collapsed by the reclaimer, behaves as one on ordinary
// pages: values of every size (chained ones included) read back intact, a full store evicts, and lowering
// the limit gives pages back (single pages out of huge-page regions).
func TestLargePagesStore(t *testing.T) {
	for _, large := range []bool{true, false} {
		t.Run(fmt.Sprint("LargePages=", large), func(t *testing.T) { testLargePagesStore(t, large) })
	}
}

func testLargePagesStore(t *testing.T, large bool) {
	s, _ := newStore(t, Config{MemoryLimit: 16 << 20, LargePages: large})
	if s.arena.LargePages() != large {
		t.Fatal("Config.LargePages did not reach the arena")
	}
	value := func(i int) []byte {
		size := []int{10, 100, 3000, 200_000, 900_000}[i%5]
		return bytes.Repeat([]byte{byte('a' + i%26)}, size)
	}
	const n = 400 // about 45 MB of values into a 16 MB store
	for i := range n {
		if r := s.Store(ModeSet, []byte(fmt.Sprint("key", i)), uint32(i), 0, value(i), 0); r != Stored {
			t.Fatalf("set %d: %v", i, r)
		}
	}
	if s.Stats().Evictions == 0 {
		t.Error("no evictions after writing three times the limit")
	}
	check := func() (hits int) {
		for i := range n {
			v, info, ok := s.Get(nil, []byte(fmt.Sprint("key", i)))
			if !ok {
				continue
			}
			hits++
			if !bytes.Equal(v, value(i)) || info.Flags != uint32(i) {
				t.Fatalf("key%d: %d bytes, flags %d: not what was stored", i, len(v), info.Flags)
			}
		}
		return hits
	}
	if check() == 0 {
		t.Fatal("nothing readable")
	}
	s.reclaimTick()
	if huge := s.arena.HugeRegions(); s.arena.Collapsing() && huge == 0 {
		t.Error("the reclaimer collapsed no region of a full store")
	} else {
		t.Logf("%d regions collapsed", huge)
	}
	if got, want := s.Stats().HugePageBytes, int64(s.arena.HugeRegions())<<21; got != want {
		t.Errorf("Stats().HugePageBytes %d, want %d", got, want)
	}
	check()
	if err := s.SetMemoryLimit(8 << 20); err != nil {
		t.Fatal(err)
	}
	for i := range n { // the reclaimer gives the excess pages back over its ticks, writes go on meanwhile
		s.Store(ModeSet, []byte(fmt.Sprint("key", i)), uint32(i), 0, value(i), 0)
		s.reclaimTick()
	}
	check()
	if taken, limit := s.arena.PagesTaken(), s.arena.MaxPages(); taken > limit {
		t.Errorf("%d pages still taken under a limit of %d", taken, limit)
	}
}

// The background reclaimer moves one region onto a huge page per Collapse call, and while regions wait it
// makes further calls between its ticks instead of waiting a whole tick for each: with a 2 s tick, a
// second region is huge well before the tick after the one that collapsed the first.
func TestReclaimerSpreadsCollapses(t *testing.T) {
	s, _ := newStore(t, Config{MemoryLimit: 16 << 20, ReclaimInterval: 2 * time.Second})
	v := bytes.Repeat([]byte{'x'}, 3000)
	for i := 0; s.arena.PagesTaken() < 10; i++ { // five regions of two pages, four of them full
		if r := s.Store(ModeSet, []byte(fmt.Sprint("key", i)), 0, 0, v, 0); r != Stored {
			t.Fatalf("set %d: %v", i, r)
		}
	}
	waitHuge := func(n int, within time.Duration) int {
		for deadline := time.Now().Add(within); s.arena.HugeRegions() < n && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		return s.arena.HugeRegions()
	}
	if !s.arena.Collapsing() || waitHuge(1, 5*time.Second) == 0 {
		t.Skip("the kernel collapsed nothing: no MADV_COLLAPSE, or no huge page free")
	}
	// Timed from the first collapse, so that a late tick on a loaded machine does not count.
	switch got := waitHuge(2, 1500*time.Millisecond); got {
	case 1:
		t.Error("1 region huge 1.5 s after the first: only the tick's own Collapse call ran")
	default:
		t.Logf("%d regions huge 1.5 s after the first", got)
	}
}
