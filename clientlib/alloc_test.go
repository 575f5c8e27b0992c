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
// Item and its value), or nothing into a caller's buffer (GetInto). Measured against memcached, an external process, so only this process's
// allocations count.
func TestSteadyStateAllocations(t *testing.T) {
	p := startMemcached(t)
	c := newClient(t, clientlib.Config{}, p.Addr)
	ctx := context.Background()
	item := &clientlib.Item{Key: "alloc:key", Value: []byte("some value"), TTL: time.Minute}
	if err := c.Set(ctx, item); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 0, 64)
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
		// Into a buffer of the caller's: nothing at all.
		{"GetInto hit", 0, func() { buf, _, _ = c.GetInto(ctx, "alloc:key", buf) }},
		{"GetInto miss", 0, func() { buf, _, _ = c.GetInto(ctx, "alloc:none", buf) }},
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
	v, _, err := c.GetInto(ctx, "alloc:key", buf)
	if err != nil || string(v) != "some value" {
		t.Errorf("GetInto = %q, %v", v, err)
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
