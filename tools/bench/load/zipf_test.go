package load

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestZipfMatchesExactDistribution draws from small key spaces and compares every key's frequency with
// the exact Zipf probability k^-s / H(n,s), for exponents below, at and above 1.
// Both samplers are checked: rejection-inversion (large key spaces) and the alias table.
func TestZipfMatchesExactDistribution(t *testing.T) {
	for _, sm := range zipfSamplers {
		t.Run(sm.name, func(t *testing.T) { testZipfMatchesExactDistribution(t, sm.mk) })
	}
}

// zipfSamplers are the two ways newKeyDist draws Zipf keys.
var zipfSamplers = []struct {
	name string
	mk   func(r *rand.Rand, s float64, n uint64) (keyDist, error)
}{
	{"rejection-inversion", func(r *rand.Rand, s float64, n uint64) (keyDist, error) { return newZipfDist(r, s, n) }},
	{"alias-table", func(r *rand.Rand, s float64, n uint64) (keyDist, error) { return newZipfTableDist(r, s, n) }},
	// The hybrid with a head of a third of the keys, so that both of its halves draw.
	{"hybrid", func(r *rand.Rand, s float64, n uint64) (keyDist, error) { return newZipfHybridDist(r, s, n, n/3) }},
}

// TestZipfRangeMatchesExactDistribution: rejection-inversion over ranks lo to n (zipfHybridDist's tail)
// draws each rank with probability k^-s over the sum of the range's weights.
func TestZipfRangeMatchesExactDistribution(t *testing.T) {
	const draws = 150000
	for _, tc := range []struct {
		s     float64
		lo, n uint64
	}{{0.5, 2, 20}, {0.99, 5, 50}, {1.0, 3, 30}, {1.1, 10, 40}, {2.0, 2, 10}, {0.9, 7, 7}} {
		z := newZipfRange(rand.New(rand.NewPCG(5, 5)), tc.s, tc.lo, tc.n)
		counts := make([]float64, tc.n)
		for range draws {
			k := z.next()
			if k < tc.lo-1 || k >= tc.n {
				t.Fatalf("s=%v ranks %d-%d: drew index %d, out of range", tc.s, tc.lo, tc.n, k)
			}
			counts[k]++
		}
		var norm float64
		for k := tc.lo; k <= tc.n; k++ {
			norm += math.Pow(float64(k), -tc.s)
		}
		for k := tc.lo; k <= tc.n; k++ {
			p := math.Pow(float64(k), -tc.s) / norm
			want, sd := p*draws, math.Sqrt(draws*p*(1-p))
			if got := counts[k-1]; math.Abs(got-want) > 5*sd+1 {
				t.Errorf("s=%v ranks %d-%d: rank %d drawn %v times, want %.0f +- %.0f", tc.s, tc.lo, tc.n, k, got, want, 5*sd)
			}
		}
	}
}

func testZipfMatchesExactDistribution(t *testing.T, mk func(r *rand.Rand, s float64, n uint64) (keyDist, error)) {
	const draws = 150000
	tests := []struct {
		s float64
		n uint64
	}{
		{0.5, 20}, {0.9, 50}, {0.99, 50}, {1.0, 30}, {1.1, 50}, {2.0, 10}, {0.9, 1},
	}
	for _, tc := range tests {
		z, err := mk(rand.New(rand.NewPCG(7, 7)), tc.s, tc.n)
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
	for _, sm := range zipfSamplers {
		a, _ := sm.mk(rand.New(rand.NewPCG(3, 4)), 0.9, 1000)
		b, _ := sm.mk(rand.New(rand.NewPCG(3, 4)), 0.9, 1000)
		for i := 0; i < 1000; i++ {
			if x, y := a.next(), b.next(); x != y {
				t.Fatalf("%s, draw %d: same seed gave %d and %d", sm.name, i, x, y)
			}
		}
		for _, s := range []float64{0, -1, math.NaN(), math.Inf(1)} {
			if _, err := sm.mk(rand.New(rand.NewPCG(1, 1)), s, 10); err == nil {
				t.Errorf("%s: s=%v accepted", sm.name, s)
			}
		}
		if _, err := sm.mk(rand.New(rand.NewPCG(1, 1)), 1, 0); err == nil {
			t.Errorf("%s: n=0 accepted", sm.name)
		}
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
	for _, sm := range zipfSamplers {
		z, _ := sm.mk(rand.New(rand.NewPCG(1, 1)), 0.99, 100000)
		if a := testing.AllocsPerRun(1000, func() { z.next() }); a != 0 {
			t.Errorf("%s: next allocates %v times", sm.name, a)
		}
	}
}

// The alias table is exact: the probability it gives each key, worked out from its columns, is the
// key's weight over the total, to float precision. No sampling noise, so the bound is tight.
func TestAliasTableIsExact(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	cases := [][]float64{{1}, {1, 1}, {3, 1}, {1, 0, 2}}
	for _, c := range []struct {
		s float64
		n int
	}{{0.99, 1000}, {0.5, 7}, {1.1, 100000}, {2, 64}} {
		w := make([]float64, c.n)
		for i := range w {
			w[i] = math.Pow(float64(i+1), -c.s)
		}
		cases = append(cases, w)
	}
	random := make([]float64, 5000)
	for i := range random {
		random[i] = r.Float64() * float64(r.IntN(4)) // some zero weights
	}
	cases = append(cases, random)
	for ci, w := range cases {
		tab := newAliasTable(w)
		n := float64(len(w))
		got := make([]float64, len(w))
		for i := range w {
			c := tab.cols[i]
			keep := float64(c.keep) / (1 << 32)
			got[i] += keep / n
			got[c.alias] += (1 - keep) / n
		}
		var sum float64
		for _, x := range w {
			sum += x
		}
		for i, x := range w {
			if want := x / sum; math.Abs(got[i]-want) > 1e-9*max(want, 1/n) {
				t.Fatalf("case %d (%d keys): key %d gets %.12g, want %.12g", ci, len(w), i, got[i], want)
			}
		}
	}
}

// newKeyDist draws Zipf keys from a shared table up to zipfTableMaxKeys keys, and by rejection-inversion
// beyond.
func TestKeyDistChoosesZipfSampler(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	a, _ := newKeyDist("zipf", 0.99, 1000, r)
	b, _ := newKeyDist("zipf", 0.99, 1000, r)
	if ha, ok := a.(*zipfHybridDist); !ok || ha.head.t != b.(*zipfHybridDist).head.t || ha.tail != nil {
		t.Errorf("1000 keys: got %T, two tables for the same distribution, or a tail", a)
	}
	if h, _ := newKeyDist("zipf", 0.99, 100000, r); h.(*zipfHybridDist).tail == nil ||
		len(h.(*zipfHybridDist).head.t.cols) != zipfHeadKeys {
		t.Errorf("100000 keys: want a head of %d keys and a tail", zipfHeadKeys)
	}
	if d, _ := newKeyDist("zipf", 0.99, zipfTableMaxKeys+1, r); func() bool { _, ok := d.(*zipfDist); return !ok }() {
		t.Errorf("%d keys: got %T, want rejection-inversion", zipfTableMaxKeys+1, d)
	}
}

func BenchmarkKeyDist(b *testing.B) {
	for _, kind := range []string{"uniform", "zipf"} {
		b.Run(kind, func(b *testing.B) {
			d, err := newKeyDist(kind, 0.99, 100000, rand.New(rand.NewPCG(1, 2)))
			if err != nil {
				b.Fatal(err)
			}
			var sink uint64
			for b.Loop() {
				sink += d.next()
			}
			_ = sink
		})
	}
}
