package clientlib_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasecached/leasecached/clientlib"
)

// TestSteadyStateAllocations pins the per-request allocations of the hot paths once a pooled
// connection exists. Writes and deletes allocate nothing; a read allocates exactly its result (the
// Item and its value). Measured against memcached, an external process, so only this process's
// allocations count.
func TestSteadyStateAllocations(t *testing.T) {
	p := startMemcached(t)
	c := newClient(t, clientlib.Config{}, p.Addr)
	ctx := context.Background()
	item := &clientlib.Item{Key: "alloc:key", Value: []byte("some value"), TTL: time.Minute}
	if err := c.Set(ctx, item); err != nil {
		t.Fatal(err)
	}
	var observed atomic.Int64
	oc := newClient(t, clientlib.Config{Observe: func(context.Context, clientlib.Event) { observed.Add(1) }}, p.Addr)
	tests := []struct {
		name string
		max  float64
		run  func()
	}{
		{"Set", 0, func() { _ = c.Set(ctx, item) }},
		{"Touch", 0, func() { _ = c.Touch(ctx, "alloc:key", time.Minute) }},
		{"Delete miss", 0, func() { _ = c.Delete(ctx, "alloc:none") }},
		{"Increment miss", 0, func() { _, _ = c.Increment(ctx, "alloc:none", 1) }},
		{"Get miss", 0, func() { _, _ = c.Get(ctx, "alloc:none") }},
		{"Get hit", 2, func() { _, _ = c.Get(ctx, "alloc:key") }},
		// Config.Observe set: the hook itself allocates nothing either.
		{"Get miss, observed", 0, func() { _, _ = oc.Get(ctx, "alloc:none") }},
		{"Get hit, observed", 2, func() { _, _ = oc.Get(ctx, "alloc:key") }},
		{"Set, observed", 0, func() { _ = oc.Set(ctx, item) }},
	}
	for _, tc := range tests {
		if got := testing.AllocsPerRun(200, tc.run); got > tc.max {
			t.Errorf("%s: %v allocations per call, want at most %v", tc.name, got, tc.max)
		}
	}
	if observed.Load() == 0 {
		t.Error("the observed client's hook was not called")
	}
}

func BenchmarkSetGet(b *testing.B) {
	p := startMemcached(b)
	c := newClient(b, clientlib.Config{}, p.Addr)
	ctx := context.Background()
	item := &clientlib.Item{Key: "bench:key", Value: make([]byte, 100)}
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Set(ctx, item); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Get(ctx, "bench:key"); err != nil {
			b.Fatal(err)
		}
	}
}
