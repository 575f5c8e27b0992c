package slab

import (
	"runtime"
	"testing"
)

// Word buffers come zeroed, hold what is written, and add nothing to the Go heap.
func TestWordBuf(t *testing.T) {
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	const n = 1 << 20 // 8 MiB
	b, err := NewWordBuf(n)
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range b.W {
		if w != 0 {
			t.Fatalf("word %d not zeroed", i)
		}
		b.W[i] = uint64(i)
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	if grown := int64(m1.HeapAlloc) - int64(m0.HeapAlloc); grown > 1<<20 {
		t.Fatalf("heap grew %d bytes for an off-heap buffer of %d", grown, n*8)
	}
	if b.W[n-1] != n-1 {
		t.Fatal("lost a write")
	}
	b.Free()
	if b.W != nil {
		t.Fatal("freed buffer still usable")
	}
	if _, err := NewWordBuf(0); err == nil {
		t.Fatal("empty buffer accepted")
	}
}
