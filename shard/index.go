package shard

import "github.com/leasecached/leasecached/slab"

// index is one shard's hash table: open addressing with linear probing over
// a []uint64, so it holds no Go pointers and costs the GC nothing. An entry
// packs everything needed to probe and to delete without touching items:
//
//	bit 63      used
//	bits 55..62 distance from the entry's home slot (home = slot - dist)
//	bits 40..54 tag: 15 hash bits independent of the slot bits
//	bits 0..39  chunk ref (slab.RefBits)
//
// A lookup only compares keys (in chunk memory) for entries whose home and
// tag both match. Deletion is Knuth's algorithm R (backward shift), which
// needs each entry's home: that is why the distance is stored.
type index struct {
	slots []uint64
	mask  uint64
	count int
}

const (
	entryUsed = 1 << 63
	distShift = 55
	distMask  = 0xff
	// indexMaxDist is the longest probe an entry may have (what its distance
	// field can hold); an insert that would go further grows the table.
	indexMaxDist = distMask
	tagShift     = slab.RefBits
	tagMask      = 1<<15 - 1
	// hashTagShift selects the hash bits used as tag: the top 15, disjoint
	// from the slot bits (low) and the shard bits (see shardOf).
	hashTagShift = 49
	refMask      = 1<<slab.RefBits - 1

	// indexInitialSlots is a shard's starting table size (32 KiB).
	indexInitialSlots = 1 << 12
	// The table doubles when count would exceed indexLoadNum/indexLoadDen of
	// its size, keeping linear probes short.
	indexLoadNum, indexLoadDen = 3, 4
)

func newIndex(slots int) index {
	return index{slots: make([]uint64, slots), mask: uint64(slots - 1)}
}

func tagOf(h uint64) uint64      { return (h >> hashTagShift) & tagMask }
func entryRef(e uint64) slab.Ref { return slab.Ref(e & refMask) }
func entryDist(e uint64) uint64  { return (e >> distShift) & distMask }
func withDist(e, d uint64) uint64 {
	return e&^(distMask<<distShift) | d<<distShift
}

// probe walks the entries that may hold a key of hash h.
type probe struct {
	i, dist, tag uint64
}

func (x *index) probe(h uint64) probe { return probe{i: h & x.mask, tag: tagOf(h)} }

// next returns the next candidate entry (same home and tag), its slot and
// ref, or false when the probe sequence ends.
func (x *index) next(p *probe) (uint64, slab.Ref, bool) {
	for p.dist <= indexMaxDist {
		e := x.slots[p.i]
		if e == 0 {
			return 0, 0, false
		}
		i, d := p.i, p.dist
		p.i = (p.i + 1) & x.mask
		p.dist++
		if entryDist(e) == d && (e>>tagShift)&tagMask == p.tag {
			return i, entryRef(e), true
		}
	}
	return 0, 0, false
}

// slotOf finds the slot holding ref (which must be indexed under hash h).
func (x *index) slotOf(h uint64, ref slab.Ref) (uint64, bool) {
	i := h & x.mask
	for d := uint64(0); d <= indexMaxDist; d++ {
		e := x.slots[i]
		if e == 0 {
			return 0, false
		}
		if entryRef(e) == ref {
			return i, true
		}
		i = (i + 1) & x.mask
	}
	return 0, false
}

// needsGrow says whether one more entry would exceed the load factor.
func (x *index) needsGrow() bool {
	return (x.count+1)*indexLoadDen > len(x.slots)*indexLoadNum
}

// insert adds ref under hash h; false if its probe would be too long (the
// caller grows the table and retries).
func (x *index) insert(h uint64, ref slab.Ref) bool {
	i := h & x.mask
	for d := uint64(0); d <= indexMaxDist; d++ {
		if x.slots[i] == 0 {
			x.slots[i] = entryUsed | d<<distShift | tagOf(h)<<tagShift | uint64(ref)
			x.count++
			return true
		}
		i = (i + 1) & x.mask
	}
	return false
}

// replace points the entry at slot to another chunk of the same key.
func (x *index) replace(slot uint64, ref slab.Ref) {
	x.slots[slot] = x.slots[slot]&^refMask | uint64(ref)
}

// remove deletes the entry at slot, shifting later entries of the cluster
// back into the hole when their home allows it (no tombstones).
func (x *index) remove(slot uint64) {
	hole, j := slot, slot
	for {
		j = (j + 1) & x.mask
		e := x.slots[j]
		if e == 0 {
			break
		}
		d := entryDist(e)
		if gap := (j - hole) & x.mask; d >= gap {
			x.slots[hole] = withDist(e, d-gap)
			hole = j
		}
	}
	x.slots[hole] = 0
	x.count--
}

// grow doubles the table (more if probes stay too long), rehashing every
// key through hashOf. Rare, and the cost is proportional to the items.
func (x *index) grow(hashOf func(slab.Ref) uint64) {
	old := x.slots
	for size := 2 * len(old); ; size *= 2 {
		nx := newIndex(size)
		ok := true
		for _, e := range old {
			if e != 0 && !nx.insert(hashOf(entryRef(e)), entryRef(e)) {
				ok = false
				break
			}
		}
		if ok {
			*x = nx
			return
		}
	}
}

// bytes is the table's memory (memcached's hash_bytes).
func (x *index) bytes() int64 { return int64(len(x.slots)) * 8 }
