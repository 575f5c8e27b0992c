package slab

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
)

// Ref addresses a chunk: page id in the high bits, byte offset in the page
// in the low PageShift bits. Only the low RefBits bits are ever used, so a
// hash index can keep the rest of a uint64 for its own bits.
type Ref uint64

const (
	// PageShift is log2(PageSize): the width of the offset part of a Ref.
	PageShift = 20
	// RefBits is how many low bits of a Ref are significant.
	RefBits = 40
	// MaxPages is the most pages a Ref can address (1 TiB of items).
	MaxPages = 1 << (RefBits - PageShift)
	// NilRef is no chunk. Its offset is not a multiple of ChunkAlign, so it
	// can never be the address of a real chunk, and it fits in RefBits.
	NilRef Ref = 1<<RefBits - 1

	// LinkSize is the space at the start of a free chunk holding the Ref of
	// the next free chunk.
	LinkSize = 8
	// StateOffset is the byte, inside every chunk, that says whether it is
	// free (StateFree); users put their own non-zero state there.
	StateOffset = 24
	// StateFree marks a free chunk.
	StateFree = 0
)

// MakeRef packs a page id and an offset.
func MakeRef(page uint32, off uint32) Ref { return Ref(page)<<PageShift | Ref(off) }

// Page is the page id part of r.
func (r Ref) Page() uint32 { return uint32(r >> PageShift) }

// Offset is the byte offset part of r.
func (r Ref) Offset() uint32 { return uint32(r & (PageSize - 1)) }

// Arena is the global page budget shared by all shards: a preallocated page
// table filled lazily. Taking a page is lock-free; each page, once taken, is
// read and written only by the Allocator that took it.
type Arena struct {
	pages [][]byte // indexed by page id; slot i written once, by its taker
	class []uint8  // size class of each page, owned like the page itself
	taken atomic.Int64
}

// NewArena sizes the page table for limit bytes (at least one page).
func NewArena(limit int64) (*Arena, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("slab: memory limit %d must be positive", limit)
	}
	n := limit / PageSize
	if n < 1 {
		n = 1
	}
	if n > MaxPages {
		return nil, fmt.Errorf("slab: memory limit %d exceeds the addressable %d pages", limit, MaxPages)
	}
	return &Arena{pages: make([][]byte, n), class: make([]uint8, n)}, nil
}

// MaxPages is the page budget.
func (a *Arena) MaxPages() int { return len(a.pages) }

// PagesTaken is how many pages have been handed out so far (never returned:
// pages are reassigned between classes, not freed).
func (a *Arena) PagesTaken() int { return int(a.taken.Load()) }

// takePage reserves a page id from the budget and allocates its memory, or
// reports false when the budget is spent.
func (a *Arena) takePage() (uint32, bool) {
	for {
		n := a.taken.Load()
		if n >= int64(len(a.pages)) {
			return 0, false
		}
		if a.taken.CompareAndSwap(n, n+1) {
			a.pages[n] = make([]byte, PageSize)
			return uint32(n), true
		}
	}
}

// page returns the memory of page id (the caller owns the page).
func (a *Arena) page(id uint32) []byte { return a.pages[id] }

// chunkAt returns size bytes at r, capacity-limited so appends cannot spill
// into the neighbour chunk.
func (a *Arena) chunkAt(r Ref, size int) []byte {
	off := int(r.Offset())
	return a.pages[r.Page()][off : off+size : off+size]
}

func readLink(b []byte) Ref     { return Ref(binary.LittleEndian.Uint64(b)) }
func writeLink(b []byte, r Ref) { binary.LittleEndian.PutUint64(b, uint64(r)) }
