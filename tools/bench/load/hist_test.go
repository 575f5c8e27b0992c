package load

import (
	"math"
	"testing"
	"time"
)

func TestHistogramPercentiles(t *testing.T) {
	tests := []struct {
		name   string
		values func(record func(time.Duration))
		q      float64
		want   time.Duration
	}{
		{"uniform 1..10000us p50", uniformUs(10000), 0.50, 5000 * time.Microsecond},
		{"uniform 1..10000us p99", uniformUs(10000), 0.99, 9900 * time.Microsecond},
		{"uniform 1..10000us p99.9", uniformUs(10000), 0.999, 9990 * time.Microsecond},
		{"uniform 1..10000us max", uniformUs(10000), 1, 10000 * time.Microsecond},
		{"tail: 990 fast, 10 slow p99", tail(990, time.Microsecond*100, 10, time.Second), 0.99, 100 * time.Microsecond},
		{"tail: 989 fast, 11 slow p99", tail(989, time.Microsecond*100, 11, time.Second), 0.99, time.Second},
		{"single value", tail(1, 1234*time.Nanosecond, 0, 0), 0.5, 1234 * time.Nanosecond},
		{"small exact values", tail(50, 3, 50, 90), 0.5, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var h histogram
			tc.values(h.record)
			got := h.percentile(tc.q)
			if rel := math.Abs(float64(got-tc.want)) / float64(tc.want); rel > 1.0/histSub {
				t.Errorf("percentile(%v) = %v, want %v (within %.1f%%)", tc.q, got, tc.want, 100.0/histSub)
			}
		})
	}
}

func uniformUs(n int) func(func(time.Duration)) {
	return func(rec func(time.Duration)) {
		for i := 1; i <= n; i++ {
			rec(time.Duration(i) * time.Microsecond)
		}
	}
}

func tail(nFast int, fast time.Duration, nSlow int, slow time.Duration) func(func(time.Duration)) {
	return func(rec func(time.Duration)) {
		for i := 0; i < nFast; i++ {
			rec(fast)
		}
		for i := 0; i < nSlow; i++ {
			rec(slow)
		}
	}
}

func TestHistogramBucketsAreMonotonicAndTight(t *testing.T) {
	prev := -1
	for v := uint64(0); v < 1<<40; v = v*17/16 + 1 {
		i := histIndex(v)
		if i < prev || i >= histBuckets {
			t.Fatalf("value %d: bucket %d after %d (of %d)", v, i, prev, histBuckets)
		}
		prev = i
		if rep := histValue(i); math.Abs(float64(rep)-float64(v)) > float64(v)/histSub+1 {
			t.Fatalf("value %d lands in bucket %d represented by %d", v, i, rep)
		}
	}
	if i := histIndex(math.MaxUint64); i != histBuckets-1 {
		t.Errorf("max value in bucket %d, want %d", i, histBuckets-1)
	}
}

func TestHistogramMerge(t *testing.T) {
	var a, b, m histogram
	uniformUs(500)(a.record)
	for i := 501; i <= 1000; i++ {
		b.record(time.Duration(i) * time.Microsecond)
	}
	m.merge(&a)
	m.merge(&b)
	if m.total != 1000 || m.min != uint64(time.Microsecond) || m.max != uint64(1000*time.Microsecond) {
		t.Fatalf("merged total %d min %d max %d", m.total, m.min, m.max)
	}
	if p := m.percentile(0.5); math.Abs(float64(p-500*time.Microsecond)) > float64(500*time.Microsecond)/histSub {
		t.Errorf("merged p50 %v", p)
	}
	var empty histogram
	if empty.percentile(0.99) != 0 || empty.mean() != 0 {
		t.Error("empty histogram reports values")
	}
}

func TestHistogramRecordAllocatesNothing(t *testing.T) {
	var h histogram
	if a := testing.AllocsPerRun(1000, func() { h.record(123 * time.Microsecond) }); a != 0 {
		t.Errorf("record allocates %v times", a)
	}
}
