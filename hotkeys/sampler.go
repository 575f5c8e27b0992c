package hotkeys

import "math"

// Sampler picks about one request in Rate for the summary. Its per-request cost is Due: one subtraction
// and one branch that is almost never taken. The gap to the next sampled request is drawn uniformly from
// 1 to 2*Rate-1 (mean Rate), so a client that cycles through Rate keys in a fixed order does not have the
// same key sampled every time. Each event loop has its own: it is not safe for concurrent use.
type Sampler struct {
	left int // requests until the next sampled one; the request that brings it to 0 or below is sampled
	rate int // 0: off
	rng  uint64
}

// NewSampler returns a sampler of one request in rate (rate < 1: off, nothing is ever sampled), whose
// gaps come from seed.
func NewSampler(rate int, seed uint64) Sampler {
	s := Sampler{rate: max(rate, 0), rng: seed | 1}
	s.left = s.gap()
	return s
}

// Rate is the mean gap between sampled requests, 0 when the sampler is off.
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
	s.left += s.gap()
	if i < 0 { // Due was not called for these n: they are not sampled
		return -1
	}
	return i
}

// gap draws the requests until the next sampled one (xorshift64*); off, more than ever arrive.
func (s *Sampler) gap() int {
	if s.rate == 0 {
		return math.MaxInt / 2
	}
	s.rng ^= s.rng >> 12
	s.rng ^= s.rng << 25
	s.rng ^= s.rng >> 27
	r := s.rng * 2685821657736338717
	return 1 + int((r>>33)%uint64(2*s.rate-1))
}
