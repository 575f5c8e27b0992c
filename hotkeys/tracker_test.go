package hotkeys

import (
	"fmt"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sec is a second of the trackers' clock.
const sec = int64(time.Second)

// loadLoops replays the Zipf load as loops event loops (each its own sampler of one in rate and tracker)
// serving perSec requests a second between from and to (nanoseconds), requests dealt to loops in turn,
// and returns the trackers and the exact counts of the requests at or after spanFrom.
func loadLoops(z *zipfLoad, loops, capacity, rate, perSec int, from, to, spanFrom int64) ([]*Tracker, map[string]float64) {
	ts := make([]*Tracker, loops)
	ss := make([]Sampler, loops)
	for l := range loops {
		ts[l] = NewTracker(capacity, time.Second)
		ss[l] = NewSampler(rate, uint64(l+1))
	}
	exact := map[string]float64{}
	step := sec / int64(perSec)
	l := 0
	for now := from; now < to; now += step {
		i, w := z.next()
		if now >= spanFrom {
			exact[string(z.keys[i])]++
		}
		if ss[l].Due(1) {
			for j := ss[l].Next(1); j >= 0; j = ss[l].Next(1) {
				ts[l].Offer(now, z.keys[i], z.hs[i], w, ss[l].Taken(now))
			}
		}
		l = (l + 1) % loops
	}
	return ts, exact
}

// TestTrackerZipfAccuracy is the accuracy doc/design/hotkeys.md states for the sampled summaries as the
// server runs them: 2 loops, one request in 16 sampled, 128 entries each, 100k requests a second; read
// 1.5 s into the load (the span: the previous window and half of the current one).
func TestTrackerZipfAccuracy(t *testing.T) {
	cases := []struct{ capacity, rate, perSec int }{
		{capacity: 128, rate: 16, perSec: 100_000},
		{capacity: 256, rate: 16, perSec: 100_000},
		{capacity: 128, rate: 16, perSec: 400_000},
		{capacity: 128, rate: 8, perSec: 100_000},
		{capacity: 128, rate: 16, perSec: 20_000},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("m=%d,R=%d,%d/s", tc.capacity, tc.rate, tc.perSec), func(t *testing.T) {
			z := newZipfLoad(7)
			now := 10*sec + sec/2
			ts, exact := loadLoops(z, 2, tc.capacity, tc.rate, tc.perSec, 8*sec, now, 9*sec)
			top, _ := Top(ts, now, 20)
			require.Len(t, top, 20)
			span := 1.5
			got := make([]string, len(top))
			worst, worst5 := 0.0, 0.0
			for i, k := range top {
				got[i] = k.Key
				truth := exact[k.Key] / span
				e := math.Abs(k.Rate-truth) / truth
				if i < 10 {
					worst = math.Max(worst, e)
					// A rate is a count of samples: a key with an expected x samples is off by about
					// 1/sqrt(x) (Poisson); four of that is the bound.
					x := exact[k.Key] / float64(tc.rate)
					assert.Less(t, e, 4/math.Sqrt(x), "rate of %s: %.0f/s, truly %.0f/s", k.Key, k.Rate, truth)
				}
				if k.Key == "forced:hot" {
					worst5 = e
					assert.InEpsilon(t, 5, k.Share, 4/math.Sqrt(exact[k.Key]/float64(tc.rate)), "share of the forced key")
					assert.InDelta(t, 0.9, k.Reads/k.Rate, 0.03, "reads of the forced key")
					assert.InDelta(t, k.Rate, k.Reads+k.Writes, 1e-6)
				}
			}
			var want []string
			for _, k := range topOf(exact, 20) {
				want = append(want, k)
			}
			r10, r20 := recall(want[:10], got), recall(want, got)
			t.Logf("top-10 recall %d/10, top-20 recall %d/20, worst relative rate error of the top 10 %.1f%%, of the 5%% key %.1f%%",
				r10, r20, 100*worst, 100*worst5)
			assert.Equal(t, 10, r10)
			assert.GreaterOrEqual(t, r20, 15)
			assert.Contains(t, got[:3], "forced:hot")
		})
	}
}

// topOf is the n keys of counts with the largest counts.
func topOf(counts map[string]float64, n int) []string {
	cs := make([]Count, 0, len(counts))
	for k, c := range counts {
		cs = append(cs, Count{Key: k, Count: uint64(c)})
	}
	sortCounts(cs)
	out := make([]string, 0, n)
	for _, c := range cs[:n] {
		out = append(out, c.Key)
	}
	return out
}

// TestTrackerWindows: a key taking 1% of the requests is listed first at the first read, half a second
// into the load; after the load stops it is listed until the end of the window after the last request,
// and not after (at most two windows); an idle tracker lists nothing.
func TestTrackerWindows(t *testing.T) {
	tr := NewTracker(128, time.Second)
	assert.Empty(t, top1(Top([]*Tracker{tr}, 5*sec, 20)), "idle")
	const perSec = 50_000
	smp := NewSampler(16, 1)
	warm, warmH := []byte("warm"), xxhash.Sum64String("warm")
	var cold [16]byte
	run := func(from, to int64) {
		for now, n := from, 0; now < to; now, n = now+sec/perSec, n+1 {
			if !smp.Due(1) {
				continue
			}
			for smp.Next(1) >= 0 {
				if n%100 == 0 {
					tr.Offer(now, warm, warmH, false, smp.Taken(now))
					continue
				}
				k := fmt.Appendf(cold[:0], "cold:%d", n)
				tr.Offer(now, k, xxhash.Sum64(k), true, smp.Taken(now))
			}
		}
	}
	run(10*sec, 10*sec+sec/2)
	top := top1(Top([]*Tracker{tr}, 10*sec+sec/2, 20))
	require.NotEmpty(t, top)
	assert.Equal(t, "warm", top[0].Key)
	assert.InDelta(t, 500*0.5/1.5, top[0].Rate, 100, "the span counts the window before the load as idle")
	assert.InDelta(t, 1, top[0].Share, 0.5)
	assert.Equal(t, top[0].Rate, top[0].Reads)

	run(10*sec+sec/2, 12*sec+sec/4) // the last request in window 12
	for _, now := range []int64{12*sec + sec/4, 13*sec + sec/2, 13*sec + sec - 1} {
		top = top1(Top([]*Tracker{tr}, now, 20))
		require.NotEmpty(t, top, now)
		assert.Equal(t, "warm", top[0].Key, now)
	}
	// At 13.5 s the span is window 12 (a quarter second of 500 requests a second) and the idle half of 13.
	top = top1(Top([]*Tracker{tr}, 13*sec+sec/2, 20))
	assert.InDelta(t, 500*0.25/1.5, top[0].Rate, 60, "window 11 (500/s) is not in the span")
	assert.Empty(t, top1(Top([]*Tracker{tr}, 14*sec, 20)), "gone two windows after the last")
	assert.Empty(t, top1(Top([]*Tracker{tr}, 100*sec, 20)))
	// A request after a long pause starts afresh: nothing of the old windows is counted.
	tr.Offer(100*sec, warm, warmH, true, 16)
	top = top1(Top([]*Tracker{tr}, 100*sec+sec/2, 20))
	require.Len(t, top, 1)
	assert.InDelta(t, 16/1.5, top[0].Rate, 1e-9)
	assert.InDelta(t, 100, top[0].Share, 1e-9)
	assert.Equal(t, top[0].Rate, top[0].Writes)
}

// TestSampler: the gaps average the rate, Next finds the sampled ones among several requests, and an off
// sampler samples nothing.
func TestSampler(t *testing.T) {
	for _, rate := range []int{1, 2, 16} {
		s := NewSampler(rate, 9)
		sampled, n := 0, 200_000
		for i := 0; i < n; i += 10 {
			if s.Due(10) {
				prev := -1
				for j := s.Next(10); j >= 0; j = s.Next(10) {
					require.Greater(t, j, prev)
					require.Less(t, j, 10)
					prev = j
					sampled++
				}
			}
		}
		assert.InDelta(t, float64(n/rate), float64(sampled), 0.02*float64(n/rate), "rate %d", rate)
	}
	// A client cycling through 16 keys has each of them sampled, about equally.
	s := NewSampler(16, 9)
	var per [16]int
	for i := range 160_000 {
		if s.Due(1) && s.Next(1) == 0 {
			per[i%16]++
		}
	}
	for k, c := range per {
		assert.InDelta(t, 10_000/16, c, 200, "key %d of the cycle", k)
	}
	off := NewSampler(0, 9)
	for range 1000 {
		require.False(t, off.Due(1<<20))
	}
	assert.Equal(t, -1, off.Next(1))
}

// TestNoAllocations: counting a key allocates nothing once the summaries exist (the request path).
func TestNoAllocations(t *testing.T) {
	z := newZipfLoad(5)
	tr := NewTracker(128, time.Second)
	smp := NewSampler(1, 1) // every request: AllocsPerRun divides whole allocations by the runs
	now := int64(0)
	step := func() {
		i, w := z.next()
		now += sec / 100_000
		if smp.Due(1) {
			for smp.Next(1) >= 0 {
				tr.Offer(now, z.keys[i], z.hs[i], w, smp.Taken(now))
			}
		}
	}
	for range 10_000 {
		step()
	}
	assert.Zero(t, testing.AllocsPerRun(200_000, step)) // 2 s: the windows rotate
}

// BenchmarkOffer is the cost of one sampled request (the Zipf load; the tracker's lock included); ns/op
// divided by the sampling rate is its share of every request.
func BenchmarkOffer(b *testing.B) {
	z := newZipfLoad(11)
	const n = 1 << 16
	idx, writes := make([]int, n), make([]bool, n)
	for i := range n {
		idx[i], writes[i] = z.next()
	}
	tr := NewTracker(128, time.Second)
	i := 0
	for b.Loop() {
		k := idx[i%n]
		tr.Offer(int64(i)*1000, z.keys[k], z.hs[k], writes[i%n], 1)
		i++
	}
}

// BenchmarkDue is the per-request cost: the sampler's countdown.
func BenchmarkDue(b *testing.B) {
	s := NewSampler(16, 1)
	n := 0
	for b.Loop() {
		if s.Due(1) {
			for s.Next(1) >= 0 {
				n++
			}
		}
	}
	if n == 0 && b.N > 1000 {
		b.Fatal("nothing sampled")
	}
}

// top1 is Top's keys.
func top1(keys []HotKey, _ int) []HotKey { return keys }

// TestAdaptiveSampler: an adaptive sampler keeps its samples near its target a second at any traffic
// (every request when there are fewer), a burst from the starting rate costs a bounded number of extra
// samples, and the weighted counts still estimate a key's rate.
func TestAdaptiveSampler(t *testing.T) {
	const target = 4096
	cases := []struct {
		perSec        int
		minPS, maxPS  int // samples a second, seconds 2 to 4
		firstSecondPS int // at most, second 0
	}{
		{perSec: 1_000, minPS: 1_000, maxPS: 1_000, firstSecondPS: 1_000},
		{perSec: 100_000, minPS: target / 4, maxPS: 3 * target / 2, firstSecondPS: 2 * target},
		{perSec: 2_000_000, minPS: target / 4, maxPS: 3 * target / 2, firstSecondPS: 5 * target},
	}
	for _, tc := range cases {
		t.Run(strconv.Itoa(tc.perSec), func(t *testing.T) {
			s := NewAdaptiveSampler(16, target, 3)
			tr := NewTracker(128, time.Second)
			hot, hotH := []byte("hot"), xxhash.Sum64String("hot")
			cold := []byte("cold:000000")
			var perSecond [4]int
			step := sec / int64(tc.perSec)
			n := 0
			for now := 10 * sec; now < 14*sec; now += step {
				n++
				if !s.Due(1) {
					continue
				}
				for s.Next(1) >= 0 {
					perSecond[now/sec-10]++
					key, h := hot, hotH
					if n%20 != 0 { // the hot key is 5% of the requests
						copy(cold[5:], fmt.Sprintf("%06d", n%100_000))
						key, h = cold, xxhash.Sum64(cold)
					}
					tr.Offer(now, key, h, false, s.Taken(now))
				}
			}
			assert.LessOrEqual(t, perSecond[0], tc.firstSecondPS, "second 0: %v", perSecond)
			for _, ps := range perSecond[2:] {
				assert.GreaterOrEqual(t, ps, tc.minPS, "%v", perSecond)
				assert.LessOrEqual(t, ps, tc.maxPS, "%v", perSecond)
			}
			top, rate := Top([]*Tracker{tr}, 14*sec-1, 1)
			require.Len(t, top, 1)
			assert.Equal(t, "hot", top[0].Key)
			x := float64(perSecond[2]+perSecond[3]) / 20 // the hot key's samples in the span
			truth := float64(tc.perSec) / 20
			assert.InDelta(t, truth, top[0].Rate, truth*(4/math.Sqrt(x)+0.01), "rate %d", rate)
			assert.InDelta(t, 5, top[0].Share, 5*(4/math.Sqrt(x)+0.01))
		})
	}
}
