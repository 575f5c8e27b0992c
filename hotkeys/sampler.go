package hotkeys

import (
	"math"
	"time"
)

// MaxRate bounds an adaptive sampler's rate: at one request in 65536, a loop serving 4096 * 65536
// (268M) requests a second would still sample its target.
const MaxRate = 1 << 16

// Sampler picks about one request in Rate for the summary. Its per-request cost is Due: one subtraction
// and one branch that is almost never taken. The gap to the next sampled request is drawn uniformly from
// 1 to 2*Rate-1 (mean Rate), so a client that cycles through Rate keys in a fixed order does not have the
// same key sampled every time. A sampled request stands for the requests of its gap: its weight (Taken)
// is the rate the gap was drawn with, so counts are in requests whatever the rate was.
//
// An adaptive sampler (target > 0) keeps the samples near target a second whatever the traffic, so the
// cost of the summary is bounded by time rather than by requests: it doubles its rate as soon as one
// second has taken target samples, and at the first sample of a new second scales the rate by what the
// last second took (see doc/design/hotkeys.md). Each event loop has its own: it is not safe for
// concurrent use.
type Sampler struct {
	left   int // requests until the next sampled one; the request that brings it to 0 or below is sampled
	rate   int // 0: off
	drawn  int // the rate the pending gap was drawn with
	weight int // the rate the gap that Next last ended was drawn with
	rng    uint64
	target int   // samples a second an adaptive sampler aims at; 0: the rate is fixed
	sec    int64 // the second taken counts samples of
	taken  int
}

// NewSampler returns a sampler of one request in rate (rate < 1: off, nothing is ever sampled), whose
// gaps come from seed.
func NewSampler(rate int, seed uint64) Sampler {
	s := Sampler{rate: max(rate, 0), rng: seed | 1}
	s.left = s.gap()
	return s
}

// NewAdaptiveSampler returns a sampler that starts at one request in rate and then aims at target
// samples a second (rate < 1: off).
func NewAdaptiveSampler(rate, target int, seed uint64) Sampler {
	s := NewSampler(rate, seed)
	s.target = max(target, 1)
	return s
}

// Rate is the current mean gap between sampled requests, 0 when the sampler is off.
func (s *Sampler) Rate() int { return s.rate }

// Due counts n requests and reports whether at least one of them is sampled; if so, call Next until it
// returns -1.
func (s *Sampler) Due(n int) bool {
	s.left -= n
	return s.left <= 0
}

// Next returns the index (0 to n-1) of the next sampled one among the n requests Due last counted, or -1
// once there are no more.
func (s *Sampler) Next(n int) int {
	if s.left > 0 {
		return -1
	}
	i := n - 1 + s.left
	s.weight = s.drawn
	s.left += s.gap()
	if i < 0 { // Due was not called for these n: they are not sampled
		return -1
	}
	return i
}

// Taken records that the request Next returned was counted at now (nanoseconds) and returns its weight:
// how many requests it stands for. An adaptive sampler adjusts its rate here, for the gaps drawn next.
func (s *Sampler) Taken(now int64) uint32 {
	w := uint32(max(s.weight, 1))
	if s.target == 0 || s.rate == 0 {
		return w
	}
	if sec := now / int64(time.Second); sec != s.sec {
		if secs := sec - s.sec; secs > 0 && s.sec != 0 {
			perSec := int64(s.taken) / secs
			s.rate = int(min(max((int64(s.rate)*perSec+int64(s.target)/2)/int64(s.target), 1), MaxRate))
		}
		s.sec, s.taken = sec, 0
	}
	if s.taken++; s.taken >= s.target && s.rate < MaxRate {
		s.rate, s.taken = 2*s.rate, s.target/2
	}
	return w
}

// gap draws the requests until the next sampled one (xorshift64*); off, more than ever arrive.
func (s *Sampler) gap() int {
	s.drawn = s.rate
	if s.rate == 0 {
		return math.MaxInt / 2
	}
	s.rng ^= s.rng >> 12
	s.rng ^= s.rng << 25
	s.rng ^= s.rng >> 27
	r := s.rng * 2685821657736338717
	return 1 + int((r>>33)%uint64(2*s.rate-1))
}
