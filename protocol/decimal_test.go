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

// spread8 is checked on its own over every half it can see: its lanes must not leak into each other, so
// each value of one half is tried with extreme and random values of the other.
func TestSpread8(t *testing.T) {
	want := func(v uint32) uint64 {
		var w uint64
		for i := 7; i >= 0; i, v = i-1, v/10 {
			w |= uint64(v%10) << (8 * i)
		}
		return w
	}
	r := rand.New(rand.NewPCG(3, 4))
	for h := uint32(0); h < 1e4; h++ {
		for _, l := range []uint32{0, 1, 9999, h, uint32(r.IntN(1e4))} {
			for _, v := range []uint32{h*1e4 + l, l*1e4 + h} {
				if got := spread8(v); got != want(v) {
					t.Fatalf("spread8(%d) = %#x, want %#x", v, got, want(v))
				}
			}
		}
	}
}
