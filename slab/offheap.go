package slab

import (
	"fmt"
	"runtime"
	"unsafe"
)

// Off-heap memory. Pages and hash tables are mapped straight from the kernel rather than allocated on the
// Go heap, for two measured reasons:
//   - The garbage collector paces itself on heap size: with 1 GiB of pages on the heap the next cycle
//     is due at about 2 GiB, so a released page or an outgrown hash table stays resident as garbage
//     for a long time. That garbage is most of why RSS used to end at 1.187x the -m limit. Mapped
//     memory goes back to the kernel the moment it is unmapped, so RSS tracks what is in use.
//   - Nothing in this memory is ever a Go pointer, so the collector has nothing to gain from seeing it:
//     a GC cycle costs the same with 100 thousand or 20 million items (shard's BenchmarkGCWithItems).
//
// Where mapping is not available (offheap_other.go) the same functions fall back to the Go heap.

// wordSize is the size of a uint64.
const wordSize = int(unsafe.Sizeof(uint64(0)))

// Words returns n zeroed uint64s outside the Go heap (n > 0). The caller gives them back with FreeWords
// and must not keep any slice of them after that.
func Words(n int) ([]uint64, error) {
	if n <= 0 {
		return nil, fmt.Errorf("slab: %d words requested", n)
	}
	b, err := mapTable(n * wordSize)
	if err != nil {
		return nil, fmt.Errorf("slab: mapping %d words: %w", n, err)
	}
	return unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(b))), n), nil
}

// FreeWords gives back memory returned by Words.
func FreeWords(w []uint64) {
	if len(w) == 0 {
		return
	}
	unmapBytes(wordBytes(w))
}

func wordBytes(w []uint64) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(w))), len(w)*wordSize)
}

// WordBuf is a []uint64 outside the Go heap (see Words) that is also given back if its owner forgets to:
// when the WordBuf becomes garbage. Free gives it back at once.
type WordBuf struct {
	W       []uint64
	cleanup runtime.Cleanup
}

// NewWordBuf returns a WordBuf of n zeroed words.
func NewWordBuf(n int) (*WordBuf, error) {
	w, err := Words(n)
	if err != nil {
		return nil, err
	}
	b := &WordBuf{W: w}
	b.cleanup = runtime.AddCleanup(b, FreeWords, w)
	return b, nil
}

// Discard gives the words' memory back to the system but keeps their addresses valid: until Free they
// read as zero, or as what is written after. It is for a table that lock-free readers may still be
// reading (shard's outgrown index tables): its memory is not held while they finish.
func (b *WordBuf) Discard() {
	if len(b.W) > 0 {
		discardBytes(wordBytes(b.W))
	}
}

// Free gives the words back; b.W must not be used after.
func (b *WordBuf) Free() {
	b.cleanup.Stop()
	FreeWords(b.W)
	b.W = nil
}
