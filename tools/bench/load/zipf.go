package load

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
	lo            float64 // the lowest rank drawn: 1, or past the head an alias table draws (zipfHybridDist)
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
	return newZipfRange(r, s, 1, n), nil
}

// newZipfRange draws ranks lo to n (1 <= lo <= n) with probability proportional to k^-s: the same method
// over a shorter range. Rank lo's acceptance region starts where u does (hIntegralX1), as rank 1's does
// in the paper, and the squeeze is the paper's for the first rank after it.
func newZipfRange(r *rand.Rand, s float64, lo, n uint64) *zipfDist {
	z := &zipfDist{r: r, lo: float64(lo), n: float64(n), s: s, maxIndex: n}
	z.hIntegralX1 = z.hIntegral(z.lo+0.5) - z.h(z.lo)
	z.hIntegralN = z.hIntegral(z.n + 0.5)
	z.squeeze = z.lo + 1 - z.hIntegralInverse(z.hIntegral(z.lo+1.5)-z.h(z.lo+1))
	return z
}

func (z *zipfDist) next() uint64 {
	for {
		u := z.hIntegralN + z.r.Float64()*(z.hIntegralX1-z.hIntegralN)
		x := z.hIntegralInverse(u)
		k := math.Floor(x + 0.5)
		if k < z.lo {
			k = z.lo
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
// zipfTableMaxKeys keys draws its hottest keys from a shared alias table and the rest by
// rejection-inversion (zipfHybridDist), above that by rejection-inversion alone.
func newKeyDist(kind string, s float64, n uint64, r *rand.Rand) (keyDist, error) {
	switch kind {
	case "uniform":
		return &uniformDist{r: r, n: n}, nil
	case "zipf":
		if n <= zipfTableMaxKeys {
			return newZipfHybridDist(r, s, n, zipfHeadKeys)
		}
		return newZipfDist(r, s, n)
	}
	return nil, fmt.Errorf("key distribution %q: want uniform or zipf", kind)
}

// zipfTableMaxKeys bounds the key spaces zipfHybridDist draws from, whose construction sums all n weights.
const zipfTableMaxKeys = 1 << 20

// zipfHeadKeys is how many of the hottest keys zipfHybridDist draws from an alias table: 32 KiB of columns,
// which stay in a core's caches. With s = 0.99 over 100k keys they take 72% of the draws.
const zipfHeadKeys = 4096

// zipfHybridDist draws the same distribution as zipfDist, its hottest keys from an alias table and the
// others by rejection-inversion over the ranks past them. The head takes each draw with its share of the
// total weight, so every key keeps its exact probability.
//
// Why not one alias table over all the keys: on make bench's Zipf row (100k keys, 800 KB of columns) its
// draws miss the caches, which the server shares. Profiled live, the draws took 14-16% of the generator's
// CPU with one table, about 9% with rejection-inversion alone (logarithms and exponentials, but no memory),
// and about 5% with this. BenchmarkKeyDist, whose caches hold the whole table, says the opposite (29 ns a
// draw with one table, 45 ns with this): it is not the case that matters.
type zipfHybridDist struct {
	head  zipfTableDist
	headP uint64    // the head's share of the total weight, times 2^64; any draw when tail is nil
	tail  *zipfDist // ranks past the head; nil when the head holds every key
}

func (z *zipfHybridDist) next() uint64 {
	if z.tail == nil || z.head.r.Uint64() < z.headP {
		return z.head.next()
	}
	return z.tail.next()
}

// newZipfHybridDist is zipfHybridDist over n keys, the first head of them (at least one) from a table.
func newZipfHybridDist(r *rand.Rand, s float64, n, head uint64) (*zipfHybridDist, error) {
	h, err := newZipfTableDist(r, s, min(n, max(head, 1)))
	if err != nil {
		return nil, err
	}
	z := &zipfHybridDist{head: *h}
	if n <= uint64(len(h.t.cols)) {
		return z, nil
	}
	// Sums of up to zipfTableMaxKeys float64 terms: their rounding is far below any run's sampling noise.
	var headW, tailW float64
	for k := uint64(1); k <= n; k++ {
		w := math.Pow(float64(k), -s)
		if k <= uint64(len(h.t.cols)) {
			headW += w
		} else {
			tailW += w
		}
	}
	z.headP = math.MaxUint64 // a share that rounds to 1 (a float64 of 2^64 does not convert)
	if p := headW / (headW + tailW); p < 1 {
		z.headP = uint64(p * (1 << 64))
	}
	z.tail = newZipfRange(r, s, uint64(len(h.t.cols))+1, n)
	return z, nil
}

// zipfTableDist draws the same distribution as zipfDist from an alias table (Vose's method): two random
// numbers and one table read per draw, where rejection-inversion needs two to four logarithms and
// exponentials. At pipeline 16 the generator draws close to a million keys a second on the same two cores
// as the server it measures. zipfHybridDist keeps the table small enough to stay in the caches.
type zipfTableDist struct {
	r *rand.Rand
	t *aliasTable
}

func (z *zipfTableDist) next() uint64 {
	i := z.r.Uint64N(uint64(len(z.t.cols)))
	c := z.t.cols[i]
	if uint32(z.r.Uint64()>>32) < c.keep {
		return i
	}
	return uint64(c.alias)
}

// aliasTable: draw a column i uniformly, keep i with probability cols[i].keep/2^32, else take cols[i].alias.
//
// A column's two fields share one 8-byte entry, so a draw reads one word: in separate arrays, a draw that
// missed the caches missed twice. 32 bits of keep threshold keep the table exact to 1e-9
// (TestAliasTableIsExact).
type aliasTable struct {
	cols []aliasColumn
}

type aliasColumn struct {
	keep  uint32 // math.MaxUint32 for a column kept whole, whose alias is itself
	alias uint32
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
	t := &aliasTable{cols: make([]aliasColumn, n)}
	for len(small) > 0 && len(large) > 0 {
		sm, lg := small[len(small)-1], large[len(large)-1]
		small = small[:len(small)-1]
		t.cols[sm] = aliasColumn{keep: keepThreshold(p[sm]), alias: lg}
		p[lg] -= 1 - p[sm] // lg gives sm's column the share sm does not keep
		if p[lg] < 1 {
			large = large[:len(large)-1]
			small = append(small, lg)
		}
	}
	// What is left keeps its whole column (its p is 1 up to rounding).
	for _, i := range append(small, large...) {
		t.cols[i] = aliasColumn{keep: math.MaxUint32, alias: i}
	}
	return t
}

// keepThreshold maps a share in [0, 1] to the threshold a uniform uint32 is compared with.
func keepThreshold(p float64) uint32 {
	if p >= 1 {
		return math.MaxUint32
	}
	return uint32(p * (1 << 32))
}
