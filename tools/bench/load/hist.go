package load

import (
	"math"
	"math/bits"
	"time"
)

// The latency histogram is log-linear (HDR style): exact below histLinear nanoseconds, then histSub
// buckets per power of two, so any recorded value is reported within 1/histSub (1.6%) of itself. It is a
// fixed array: recording is one increment, no allocation, and merging per-connection histograms is a sum.
const (
	histLinearBits = 7
	histLinear     = 1 << histLinearBits // values below this are their own bucket
	histSub        = histLinear / 2      // buckets per power of two above histLinear
	histBuckets    = histLinear + (64-histLinearBits)*histSub
)

type histogram struct {
	counts [histBuckets]uint64
	total  uint64
	sum    uint64
	min    uint64
	max    uint64
}

func histIndex(v uint64) int {
	if v < histLinear {
		return int(v)
	}
	e := bits.Len64(v) - histLinearBits // >= 1
	m := v >> uint(e)                   // in [histSub, histLinear)
	return histLinear + (e-1)*histSub + int(m-histSub)
}

// histValue is a representative value of bucket i: the middle of its range.
func histValue(i int) uint64 {
	if i < histLinear {
		return uint64(i)
	}
	e := (i-histLinear)/histSub + 1
	m := uint64((i-histLinear)%histSub + histSub)
	return m<<uint(e) + (uint64(1)<<uint(e))/2
}

func (h *histogram) record(d time.Duration) {
	v := uint64(0)
	if d > 0 {
		v = uint64(d)
	}
	h.counts[histIndex(v)]++
	if h.total == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.total++
	h.sum += v
}

func (h *histogram) merge(o *histogram) {
	if o.total == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.total == 0 || o.min < h.min {
		h.min = o.min
	}
	if o.max > h.max {
		h.max = o.max
	}
	h.total += o.total
	h.sum += o.sum
}

// percentile returns the value at quantile q (0 < q <= 1): the smallest recorded bucket such that at
// least q of all values are at or below it, clamped to the exact min and max.
func (h *histogram) percentile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.total)))
	if rank < 1 {
		rank = 1
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			v := histValue(i)
			if v < h.min {
				v = h.min
			}
			if v > h.max {
				v = h.max
			}
			return time.Duration(v)
		}
	}
	return time.Duration(h.max)
}

func (h *histogram) mean() time.Duration {
	if h.total == 0 {
		return 0
	}
	return time.Duration(h.sum / h.total)
}
