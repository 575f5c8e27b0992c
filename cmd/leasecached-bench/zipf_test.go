package main

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestZipfMatchesExactDistribution draws from small key spaces and compares every key's frequency with
// the exact Zipf probability k^-s / H(n,s), for exponents below, at and above 1.
func TestZipfMatchesExactDistribution(t *testing.T) {
	const draws = 150000
	tests := []struct {
		s float64
		n uint64
	}{
		{0.5, 20}, {0.9, 50}, {0.99, 50}, {1.0, 30}, {1.1, 50}, {2.0, 10}, {0.9, 1},
	}
	for _, tc := range tests {
		z, err := newZipfDist(rand.New(rand.NewPCG(7, 7)), tc.s, tc.n)
		if err != nil {
			t.Fatal(err)
		}
		counts := make([]float64, tc.n)
		for i := 0; i < draws; i++ {
			k := z.next()
			if k >= tc.n {
				t.Fatalf("s=%v n=%d: drew %d, out of range", tc.s, tc.n, k)
			}
			counts[k]++
		}
		var norm float64
		for k := 1; k <= int(tc.n); k++ {
			norm += math.Pow(float64(k), -tc.s)
		}
		for k := 1; k <= int(tc.n); k++ {
			p := math.Pow(float64(k), -tc.s) / norm
			want := p * draws
			sd := math.Sqrt(draws * p * (1 - p))
			if got := counts[k-1]; math.Abs(got-want) > 5*sd+1 {
				t.Errorf("s=%v n=%d: key rank %d drawn %v times, want %.0f +- %.0f", tc.s, tc.n, k, got, want, 5*sd)
			}
		}
	}
}

// TestZipfLargeKeySpace checks the head of a large key space: rank 1 over rank 2 must be 2^s.
func TestZipfLargeKeySpace(t *testing.T) {
	const draws = 500000
	for _, s := range []float64{0.9, 1.1} {
		z, err := newZipfDist(rand.New(rand.NewPCG(1, 2)), s, 10000000)
		if err != nil {
			t.Fatal(err)
		}
		var c0, c1 float64
		for i := 0; i < draws; i++ {
			switch z.next() {
			case 0:
				c0++
			case 1:
				c1++
			}
		}
		if got, want := c0/c1, math.Pow(2, s); math.Abs(got-want)/want > 0.05 {
			t.Errorf("s=%v: rank1/rank2 = %.3f, want %.3f", s, got, want)
		}
	}
}

func TestZipfDeterministicAndRejectsBadInput(t *testing.T) {
	a, _ := newZipfDist(rand.New(rand.NewPCG(3, 4)), 0.9, 1000)
	b, _ := newZipfDist(rand.New(rand.NewPCG(3, 4)), 0.9, 1000)
	for i := 0; i < 1000; i++ {
		if x, y := a.next(), b.next(); x != y {
			t.Fatalf("draw %d: same seed gave %d and %d", i, x, y)
		}
	}
	for _, s := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		if _, err := newZipfDist(rand.New(rand.NewPCG(1, 1)), s, 10); err == nil {
			t.Errorf("s=%v accepted", s)
		}
	}
	if _, err := newZipfDist(rand.New(rand.NewPCG(1, 1)), 1, 0); err == nil {
		t.Error("n=0 accepted")
	}
	if _, err := newKeyDist("pareto", 1, 10, rand.New(rand.NewPCG(1, 1))); err == nil {
		t.Error("unknown distribution accepted")
	}
}

func TestUniformCoversRange(t *testing.T) {
	d, err := newKeyDist("uniform", 0, 10, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	seen := make([]int, 10)
	for i := 0; i < 10000; i++ {
		seen[d.next()]++
	}
	for k, c := range seen {
		if c < 800 || c > 1200 {
			t.Errorf("key %d drawn %d times of 10000", k, c)
		}
	}
}

func TestZipfAllocatesNothing(t *testing.T) {
	z, _ := newZipfDist(rand.New(rand.NewPCG(1, 1)), 0.99, 1000000)
	if a := testing.AllocsPerRun(1000, func() { z.next() }); a != 0 {
		t.Errorf("next allocates %v times", a)
	}
}
