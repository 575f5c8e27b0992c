package shard

import "testing"

func TestPassWait(t *testing.T) {
	cases := []struct {
		name string
		c    passCount
		prev int
		want int
	}{
		{name: "first pass finds nothing", c: passCount{checked: 1000}, prev: 0, want: 2},
		{name: "nothing dead doubles", c: passCount{checked: 1000}, prev: 4, want: 8},
		{name: "doubling stops at the bound", c: passCount{checked: 1000}, prev: maxReclaimWait, want: maxReclaimWait},
		{name: "just under 1% backs off", c: passCount{checked: 1000, reclaimed: 9}, prev: 2, want: 4},
		{name: "1% dead walks again at once", c: passCount{checked: 1000, reclaimed: 10}, prev: 32, want: 1},
		{name: "empty shard backs off too", c: passCount{}, prev: 1, want: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := passWait(tc.c, tc.prev); got != tc.want {
				t.Fatalf("passWait(%+v, %d) = %d, want %d", tc.c, tc.prev, got, tc.want)
			}
		})
	}
}

// The background loop walks a shard whose items live on less and less often, yet still frees an item that
// expires while it is backing off within maxReclaimWait ticks.
func TestBackgroundTickBacksOff(t *testing.T) {
	s, clk := newStore(t, Config{MemoryLimit: 8 << 20, Shards: 1})
	for i := range 1000 {
		s.Store(ModeSet, key(i), 0, 0, []byte("v"), 0)
	}
	sh := &s.shards[0]
	passes := func() uint64 { return sh.stats.crawlerStarts }
	for range 40 {
		s.tick(true)
	}
	// Waits 1 (first), 2, 4, 8, 16: passes at ticks 1, 3, 7, 15, 31.
	if got := passes(); got != 5 {
		t.Fatalf("%d passes in 40 ticks over live items, want 5", got)
	}
	s.Store(ModeSet, []byte("short"), 0, 1, []byte("v"), 0)
	clk.advance(2)
	for i := 0; i < maxReclaimWait+1 && s.Stats().CurrItems > 1000; i++ {
		s.tick(true)
	}
	if n := s.Stats().CurrItems; n != 1000 {
		t.Fatalf("expired item not reclaimed within %d ticks: %d items", maxReclaimWait+1, n)
	}
	// Explicit passes (lru_crawler crawl, tests) ignore the back-off.
	before := passes()
	s.reclaimTick()
	if passes() != before+1 {
		t.Fatal("reclaimTick did not run a pass")
	}
}
