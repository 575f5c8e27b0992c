package near

import (
	"sync"
	"time"
)

// hotness decides which keys are worth a near copy: those this process read at least `reads` times in
// the current window, and those the servers listed in their last "stats hotkeys". The counts restart
// every window, and at most maxTracked keys are counted in one window, so memory stays bounded however
// many keys are read; a key seen first after the table filled waits for the next window.
type hotness struct {
	mu          sync.Mutex
	counts      map[string]int
	windowStart time.Time
	window      time.Duration
	reads       int
	maxTracked  int
	listed      map[string]struct{} // from the servers' stats hotkeys, replaced on each poll
}

func newHotness(reads int, window time.Duration, maxTracked int) *hotness {
	return &hotness{counts: make(map[string]int), window: window, reads: reads, maxTracked: maxTracked}
}

// read counts one read of key at now and reports whether key is hot.
func (h *hotness) read(key string, now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if now.Sub(h.windowStart) >= h.window {
		clear(h.counts)
		h.windowStart = now
	}
	if _, ok := h.listed[key]; ok {
		return true
	}
	n, ok := h.counts[key]
	if !ok && len(h.counts) >= h.maxTracked {
		return false
	}
	n++
	h.counts[key] = n
	return n >= h.reads
}

// setListed replaces the keys the servers reported hot.
func (h *hotness) setListed(keys map[string]struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.listed = keys
}
