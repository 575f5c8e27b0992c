package main

import (
	"fmt"
	"math"
	"math/rand/v2"
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

func newZipfDist(r *rand.Rand, s float64, n uint64) (*zipfDist, error) {
	if !(s > 0) || math.IsInf(s, 0) {
		return nil, fmt.Errorf("zipf exponent %v: must be a positive number", s)
	}
	if n == 0 {
		return nil, fmt.Errorf("zipf needs at least one key")
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

// newKeyDist builds the distribution named by kind ("uniform" or "zipf") over n keys.
func newKeyDist(kind string, s float64, n uint64, r *rand.Rand) (keyDist, error) {
	switch kind {
	case "uniform":
		return &uniformDist{r: r, n: n}, nil
	case "zipf":
		return newZipfDist(r, s, n)
	}
	return nil, fmt.Errorf("key distribution %q: want uniform or zipf", kind)
}
