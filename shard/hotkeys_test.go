package shard

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Eviction keeps what is hot (issue 23): a dozen keys of a mid-size class, read several times a second,
// are never evicted while their class is filled past the limit with cold items and a flood of tiny sets
// into other size classes then takes pages from it. Each case drives one way a page leaves the class:
// movePage (a class with no page takes one from the class with the most), the rebalancer (pages move to
// the class evicting the youngest items), and a lowered memory limit (releasePage). Before page moves
// drained their pages (drain.go), every one of these cases lost hot keys.
func TestHotKeysSurvivePageMoves(t *testing.T) {
	cases := []struct {
		name string
		// hotFirst stores the hot keys before the fillers (they share the class's first page), else
		// one every fillers/hotKeys fillers (one or two per page, across the class).
		hotFirst    bool
		flood       int   // tiny sets
		setsPerSec  int   // of the flood, on the store's clock: sets the ages the rebalancer compares
		readsPerSec int   // of each hot key
		lowerTo     int64 // when > 0, the memory limit drops to this before the flood
	}{
		{name: "first page taken by a class with none", hotFirst: true, flood: 150_000, setsPerSec: 5_000, readsPerSec: 10},
		{name: "pages taken by the rebalancer", flood: 300_000, setsPerSec: 2_000, readsPerSec: 10},
		{name: "pages taken by the rebalancer, 3 reads a second", flood: 300_000, setsPerSec: 2_000, readsPerSec: 3},
		{name: "pages given back when the limit drops", flood: 150_000, setsPerSec: 5_000, readsPerSec: 10, lowerTo: 10 << 20},
	}
	const (
		limit     = 16 << 20
		hotKeys   = 12
		hotLen    = 3000 // a 2-4 KB class
		fillers   = 7000 // ~21 MB of cold items of that class: past the limit
		tinyMax   = 60   // tiny values are 1..tinyMax bytes: six classes of 48 to 88 bytes
		fillEvery = 100  // fillers between two reads of the hot keys while the class fills
	)
	hot := func(i int) []byte { return []byte(fmt.Sprintf("hot:%02d", i)) }
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, clk := newStore(t, Config{MemoryLimit: limit, Shards: 1})
			missed := map[int]string{} // hot key -> when it was first missed
			stored := 0                // hot keys stored so far
			readHot := func(when string) {
				for i := range stored {
					v, _, ok := s.Get(nil, hot(i))
					if !ok {
						if _, seen := missed[i]; !seen {
							missed[i] = when
						}
						continue
					}
					require.True(t, bytes.Equal(v, pattern(hotLen, i)), "hot key %d read back wrong (%s)", i, when)
				}
			}
			storeHot := func(i int) {
				require.Equal(t, Stored, s.Store(ModeSet, hot(i), 0, 0, pattern(hotLen, i), 0))
				stored++
			}
			for i := range fillers {
				if tc.hotFirst && i == 0 {
					for j := range hotKeys {
						storeHot(j)
					}
				}
				if !tc.hotFirst && i%(fillers/hotKeys) == 0 && i/(fillers/hotKeys) < hotKeys {
					storeHot(i / (fillers / hotKeys))
				}
				require.Equal(t, Stored, s.Store(ModeSet, []byte(fmt.Sprintf("fill:%d", i)), 0, 0, pattern(hotLen, -i), 0))
				if i%fillEvery == 0 {
					readHot(fmt.Sprintf("fill %d", i))
				}
			}
			filled := s.Stats().Evictions
			require.Positive(t, filled, "the fillers must overfill their class")
			clk.advance(1)
			if tc.lowerTo > 0 {
				require.NoError(t, s.SetMemoryLimit(tc.lowerTo))
				for range 4 {
					s.reclaimTick()
					readHot("limit lowered")
				}
				require.LessOrEqual(t, int64(s.arena.PagesTaken()), tc.lowerTo>>20, "pages were not given back")
			}

			readEvery := tc.setsPerSec / tc.readsPerSec
			for n := range tc.flood {
				if n%readEvery == 0 {
					readHot(fmt.Sprintf("flood set %d", n))
				}
				if n%tc.setsPerSec == 0 {
					clk.advance(1)
				}
				require.Equal(t, Stored, s.Store(ModeSet, []byte(fmt.Sprintf("t:%d", n)), 0, 0, pattern(1+n%tinyMax, n), 0))
			}
			readHot("after the flood")
			require.Equal(t, hotKeys, stored)

			st := s.Stats()
			rebalanced := uint64(0)
			for _, c := range s.shards[0].cls {
				rebalanced += c.pagesGained
			}
			t.Logf("evictions %d, pages moved %d (%d by the rebalancer), items rescued %d; hot keys missed: %v",
				st.Evictions, st.SlabsMoved, rebalanced, st.SlabRescues, missed)
			assert.Empty(t, missed, "hot keys evicted (key -> first miss)")
			assert.Greater(t, st.Evictions-filled, uint64(tc.flood/4), "the flood must evict, or it tests nothing")
			assert.Positive(t, st.SlabsMoved, "the flood must move pages, or it tests nothing")
			if !tc.hotFirst && tc.lowerTo == 0 {
				assert.Positive(t, rebalanced, "the rebalancer must move pages, or this case tests nothing")
			}
			if tc.name != cases[0].name { // movePage takes the page under the hand, past the hot keys by now
				assert.Positive(t, st.SlabRescues, "no page move met a hot key: the case tests nothing")
			}
			checkIndexInvariants(t, &s.shards[0])
		})
	}
}
