package protocol

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

func TestAppendDecimalMatchesStrconv(t *testing.T) {
	check := func(v uint64) {
		t.Helper()
		prefix := []byte("x ")
		got := appendDecimal(prefix, v)
		want := strconv.AppendUint([]byte("x "), v, 10)
		if string(got) != string(want) {
			t.Fatalf("appendDecimal(%d) = %q, want %q", v, got, want)
		}
	}
	// Every number up to 100k, every power of ten and its neighbours, the extremes, and random values.
	for v := uint64(0); v <= 100000; v++ {
		check(v)
	}
	for p := uint64(1); p <= math.MaxUint64/10; p *= 10 {
		check(p - 1)
		check(p)
		check(p + 1)
	}
	check(math.MaxUint64)
	check(math.MaxUint64 - 1)
	check(math.MaxUint32)
	r := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		check(r.Uint64() >> r.IntN(64))
	}
}

func TestAppendDecimalAllocatesNothing(t *testing.T) {
	dst := make([]byte, 0, 64)
	if a := testing.AllocsPerRun(100, func() { _ = appendDecimal(dst[:0], math.MaxUint64) }); a != 0 {
		t.Errorf("%.1f allocations", a)
	}
}

func BenchmarkAppendValueHeader(b *testing.B) {
	dst := make([]byte, 0, 512)
	key := []byte("k0000000012345")
	b.ReportAllocs()
	for b.Loop() {
		dst = AppendValueHeader(dst[:0], key, 0, 100, 0, false)
	}
}

// BenchmarkAppendValueHeaderBigFlags is the VALUE line of an item whose flags are a 32-bit hash (as the
// load tool's are), which takes appendDecimal's long path.
func BenchmarkAppendValueHeaderBigFlags(b *testing.B) {
	dst := make([]byte, 0, 512)
	key := []byte("k0000000012345")
	b.ReportAllocs()
	for b.Loop() {
		dst = AppendValueHeader(dst[:0], key, 3735928559, 100, 0, false)
	}
}
