// Package slab is leasecached's memory arena: the -m limit carved into 1 MiB
// pages that are handed out lazily, each page cut into equal chunks of one
// size class. The limit can change at run time (cache_memlimit): pages
// beyond a lowered limit are handed back by their owners and freed.
//
// Contract:
//   - Every byte of item memory lives in pages of PageSize bytes mapped
//     outside the Go heap (offheap.go says why) and holding no Go pointers, so
//     the garbage collector never scans them, never has per-item objects to
//     track, and never paces itself on them.
//   - A chunk is addressed by a Ref (page id and byte offset packed into
//     RefBits bits) that an index can store in a uint64 next to hash bits.
//   - Arena owns the global page budget and is safe for concurrent use.
//     Allocator is one shard's view (its size classes, free lists, CLOCK hand
//     positions); it is NOT safe for concurrent use: its owner serialises
//     access (the shard mutex). A page belongs to exactly one Allocator from
//     when it is taken until that Allocator releases it, so owners never
//     share chunk memory.
//   - A free chunk keeps its free-list link in its first LinkSize bytes and
//     StateFree in the byte at StateOffset; everything else in a chunk belongs
//     to the caller, who must keep a non-zero state byte at StateOffset while
//     the chunk is in use.
package slab

import (
	"fmt"
	"math"
)

const (
	// PageSize is the unit of the memory budget and of page reassignment
	// between size classes (memcached's slab page).
	PageSize = 1 << 20
	// ChunkAlign keeps every chunk size (and so every chunk offset) a multiple
	// of 8, so 8-byte header fields never straddle cache lines needlessly and
	// offsets have their low bits free.
	ChunkAlign = 8
	// MinChunk is the smallest chunk size (memcached's -n default, which
	// stats settings reports as chunk_size): a 16-byte item header plus a
	// short key and value.
	MinChunk = 48
	// FineUpTo is where class spacing switches from fine to geometric.
	// Below it consecutive classes are ChunkAlign bytes apart, so an item
	// wastes at most 7 bytes to rounding (3.5 on average) instead of up to a
	// quarter of its size: a 134-byte item (14-byte key, 100-byte value,
	// 20-byte header) gets a 136-byte chunk where a 1.25 series from 48 gave
	// it 152. Small items are where per-item bytes count the most, and fine
	// steps up to 256 still leave the default table at 62 classes, within
	// memcached's 63 usable class ids (stats cachedump and stats slabs
	// clients expect ids below 64).
	FineUpTo = 256
	// ChunkMax is the largest chunk (memcached's slab_chunk_max: half a page).
	// Larger items are stored as chains of chunks by the caller.
	ChunkMax = PageSize / 2
	// GrowthFactor is the ratio between consecutive chunk sizes, memcached's
	// default -f. A finer factor wastes less per item but needs more classes,
	// each of which needs at least one page per shard.
	GrowthFactor = 1.25
	// MaxClasses bounds the class table so a class id always fits in a byte.
	MaxClasses = 255
)

// Classes is an immutable table of chunk sizes, ascending, the last one
// being exactly the configured maximum.
type Classes struct {
	size    []uint32
	perPage []uint32
	// sizeOf is size indexed by a page's uint8 class: Allocator.Chunk, on every item access, looks sizes up
	// here without a bounds check.
	sizeOf [1 << 8]uint32
	// fineTop is the largest size of the ChunkAlign-spaced classes at the start of the table (0 when
	// there are none): For computes the class of a size up to it instead of searching.
	fineTop int
}

// NewClasses builds the size class table: ChunkAlign steps from minChunk up
// to FineUpTo, then growing by factor up to maxChunk (inclusive, always the
// last class).
func NewClasses(minChunk, maxChunk int, factor float64) (*Classes, error) {
	switch {
	case minChunk < LinkSize+1 || minChunk%ChunkAlign != 0:
		return nil, fmt.Errorf("slab: min chunk %d must be a multiple of %d and above %d", minChunk, ChunkAlign, LinkSize)
	case maxChunk < minChunk || maxChunk > PageSize || maxChunk%ChunkAlign != 0:
		return nil, fmt.Errorf("slab: max chunk %d must be in [%d, %d] and a multiple of %d", maxChunk, minChunk, PageSize, ChunkAlign)
	case !(factor > 1) || math.IsInf(factor, 0):
		return nil, fmt.Errorf("slab: growth factor %v must be > 1", factor)
	}
	c := &Classes{}
	for n := minChunk; n < min(FineUpTo, maxChunk); n += ChunkAlign {
		c.size = append(c.size, uint32(n))
		c.fineTop = n
	}
	size := float64(max(minChunk, FineUpTo))
	for {
		n := int(size)
		if rem := n % ChunkAlign; rem != 0 {
			n += ChunkAlign - rem
		}
		if n >= maxChunk {
			break
		}
		if len(c.size) == 0 || uint32(n) > c.size[len(c.size)-1] {
			c.size = append(c.size, uint32(n))
		}
		size *= factor
	}
	c.size = append(c.size, uint32(maxChunk))
	if len(c.size) > MaxClasses {
		return nil, fmt.Errorf("slab: %d size classes exceed the limit of %d (raise the growth factor)", len(c.size), MaxClasses)
	}
	c.perPage = make([]uint32, len(c.size))
	for i, s := range c.size {
		c.perPage[i] = PageSize / s
		c.sizeOf[i] = s
	}
	return c, nil
}

// DefaultClasses is the table built from MinChunk, ChunkMax and GrowthFactor.
func DefaultClasses() *Classes {
	c, err := NewClasses(MinChunk, ChunkMax, GrowthFactor)
	if err != nil {
		panic(err) // constants are wrong: a programming error
	}
	return c
}

// Count is the number of classes; ids are 0..Count()-1.
func (c *Classes) Count() int { return len(c.size) }

// Size is the chunk size of class id.
func (c *Classes) Size(id int) int { return int(c.size[id]) }

// PerPage is how many chunks of class id one page holds.
func (c *Classes) PerPage(id int) int { return int(c.perPage[id]) }

// Largest is the id of the biggest class (chunk size == max chunk).
func (c *Classes) Largest() int { return len(c.size) - 1 }

// For returns the smallest class whose chunks hold n bytes, or false when n
// exceeds the largest chunk.
//
// Every store asks, most of them for small items, whose classes are ChunkAlign apart from the smallest
// chunk: for those the class is a division, not a search.
func (c *Classes) For(n int) (int, bool) {
	if n <= c.fineTop {
		return (max(n, int(c.size[0])) - int(c.size[0]) + ChunkAlign - 1) / ChunkAlign, true
	}
	if n > int(c.size[len(c.size)-1]) {
		return 0, false
	}
	lo, hi := 0, len(c.size)-1 // invariant: size[hi] >= n
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if int(c.size[mid]) >= n {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo, true
}
