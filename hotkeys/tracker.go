package hotkeys

import (
	"sync"
	"time"
)

// Tracker counts the sampled keys of one event loop over time windows: a Space-Saving summary for the
// current window and one for the window before it. A window ends on a multiple of its length (of the
// caller's clock), so the trackers of all loops rotate together and their windows merge. Rates cover
// the previous window and the current one so far (Top), so a key that stops being requested is gone
// within two windows.
//
// Offer is called by its loop for sampled requests only; the mutex is taken by that loop and, rarely,
// by a reader (Top), so it is never contended on the request path.
type Tracker struct {
	mu        sync.Mutex
	capacity  int
	window    int64 // nanoseconds
	cur, prev *Summary
	curW      int64 // cur's window: its start / window
}

// NewTracker returns a tracker of summaries of capacity entries over windows of the given length.
// The summaries are allocated on the first Offer, so a loop that serves nothing holds nothing.
func NewTracker(capacity int, window time.Duration) *Tracker {
	return &Tracker{capacity: capacity, window: max(int64(window), 1)}
}

// Bytes is the memory a tracker holds once it has counted a key.
func (t *Tracker) Bytes() int { return 2 * Bytes(t.capacity) }

// Offer counts a sampled request of key (hashed h) at now (nanoseconds), standing for w requests (the
// sampler's Taken).
func (t *Tracker) Offer(now int64, key []byte, h uint64, write bool, w uint32) {
	t.mu.Lock()
	if w := now / t.window; w != t.curW || t.cur == nil {
		t.rotate(w)
	}
	t.cur.OfferN(key, h, write, w)
	t.mu.Unlock()
}

// rotate makes window w the current one.
func (t *Tracker) rotate(w int64) {
	if t.cur == nil {
		t.cur, t.prev = NewSummary(t.capacity), NewSummary(t.capacity)
	}
	if w == t.curW+1 {
		t.cur, t.prev = t.prev, t.cur
	} else {
		t.prev.Reset()
	}
	t.cur.Reset()
	t.curW = w
}

// appendSpan appends the counts of the windows that overlap the span of now (the previous window and the
// current one) to dst, and adds their totals (weights) and samples to total and samples.
func (t *Tracker) appendSpan(now int64, dst []Count, total, samples *uint64) []Count {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cur == nil {
		return dst
	}
	w := now / t.window
	if t.curW == w || t.curW == w-1 {
		dst = t.cur.AppendCounts(dst)
		*total, *samples = *total+t.cur.Total(), *samples+t.cur.Samples()
	}
	if t.curW == w { // prev is window w-1 (or empty)
		dst = t.prev.AppendCounts(dst)
		*total, *samples = *total+t.prev.Total(), *samples+t.prev.Samples()
	}
	return dst
}

// HotKey is one key's estimated traffic.
type HotKey struct {
	Key    string
	Rate   float64 // requests per second
	Share  float64 // percent of all keyed requests
	Reads  float64 // of Rate, reads per second
	Writes float64 // of Rate, writes per second
}

// Top merges the trackers' windows that overlap the span at now (nanoseconds) and returns the n keys
// with the largest estimated rates, largest first, and the mean sampling rate of the span (the requests a
// sample stood for; 0 when nothing was sampled). Rates are over the span: the previous window and the
// current one so far.
func Top(trackers []*Tracker, now int64, n int) ([]HotKey, int) {
	if len(trackers) == 0 {
		return nil, 0
	}
	var (
		cs             []Count
		total, samples uint64
	)
	for _, t := range trackers {
		cs = t.appendSpan(now, cs, &total, &samples)
	}
	if samples == 0 {
		return nil, 0
	}
	rate := int((total + samples/2) / samples)
	if n <= 0 {
		return nil, rate
	}
	merged := make(map[string]int, len(cs))
	out := cs[:0]
	for _, c := range cs {
		if i, ok := merged[c.Key]; ok {
			m := &out[i]
			m.Count, m.Err, m.Reads = m.Count+c.Count, m.Err+c.Err, m.Reads+c.Reads
			continue
		}
		merged[c.Key] = len(out)
		out = append(out, c)
	}
	sortCounts(out)
	out = out[:min(n, len(out))]
	window := trackers[0].window
	span := float64(window+now%window) / float64(time.Second)
	keys := make([]HotKey, len(out))
	for i, c := range out {
		rps := float64(c.Count) / span
		seen := c.Count - c.Err // hits while monitored: the read/write split is theirs
		reads := rps * float64(c.Reads) / float64(max(seen, 1))
		keys[i] = HotKey{Key: c.Key, Rate: rps, Share: 100 * float64(c.Count) / float64(total), Reads: reads,
			Writes: rps - reads}
	}
	return keys, rate
}
