package shard

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

// gcItemValue is the value size of the GC measurements: small, so 10 million items fit in 500 MiB.
const gcItemValue = 10

// fillForGC stores n small items in a store big enough to hold them all.
func fillForGC(tb testing.TB, n int) *Store {
	tb.Helper()
	s, _ := newStore(tb, Config{MemoryLimit: int64(n)*80 + 64<<20})
	v := pattern(gcItemValue, 1)
	for i := range n {
		if r := s.Store(ModeSet, key(i), 0, 0, v, 0); r != Stored {
			tb.Fatalf("item %d: %v", i, r)
		}
	}
	if got := s.Stats().CurrItems; got != int64(n) {
		tb.Fatalf("%d items resident of %d", got, n)
	}
	return s
}

// BenchmarkGCWithItems measures a full GC cycle with 100k, 1M and 10M items stored: the pause
// (stop-the-world time) and the CPU the collector spends, per cycle. Items live in mapped slab pages and
// the index in a mapped []uint64, none of it on the Go heap, so both figures stay flat as items grow:
//
//	go test ./shard -run '^$' -bench GCWithItems -benchtime 20x
func BenchmarkGCWithItems(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000, 10_000_000} {
		b.Run(fmt.Sprintf("items=%d", n), func(b *testing.B) {
			s := fillForGC(b, n)
			cpu := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
			var before, after debug.GCStats
			runtime.GC()
			debug.ReadGCStats(&before)
			metrics.Read(cpu)
			cpu0 := cpu[0].Value.Float64()
			b.ResetTimer()
			for range b.N {
				runtime.GC()
			}
			b.StopTimer()
			debug.ReadGCStats(&after)
			metrics.Read(cpu)
			cycles := float64(after.NumGC - before.NumGC)
			b.ReportMetric(float64(after.PauseTotal-before.PauseTotal)/cycles, "pause-ns/gc")
			b.ReportMetric((cpu[0].Value.Float64()-cpu0)*float64(time.Second)/cycles, "gc-cpu-ns/gc")
			runtime.KeepAlive(s)
		})
	}
}

// Item memory and the index are off the Go heap: storing 200k items grows the heap by almost nothing
// (a heap-allocated index alone would be 1.8 MB, the items 9 MB).
func TestItemsAreOffHeap(t *testing.T) {
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	const n = 200_000
	h0 := heap()
	s := fillForGC(t, n)
	grown := int64(heap()) - int64(h0)
	runtime.KeepAlive(s)
	// The store's own heap objects (per-shard class tables, lease tables) are a fixed cost.
	if limit := int64(2 << 20); grown > limit {
		t.Fatalf("heap grew %d bytes for %d items (%.1f per item)", grown, n, float64(grown)/n)
	}
	t.Logf("heap grew %d bytes for %d items", grown, n)
}
