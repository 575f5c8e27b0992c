package metrics

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasecached/leasecached/protocol"
)

// SampleEvery is how many requests an event loop executes per timed one, on average. A timed request
// costs two clock reads and a bucket update, about as much as serving a pipelined request: timing one in
// SampleEvery keeps that to a small fraction of a request, and a busy loop still times thousands a second.
// The measurements are in doc/design/metrics.md.
const SampleEvery = 64

// bucketBounds are the histogram's upper bounds in nanoseconds: a hit in the store is a few hundred,
// a large multi-key fetch reaches milliseconds.
var bucketBounds = [...]int64{
	250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000,
	500_000, 1_000_000, 2_500_000, 10_000_000, 100_000_000,
}

// maxCommands bounds protocol.Command values the histograms are kept for (TestCommandsFit).
const maxCommands = 64

// histogram is one command's timings on one loop: counts per bucket (the last one past every bound) and
// the sum in nanoseconds. Only its loop writes it; the scrape reads it, hence the atomics.
type histogram struct {
	counts [len(bucketBounds) + 1]atomic.Uint64
	sumNs  atomic.Uint64
}

// LoopLatency is one event loop's request timings. Sample and Observe are called from its loop only (or
// from one serve call at a time); the scrape merges every loop's (Latencies).
type LoopLatency struct {
	gap   int    // requests until the next timed one; its loop's alone
	rng   uint64 // xorshift state for the gaps
	hists [maxCommands]histogram
}

// NewLoopLatency returns a loop's timings; seed varies the loops' sampling gaps.
func NewLoopLatency(seed uint64) *LoopLatency {
	l := &LoopLatency{rng: seed | 1}
	l.gap = l.nextGap()
	return l
}

// Sample reports whether the request about to be executed is timed. The gaps between timed requests
// are random (uniform in 1..2*SampleEvery-1): a fixed gap would time the same position of a client's
// repeating pipeline every time.
func (l *LoopLatency) Sample() bool {
	l.gap--
	if l.gap > 0 {
		return false
	}
	l.gap = l.nextGap()
	return true
}

func (l *LoopLatency) nextGap() int {
	x := l.rng
	x ^= x << 13
	x ^= x >> 7
	x ^= x << 17
	l.rng = x
	return 1 + int(x%(2*SampleEvery-1))
}

// Observe records that a request of cmd took d.
func (l *LoopLatency) Observe(cmd protocol.Command, d time.Duration) {
	if int(cmd) >= maxCommands {
		return
	}
	ns := int64(d)
	i := 0
	for i < len(bucketBounds) && ns > bucketBounds[i] {
		i++
	}
	h := &l.hists[cmd]
	h.counts[i].Add(1)
	h.sumNs.Add(uint64(max(ns, 0)))
}

// Latencies is the set of loops' timings a server keeps; the scrape merges them.
type Latencies struct {
	mu    sync.Mutex
	loops []*LoopLatency
	seed  uint64
}

// New returns a new loop's timings, included in every later merge.
func (ls *Latencies) New() *LoopLatency {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.seed += 0x9e3779b97f4a7c15
	l := NewLoopLatency(ls.seed)
	ls.loops = append(ls.loops, l)
	return l
}

// merged is one command's timings summed over loops.
type merged struct {
	counts [len(bucketBounds) + 1]uint64
	sumNs  uint64
}

func (ls *Latencies) merge() *[maxCommands]merged {
	var m [maxCommands]merged
	ls.mu.Lock()
	loops := ls.loops
	ls.mu.Unlock()
	for _, l := range loops {
		for c := range l.hists {
			h := &l.hists[c]
			for i := range h.counts {
				m[c].counts[i] += h.counts[i].Load()
			}
			m[c].sumNs += h.sumNs.Load()
		}
	}
	return &m
}

var durationDesc = prometheus.NewDesc("leasecached_request_duration_seconds",
	"Time from the start of a parsed request's execution to its reply appended, for one in about "+
		"leasecached_request_duration_sample_every requests.",
	[]string{"command"}, nil)

var sampleEveryDesc = prometheus.NewDesc("leasecached_request_duration_sample_every",
	"One request in this many, on average, is timed in leasecached_request_duration_seconds.", nil, nil)

// collect sends a histogram per command that has timings.
func (ls *Latencies) collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(sampleEveryDesc, prometheus.GaugeValue, SampleEvery)
	m := ls.merge()
	for c := range m {
		var n uint64
		buckets := make(map[float64]uint64, len(bucketBounds))
		for i, b := range bucketBounds {
			n += m[c].counts[i]
			buckets[float64(b)/1e9] = n
		}
		n += m[c].counts[len(bucketBounds)]
		if n == 0 {
			continue
		}
		ch <- prometheus.MustNewConstHistogram(durationDesc, n, float64(m[c].sumNs)/1e9, buckets,
			protocol.Command(c).String())
	}
}
