// Package hotkeys finds the most requested keys of a request stream in bounded memory: a sampler picks
// about one request in R, and a Space-Saving summary per time window counts the sampled keys (see
// doc/design/hotkeys.md). It knows nothing of the server: a key is a byte string whose 64-bit hash the
// caller computes.
package hotkeys

import (
	"bytes"
	"math/bits"
	"slices"
)

// KeyMax is the longest key a summary stores: memcached's key limit. A longer key is not counted.
const KeyMax = 250

// MaxCapacity bounds a summary's entries: entry and index positions are uint16.
const MaxCapacity = 1 << 14

// Summary is Space-Saving (Metwally, Agrawal, El Abbadi 2005) over m entries: a key that is counted with
// weight w (the requests a sample stands for) is either monitored, and its count goes up by w, or it
// replaces the entry with the smallest count c and takes count c+w with error c. Every count is at least its key's true count and at most Err above it,
// and the smallest count is at most Total/m, so a key counted more than Total/m times is always monitored.
//
// All memory is allocated by NewSummary; Offer allocates nothing. It is not safe for concurrent use.
type Summary struct {
	n       int
	total   uint64 // the weights offered
	samples uint64 // the offers
	ents    []entry
	keys    []byte   // entry e's key is keys[e*KeyMax:][:ents[e].keyLen]
	heap    []uint16 // the entries, as a binary min-heap on count
	index   []uint16 // open addressing with linear probing on the hash: entry+1, 0 for an empty slot
	mask    uint64
}

// entry is one monitored key; 24 bytes, so that the fields Offer walks stay apart from the key bytes.
type entry struct {
	hash   uint64
	count  uint32
	err    uint32
	reads  uint32 // of the count - err hits seen while monitored, the reads
	pos    uint16 // where the entry is in heap
	keyLen uint8
}

// NewSummary returns a summary of capacity entries (1 to MaxCapacity).
func NewSummary(capacity int) *Summary {
	capacity = min(max(capacity, 1), MaxCapacity)
	slots := 1 << bits.Len(uint(2*capacity-1)) // a power of two at least twice the entries: short probes
	return &Summary{
		ents:  make([]entry, capacity),
		keys:  make([]byte, capacity*KeyMax),
		heap:  make([]uint16, capacity),
		index: make([]uint16, slots),
		mask:  uint64(slots - 1),
	}
}

// Bytes is the memory a summary of capacity entries holds: what NewSummary allocates.
func Bytes(capacity int) int {
	capacity = min(max(capacity, 1), MaxCapacity)
	slots := 1 << bits.Len(uint(2*capacity-1))
	return capacity*(entrySize+KeyMax+2) + 2*slots
}

// entrySize is sizeof(entry), asserted by a test.
const entrySize = 24

// Capacity is the number of entries.
func (s *Summary) Capacity() int { return len(s.ents) }

// Total is the weight of the keys offered since the last Reset: the requests they stand for.
func (s *Summary) Total() uint64 { return s.total }

// Samples is how many keys were offered since the last Reset.
func (s *Summary) Samples() uint64 { return s.samples }

// Reset forgets every key.
func (s *Summary) Reset() {
	s.n, s.total, s.samples = 0, 0, 0
	clear(s.index)
}

// Offer counts one request of key (hashed h), a write or a read. A key longer than KeyMax is not counted.
func (s *Summary) Offer(key []byte, h uint64, write bool) { s.OfferN(key, h, write, 1) }

// OfferN counts a sample of key (hashed h) that stands for w requests (w >= 1), writes or reads. A key
// longer than KeyMax is not counted.
func (s *Summary) OfferN(key []byte, h uint64, write bool, w uint32) {
	if len(key) > KeyMax {
		return
	}
	s.total += uint64(w)
	s.samples++
	var read uint32
	if !write {
		read = w
	}
	slot, e := s.find(key, h)
	if e >= 0 {
		en := &s.ents[e]
		en.count += w
		en.reads += read
		s.down(int(en.pos))
		return
	}
	if s.n < len(s.ents) { // a free entry: the new key's count is exact
		e = s.n
		s.n++
		s.ents[e] = entry{hash: h, count: w, reads: read, pos: uint16(e), keyLen: uint8(len(key))}
		s.heap[e] = uint16(e)
		copy(s.keys[e*KeyMax:], key)
		s.index[slot] = uint16(e + 1)
		s.up(e)
		return
	}
	// Full: the key takes over the entry with the smallest count.
	e = int(s.heap[0])
	s.unindex(e)
	en := &s.ents[e]
	en.err = en.count
	en.count += w
	en.hash, en.reads, en.keyLen = h, read, uint8(len(key))
	copy(s.keys[e*KeyMax:], key)
	slot, _ = s.find(key, h) // unindex may have moved the slots after it
	s.index[slot] = uint16(e + 1)
	s.down(0)
}

// find returns the entry of key (hashed h) and its slot, or -1 and the empty slot where it would go.
func (s *Summary) find(key []byte, h uint64) (slot uint64, e int) {
	for i := h & s.mask; ; i = (i + 1) & s.mask {
		v := s.index[i]
		if v == 0 {
			return i, -1
		}
		en := &s.ents[v-1]
		if en.hash == h && bytes.Equal(s.key(int(v-1)), key) {
			return i, int(v - 1)
		}
	}
}

func (s *Summary) key(e int) []byte { return s.keys[e*KeyMax:][:s.ents[e].keyLen] }

// unindex removes entry e from the index, moving back the slots behind it that would no longer be found
// (deletion from a linear-probing table without tombstones).
func (s *Summary) unindex(e int) {
	i := s.ents[e].hash & s.mask
	for s.index[i] != uint16(e+1) {
		i = (i + 1) & s.mask
	}
	for {
		s.index[i] = 0
		j := i
		for {
			j = (j + 1) & s.mask
			v := s.index[j]
			if v == 0 {
				return
			}
			home := s.ents[v-1].hash & s.mask
			// The entry at j may stay if its home lies cyclically in (i, j].
			if (i < j && i < home && home <= j) || (i > j && (i < home || home <= j)) {
				continue
			}
			s.index[i] = v
			i = j
			break
		}
	}
}

func (s *Summary) less(a, b int) bool { return s.ents[s.heap[a]].count < s.ents[s.heap[b]].count }

func (s *Summary) swap(a, b int) {
	s.heap[a], s.heap[b] = s.heap[b], s.heap[a]
	s.ents[s.heap[a]].pos = uint16(a)
	s.ents[s.heap[b]].pos = uint16(b)
}

func (s *Summary) up(p int) {
	for p > 0 {
		parent := (p - 1) / 2
		if !s.less(p, parent) {
			return
		}
		s.swap(p, parent)
		p = parent
	}
}

func (s *Summary) down(p int) {
	for {
		c := 2*p + 1
		if c >= s.n {
			return
		}
		if c+1 < s.n && s.less(c+1, c) {
			c++
		}
		if !s.less(c, p) {
			return
		}
		s.swap(p, c)
		p = c
	}
}

// Count is one monitored key and its counts.
type Count struct {
	Key  string
	Hash uint64
	// Count is Space-Saving's estimate: at least the key's true count, at most Err above it.
	Count uint64
	Err   uint64
	// Reads are the reads among the Count-Err requests seen while the key was monitored.
	Reads uint64
}

// AppendCounts appends every monitored key to dst, in no particular order.
func (s *Summary) AppendCounts(dst []Count) []Count {
	for e := range s.n {
		en := &s.ents[e]
		dst = append(dst, Count{Key: string(s.key(e)), Hash: en.hash, Count: uint64(en.count), Err: uint64(en.err),
			Reads: uint64(en.reads)})
	}
	return dst
}

// Top returns the n keys with the largest counts, largest first (ties by key).
func (s *Summary) Top(n int) []Count {
	cs := s.AppendCounts(nil)
	sortCounts(cs)
	return cs[:min(n, len(cs))]
}

func sortCounts(cs []Count) {
	slices.SortFunc(cs, func(a, b Count) int {
		switch {
		case a.Count != b.Count:
			if a.Count > b.Count {
				return -1
			}
			return 1
		case a.Key < b.Key:
			return -1
		case a.Key > b.Key:
			return 1
		}
		return 0
	})
}
