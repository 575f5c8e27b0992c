package clientlib

import (
	"slices"
	"sync/atomic"
)

// counters are the client's own event counts; Stats copies them out. Plain atomics: no metrics
// dependency, and a service exports them however it likes.
type counters struct {
	fillsStarted        atomic.Uint64
	fillErrors          atomic.Uint64
	callersCoalesced    atomic.Uint64
	hotMissWaits        atomic.Uint64
	staleServed         atomic.Uint64
	leaseSetsStored     atomic.Uint64
	leaseSetsRejected   atomic.Uint64
	fallbacks           atomic.Uint64
	backgroundRefreshes atomic.Uint64
	earlyRefreshes      atomic.Uint64
	cacheHits           atomic.Uint64
}

// Stats is a snapshot of the client's counters.
type Stats struct {
	// GetOrFill counters.
	CacheHits           uint64 // GetOrFill served from the cache
	FillsStarted        uint64 // fill functions run (lease holder, fallback or lease-less server)
	FillErrors          uint64 // fill functions that failed, panicked or timed out (ErrNotFound is an answer, not counted)
	CallersCoalesced    uint64 // callers that joined another caller's in-flight GetOrFill
	HotMissWaits        uint64 // backoff sleeps while another client held the key (a lease, or meta's Z)
	StaleServed         uint64 // stale values returned (hot miss with AcceptStale, or StaleWhileRefresh)
	LeaseSetsStored     uint64 // conditional writes after a fill the server accepted (lease-set; ms with the CAS on memcached)
	LeaseSetsRejected   uint64 // those refused: the key was written or deleted meanwhile (the value was still returned)
	Fallbacks           uint64 // hot-miss waits that ran out, or cache errors, handled by the fallback mode
	BackgroundRefreshes uint64 // fills run in the background: StaleWhileRefresh, and early refreshes
	EarlyRefreshes      uint64 // early refreshes this process won (EarlyRefresh) and started
	// Servers has one entry per configured server (SetServers' list once it was called), in order.
	Servers []ServerHealth
}

// ServerHealth is one server's error counts and state.
type ServerHealth struct {
	Addr      string
	Errors    uint64 // failures: network errors, and requests left unanswered for Config.Timeout
	Ejections uint64 // times it was taken out of the ring
	Ejected   bool   // out of the ring right now
}

// Stats returns a snapshot of the counters.
func (c *Client) Stats() Stats {
	k := &c.counters
	s := Stats{
		CacheHits:           k.cacheHits.Load(),
		FillsStarted:        k.fillsStarted.Load(),
		FillErrors:          k.fillErrors.Load(),
		CallersCoalesced:    k.callersCoalesced.Load(),
		HotMissWaits:        k.hotMissWaits.Load(),
		StaleServed:         k.staleServed.Load(),
		LeaseSetsStored:     k.leaseSetsStored.Load(),
		LeaseSetsRejected:   k.leaseSetsRejected.Load(),
		Fallbacks:           k.fallbacks.Load(),
		BackgroundRefreshes: k.backgroundRefreshes.Load(),
		EarlyRefreshes:      k.earlyRefreshes.Load(),
	}
	// Ejected is read from the ring that routes keys, not from the server's flag: the flag changes just
	// before the ring is rebuilt, and a caller that saw a server back in Stats must find keys mapping to it.
	live := c.ring.Load().live
	for _, srv := range c.serverSnapshot() {
		s.Servers = append(s.Servers, ServerHealth{
			Addr: srv.addr, Errors: srv.errors.Load(), Ejections: srv.ejects.Load(), Ejected: !slices.Contains(live, srv),
		})
	}
	return s
}
