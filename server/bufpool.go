package server

import (
	"math/bits"
	"sync"
	"unsafe"
)

// bufPools recycle the buffers large requests are gathered in (bigreq.go), one pool per power-of-two
// capacity, so steady large sets allocate nothing. A pool keeps a pointer to its buffer's first byte, not
// a slice: putting a slice in an interface would allocate.
var bufPools [40]sync.Pool

// getBuf returns a buffer of length n whose capacity is n rounded up to a power of two.
func getBuf(n int) []byte {
	i := bits.Len(uint(n - 1))
	if p, _ := bufPools[i].Get().(*byte); p != nil {
		return unsafe.Slice(p, 1<<i)[:n]
	}
	return make([]byte, n, 1<<i)
}

// putBuf gives b back for reuse; b must not be used afterwards. Buffers not from getBuf are dropped.
func putBuf(b []byte) {
	c := cap(b)
	if c == 0 || c&(c-1) != 0 {
		return
	}
	bufPools[bits.Len(uint(c-1))].Put(unsafe.SliceData(b))
}
