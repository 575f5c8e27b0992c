package server

import (
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Memory a burst takes on the Go heap (replies waiting for slow readers, gathered requests, gnet's
// buffers and pools) is garbage once the burst is gone. Items live off the heap, so the heap is small and
// allocates little in steady state: its next collection may be far off, buffers wait in sync.Pools until
// two collections have passed, and Go's background scavenger returns free heap to the system only
// slowly. So once a second the server compares the heap's size (in use, garbage, and free but not yet
// returned) with what it was after the last release; past releaseAbove more, it collects and returns the
// free heap at once (debug.FreeOSMemory), and does so once more a second later, for what pools held
// through the first collection. A heap that stays large for good costs one release, not one a second. A
// burst's memory is back with the system about two seconds after its end (integration/robust_test.go).
const (
	releaseEvery = time.Second
	releaseAbove = 16 << 20
)

// releaseMemory runs until done is closed.
func (s *Server) releaseMemory(done <-chan struct{}) {
	samples := []metrics.Sample{
		{Name: "/memory/classes/heap/free:bytes"},    // free, not yet returned
		{Name: "/memory/classes/heap/objects:bytes"}, // in use and not yet swept
		{Name: "/memory/classes/heap/unused:bytes"},  // in spans, unused
	}
	size := func() uint64 {
		metrics.Read(samples)
		return samples[0].Value.Uint64() + samples[1].Value.Uint64() + samples[2].Value.Uint64()
	}
	floor, again := size(), false
	t := time.NewTicker(releaseEvery)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		if again || size() > floor+releaseAbove {
			debug.FreeOSMemory()
			floor, again = size(), !again
		}
	}
}
