package shard

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// Memory follows the workload: 100-byte values fill the cache, then the workload switches to a working
// set of 10 KB values about half the size of memory. Each round (one second of the store's clock) reads
// every key of the working set and stores the misses. The 10 KB class starts with the one page movePage
// gives it; the rebalancer moves pages over from the idle 100-byte class until the hit ratio recovers.
// In the second case the 100-byte items were read twice before the switch (fetched, active, CLOCK bits
// set, times that bump no longer moves): idle since, they still give their pages up.
func TestPagesFollowWorkload(t *testing.T) {
	t.Run("small items never read", func(t *testing.T) { testPagesFollowWorkload(t, false) })
	t.Run("small items read before the switch", func(t *testing.T) { testPagesFollowWorkload(t, true) })
}

func testPagesFollowWorkload(t *testing.T, readSmall bool) {
	const (
		limit     = 16 << 20
		small     = 100
		big       = 10_000
		workingMB = 7
		rounds    = 12
	)
	s, clk := newStore(t, Config{MemoryLimit: limit, Shards: 1})
	nSmall := 2 * limit / small // far more than fit
	for i := range nSmall {
		if r := s.Store(ModeSet, key(i), 1, 0, pattern(small, i), 0); r != Stored {
			t.Fatalf("small item %d: %v", i, r)
		}
	}
	if readSmall {
		rbuf := make([]byte, 0, small)
		for range 2 {
			for i := range nSmall {
				s.Get(rbuf[:0], key(i))
			}
		}
	}
	bigID, _ := s.classes.For(headerLen(layoutOf(1, 0, big), false) + len(key(0)) + big)
	clk.advance(1)

	working := workingMB << 20 / big
	var ratios []float64
	buf := make([]byte, 0, big)
	for round := range rounds {
		hits := 0
		for i := range working {
			k := key(nSmall + i)
			v, _, ok := s.Get(buf[:0], k)
			if ok {
				if !bytes.Equal(v, pattern(big, i)) {
					t.Fatalf("round %d: 10 KB item %d corrupted", round, i)
				}
				hits++
				continue
			}
			if r := s.Store(ModeSet, k, 1, 0, pattern(big, i), 0); r != Stored {
				t.Fatalf("round %d: 10 KB item %d: %v", round, i, r)
			}
		}
		ratios = append(ratios, float64(hits)/float64(working))
		clk.advance(1)
	}
	pages := s.Stats().Classes[bigID].TotalPages
	t.Logf("10 KB class: %d pages; hit ratio per round: %.2f", pages, ratios)
	if last := ratios[len(ratios)-1]; last < 0.9 {
		t.Fatalf("hit ratio %.2f after %d rounds, want >= 0.9 (per round: %.2f)", last, rounds, ratios)
	}
	recovered := -1
	for i, r := range ratios {
		if r >= 0.9 {
			recovered = i
			break
		}
	}
	if recovered < 0 || recovered > 8 {
		t.Fatalf("hit ratio reached 0.9 only at round %d: %.2f", recovered, ratios)
	}
	if need := working * big >> 20; pages < need {
		t.Fatalf("10 KB class has %d pages, its working set needs %d", pages, need)
	}
	// The small items still resident read back exactly.
	present := 0
	for i := range nSmall {
		if v, info, ok := s.Get(buf[:0], key(i)); ok {
			if !bytes.Equal(v, pattern(small, i)) || info.Flags != 1 {
				t.Fatal(fmt.Sprintf("small item %d corrupted", i))
			}
			present++
		}
	}
	if present == 0 {
		t.Fatal("the rebalancer emptied the small class")
	}
}

// A class whose items are all read every second keeps its pages while another class churns through
// evictions: its next victim is not old, whenever its items were stored (rebalance.go, handAge).
func TestReadClassKeepsPages(t *testing.T) {
	const (
		limit = 16 << 20
		small = 100
		read  = 1000
		nRead = 3000 // about 3 MB of 1 KB items, read every round
		churn = 40_000
	)
	s, clk := newStore(t, Config{MemoryLimit: limit, Shards: 1})
	buf := make([]byte, 0, read)
	readAll := func() (hits int) {
		for i := range nRead {
			if v, _, ok := s.Get(buf[:0], key(i)); ok {
				require.Equal(t, pattern(read, i), v, "1 KB item %d", i)
				hits++
			}
		}
		return hits
	}
	for i := range nRead {
		require.Equal(t, Stored, s.Store(ModeSet, key(i), 0, 0, pattern(read, i), 0))
	}
	readAll()
	readAll() // fetched and active
	next := nRead
	for round := range 30 {
		clk.advance(1)
		hits := readAll()
		require.Equal(t, nRead, hits, "round %d: read items evicted while a class of unread items churned", round)
		for range churn {
			require.Equal(t, Stored, s.Store(ModeSet, key(next), 0, 0, pattern(small, next), 0))
			next++
		}
	}
}
