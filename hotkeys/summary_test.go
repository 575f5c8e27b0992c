package hotkeys

import (
	"fmt"
	"math"
	"math/rand"
	"sort"
	"testing"
	"time"
	"unsafe"

	"github.com/cespare/xxhash/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// zipfLoad is the accuracy workload of doc/design/hotkeys.md: Zipf (s = 1.01) over 100k keys, plus one key
// forced to 5% of the requests, about one in ten a write; deterministic for a seed.
type zipfLoad struct {
	rng   *rand.Rand
	zipf  *rand.Zipf
	keys  [][]byte
	hs    []uint64
	exact map[int]uint64 // key index -> requests so far
}

const (
	zipfKeys   = 100_000
	zipfS      = 1.01
	forcedKey  = zipfKeys // the index of the forced key
	forcedProb = 0.05
)

func newZipfLoad(seed int64) *zipfLoad {
	rng := rand.New(rand.NewSource(seed))
	z := &zipfLoad{rng: rng, zipf: rand.NewZipf(rng, zipfS, 1, zipfKeys-1), exact: map[int]uint64{}}
	for i := range zipfKeys + 1 {
		k := []byte(fmt.Sprintf("user:%d:profile", i))
		if i == forcedKey {
			k = []byte("forced:hot")
		}
		z.keys = append(z.keys, k)
		z.hs = append(z.hs, xxhash.Sum64(k))
	}
	return z
}

// next draws a request: its key's index and whether it is a write.
func (z *zipfLoad) next() (int, bool) {
	i := int(z.zipf.Uint64())
	if z.rng.Float64() < forcedProb {
		i = forcedKey
	}
	z.exact[i]++
	return i, z.rng.Intn(10) == 0
}

// trueTop is the n keys with the most requests, most first.
func (z *zipfLoad) trueTop(n int) []string {
	idx := make([]int, 0, len(z.exact))
	for i := range z.exact {
		idx = append(idx, i)
	}
	sort.Slice(idx, func(a, b int) bool {
		if z.exact[idx[a]] != z.exact[idx[b]] {
			return z.exact[idx[a]] > z.exact[idx[b]]
		}
		return idx[a] < idx[b]
	})
	out := make([]string, 0, n)
	for _, i := range idx[:n] {
		out = append(out, string(z.keys[i]))
	}
	return out
}

func (z *zipfLoad) count(key string) uint64 {
	for i, k := range z.keys {
		if string(k) == key {
			return z.exact[i]
		}
	}
	return 0
}

// recall is how many of want are among got.
func recall(want []string, got []string) int {
	in := map[string]bool{}
	for _, k := range got {
		in[k] = true
	}
	n := 0
	for _, k := range want {
		if in[k] {
			n++
		}
	}
	return n
}

func TestEntrySize(t *testing.T) {
	require.Equal(t, uintptr(entrySize), unsafe.Sizeof(entry{}))
	// The sizes doc/design/hotkeys.md states: a 128-entry summary, and a tracker (two of them).
	assert.Equal(t, 128*(24+250+2)+2*256, Bytes(128))
	assert.Equal(t, 71_680, NewTracker(128, time.Second).Bytes())
}

// TestSummaryGuarantees checks Space-Saving's guarantees, which hold for any stream: every count is at
// least the true count and at most Err above it, Err is at most Total/m, and every key counted more than
// Total/m times is monitored.
func TestSummaryGuarantees(t *testing.T) {
	for _, capacity := range []int{1, 7, 128, 256} {
		t.Run(fmt.Sprint(capacity), func(t *testing.T) {
			z := newZipfLoad(int64(capacity))
			s := NewSummary(capacity)
			const n = 300_000
			for range n {
				i, w := z.next()
				s.Offer(z.keys[i], z.hs[i], w)
			}
			require.Equal(t, uint64(n), s.Total())
			bound := uint64(n / capacity)
			monitored := map[string]bool{}
			var sum uint64
			for _, c := range s.AppendCounts(nil) {
				truth := z.count(c.Key)
				monitored[c.Key] = true
				sum += c.Count
				assert.GreaterOrEqual(t, c.Count, truth, c.Key)
				assert.LessOrEqual(t, c.Count-c.Err, truth, c.Key)
				assert.LessOrEqual(t, c.Err, bound, c.Key)
				assert.LessOrEqual(t, c.Reads, c.Count-c.Err, c.Key)
			}
			assert.Equal(t, uint64(n), sum, "the counts add up to the total")
			for i, cnt := range z.exact {
				if cnt > bound {
					assert.True(t, monitored[string(z.keys[i])], "%s counted %d > %d times is monitored", z.keys[i], cnt, bound)
				}
			}
			s.checkIndex(t)
		})
	}
}

// checkIndex verifies that every entry is found through the index, and the index holds nothing else.
func (s *Summary) checkIndex(t *testing.T) {
	t.Helper()
	used := 0
	for _, v := range s.index {
		if v != 0 {
			used++
		}
	}
	require.Equal(t, s.n, used)
	for e := range s.n {
		_, got := s.find(s.key(e), s.ents[e].hash)
		require.Equal(t, e, got)
		require.Equal(t, uint16(e), s.heap[s.ents[e].pos])
	}
	for p := 1; p < s.n; p++ {
		require.False(t, s.less(p, (p-1)/2), "heap order at %d", p)
	}
}

// TestSummaryCollidingHashes drives the index's deletion with keys that share a few home slots.
func TestSummaryCollidingHashes(t *testing.T) {
	s := NewSummary(16)
	rng := rand.New(rand.NewSource(3))
	for i := range 20_000 {
		k := rng.Intn(200)
		// Hashes 0..3 modulo the table: long probe runs that wrap around its end.
		h := uint64(k%4)*uint64(len(s.index)/4) + uint64(len(s.index)-2) + uint64(k)<<32
		s.Offer([]byte(fmt.Sprint("k", k)), h, false)
		if i%97 == 0 {
			s.checkIndex(t)
		}
	}
	s.checkIndex(t)
}

// TestSummaryZipfAccuracy is the accuracy of doc/design/hotkeys.md on the unsampled stream, which the
// sampled one approaches (TestTrackerZipfAccuracy): recall of the true top 10 and top 20 in the reported
// top 20, and the relative error of the top 10's counts.
func TestSummaryZipfAccuracy(t *testing.T) {
	for _, capacity := range []int{128, 256} {
		z := newZipfLoad(1)
		s := NewSummary(capacity)
		const n = 1_000_000
		for range n {
			i, w := z.next()
			s.Offer(z.keys[i], z.hs[i], w)
		}
		top := s.Top(20)
		got := make([]string, len(top))
		worst := 0.0
		for i, c := range top {
			got[i] = c.Key
			if i < 10 {
				truth := float64(z.count(c.Key))
				worst = math.Max(worst, math.Abs(float64(c.Count)-truth)/truth)
			}
		}
		r10, r20 := recall(z.trueTop(10), got), recall(z.trueTop(20), got)
		t.Logf("m=%d: top-10 recall %d/10, top-20 recall %d/20, worst relative error of the top 10 %.4f%%, min count %d (bound %d)",
			capacity, r10, r20, 100*worst, s.ents[s.heap[0]].count, n/capacity)
		assert.Equal(t, z.trueTop(2), got[:2], "Zipf's first key (~8%), then the forced one (5%)")
		assert.Equal(t, 10, r10)
		assert.GreaterOrEqual(t, r20, 18)
		// The guarantee: an error of at most n/m, relative to the 10th key's ~0.8% of n.
		assert.Less(t, worst, float64(n/capacity)/(0.008*n))
	}
}
