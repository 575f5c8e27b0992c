package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
)

// keyDist draws key indexes in [0, n).
type keyDist interface {
	next() uint64
}

type uniformDist struct {
	r *rand.Rand
	n uint64
}

func (u *uniformDist) next() uint64 { return u.r.Uint64N(u.n) }

// zipfDist draws index k-1 with probability proportional to 1/k^s, k in [1, n], for any s > 0.
// math/rand/v2's Zipf needs s > 1, but the usual cache workloads (and the hit-ratio runs at s = 0.9)
// live below 1, so this is rejection-inversion sampling (Hörmann and Derflinger, "Rejection-inversion
// to generate variates from monotone discrete distributions", 1996): O(1) per draw, no table, exact.
// Index 0 is the hottest key.
type zipfDist struct {
	r             *rand.Rand
	n             float64
	s             float64
	hIntegralX1   float64
	hIntegralN    float64
	squeeze       float64
	maxIndex      uint64
	rejectedDraws uint64
}

// zipfTaylorCutoff is where the helpers switch from the closed form to a Taylor series: below it
// log1p(x)/x and expm1(x)/x lose precision (and at s == 1 the closed form divides by zero).
const zipfTaylorCutoff = 1e-8

// checkZipf rejects what neither Zipf sampler can draw from.
func checkZipf(s float64, n uint64) error {
	if !(s > 0) || math.IsInf(s, 0) {
		return fmt.Errorf("zipf exponent %v: must be a positive number", s)
	}
	if n == 0 {
		return fmt.Errorf("zipf needs at least one key")
	}
	return nil
}

func newZipfDist(r *rand.Rand, s float64, n uint64) (*zipfDist, error) {
	if err := checkZipf(s, n); err != nil {
		return nil, err
	}
	z := &zipfDist{r: r, n: float64(n), s: s, maxIndex: n}
	z.hIntegralX1 = z.hIntegral(1.5) - 1
	z.hIntegralN = z.hIntegral(z.n + 0.5)
	z.squeeze = 2 - z.hIntegralInverse(z.hIntegral(2.5)-z.h(2))
	return z, nil
}

func (z *zipfDist) next() uint64 {
	for {
		u := z.hIntegralN + z.r.Float64()*(z.hIntegralX1-z.hIntegralN)
		x := z.hIntegralInverse(u)
		k := math.Floor(x + 0.5)
		if k < 1 {
			k = 1
		} else if k > z.n {
			k = z.n
		}
		if k-x <= z.squeeze || u >= z.hIntegral(k+0.5)-z.h(k) {
			return uint64(k) - 1
		}
		z.rejectedDraws++
	}
}

// h is the unnormalised probability mass x^-s.
func (z *zipfDist) h(x float64) float64 { return math.Exp(-z.s * math.Log(x)) }

// hIntegral is the antiderivative of h: (x^(1-s) - 1) / (1-s), continuous through s == 1 (log x).
func (z *zipfDist) hIntegral(x float64) float64 {
	lx := math.Log(x)
	return expm1OverX((1-z.s)*lx) * lx
}

func (z *zipfDist) hIntegralInverse(x float64) float64 {
	t := x * (1 - z.s)
	if t < -1 {
		t = -1 // rounding can push t just below the domain of log1p
	}
	return math.Exp(log1pOverX(t) * x)
}

func log1pOverX(x float64) float64 {
	if math.Abs(x) > zipfTaylorCutoff {
		return math.Log1p(x) / x
	}
	return 1 - x*(0.5-x*(1.0/3-0.25*x))
}

func expm1OverX(x float64) float64 {
	if math.Abs(x) > zipfTaylorCutoff {
		return math.Expm1(x) / x
	}
	return 1 + x*0.5*(1+x/3*(1+0.25*x))
}

// newKeyDist builds the distribution named by kind ("uniform" or "zipf") over n keys. Zipf over up to
// zipfTableMaxKeys keys draws from a shared alias table, above that by rejection-inversion.
func newKeyDist(kind string, s float64, n uint64, r *rand.Rand) (keyDist, error) {
	switch kind {
	case "uniform":
		return &uniformDist{r: r, n: n}, nil
	case "zipf":
		if n <= zipfTableMaxKeys {
			return newZipfTableDist(r, s, n)
		}
		return newZipfDist(r, s, n)
	}
	return nil, fmt.Errorf("key distribution %q: want uniform or zipf", kind)
}

// zipfTableMaxKeys bounds the key spaces drawn from an alias table: 12 bytes per key (12 MiB at the bound),
// built once per exponent and key count and shared by every connection.
const zipfTableMaxKeys = 1 << 20

// zipfTableDist draws the same distribution as zipfDist from an alias table (Vose's method): two random
// numbers and at most two table reads per draw. Rejection-inversion needs two to four logarithms and
// exponentials per draw (73 ns against 10 ns for a uniform draw, BenchmarkKeyDist), and at pipeline 16 the
// generator draws close to a million keys a second on the same two cores as the server it measures.
type zipfTableDist struct {
	r *rand.Rand
	t *aliasTable
}

func (z *zipfTableDist) next() uint64 {
	i := z.r.Uint64N(uint64(len(z.t.alias)))
	if z.r.Uint64() < z.t.keep[i] {
		return i
	}
	return uint64(z.t.alias[i])
}

// aliasTable: draw i uniformly, keep it with probability keep[i]/2^64, else take alias[i].
type aliasTable struct {
	keep  []uint64
	alias []uint32
}

type zipfTableKey struct {
	s float64
	n uint64
}

// zipfTables holds the alias tables built so far; they are never modified once built.
var zipfTables struct {
	sync.Mutex
	m map[zipfTableKey]*aliasTable
}

func newZipfTableDist(r *rand.Rand, s float64, n uint64) (*zipfTableDist, error) {
	if err := checkZipf(s, n); err != nil {
		return nil, err
	}
	zipfTables.Lock()
	defer zipfTables.Unlock()
	k := zipfTableKey{s, n}
	t := zipfTables.m[k]
	if t == nil {
		w := make([]float64, n)
		for i := range w {
			w[i] = math.Pow(float64(i+1), -s)
		}
		t = newAliasTable(w)
		if zipfTables.m == nil {
			zipfTables.m = make(map[zipfTableKey]*aliasTable)
		}
		zipfTables.m[k] = t
	}
	return &zipfTableDist{r: r, t: t}, nil
}

// newAliasTable builds the alias table of the distribution proportional to w (Vose, "A linear algorithm
// for generating random numbers with a given distribution", 1991). len(w) must be below 2^32.
func newAliasTable(w []float64) *aliasTable {
	n := len(w)
	var sum float64
	for _, x := range w {
		sum += x
	}
	p := make([]float64, n) // each key's probability times n: the share of its column it keeps
	small, large := make([]uint32, 0, n), make([]uint32, 0, n)
	for i, x := range w {
		p[i] = x * float64(n) / sum
		if p[i] < 1 {
			small = append(small, uint32(i))
		} else {
			large = append(large, uint32(i))
		}
	}
	t := &aliasTable{keep: make([]uint64, n), alias: make([]uint32, n)}
	for len(small) > 0 && len(large) > 0 {
		sm, lg := small[len(small)-1], large[len(large)-1]
		small = small[:len(small)-1]
		t.keep[sm], t.alias[sm] = keepThreshold(p[sm]), lg
		p[lg] -= 1 - p[sm] // lg gives sm's column the share sm does not keep
		if p[lg] < 1 {
			large = large[:len(large)-1]
			small = append(small, lg)
		}
	}
	// What is left keeps its whole column (its p is 1 up to rounding).
	for _, i := range append(small, large...) {
		t.keep[i], t.alias[i] = math.MaxUint64, i
	}
	return t
}

// keepThreshold maps a share in [0, 1] to the threshold a uniform uint64 is compared with.
func keepThreshold(p float64) uint64 {
	if p >= 1 {
		return math.MaxUint64
	}
	return uint64(p * (1 << 64))
}
