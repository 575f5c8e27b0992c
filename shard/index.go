package shard

import "github.com/leasecached/leasecached/slab"

// index is one shard's hash table: open addressing with robin hood linear probing over a []uint64 kept
// outside the Go heap (slab.WordBuf), so it holds no Go pointers and costs the GC nothing, and an
// outgrown table goes back to the kernel at once instead of waiting for a collection. An entry packs
// everything needed to probe and to delete without touching items:
//
//	bit 63      used
//	bits 55..62 distance from the entry's home slot (home = slot - dist)
//	bits 40..54 tag: 15 hash bits independent of the slot bits
//	bits 0..39  chunk ref (slab.RefBits)
//
// Why robin hood at 0.9: an index entry is 8 bytes, so the table costs 8/load bytes per item. Plain
// linear probing needs a load near 0.75 to keep probes short (10.7 bytes per item at best, 21 right
// after a doubling); robin hood keeps entries sorted by home, so a lookup stops at the first entry
// that is closer to its home than the probe is to the key's, and probes stay short at 0.9. The table
// grows by 1.25 rather than doubling (the home slot is mapped with a multiply, not a mask, so any
// size works), so the load stays between 0.72 and 0.9: 8.9 to 11.1 bytes per item.
//
// A lookup only compares keys (in chunk memory) for entries whose distance and tag both match.
// Insertion shifts the rest of the cluster one slot on; deletion shifts it one slot back (no
// tombstones).
type index struct {
	mem   *slab.WordBuf
	slots []uint64
	n     uint64 // len(slots)
	count int
	// retire, when set, takes an outgrown table instead of it being freed at once: the shard's main
	// index is read without the lock by Prefetch, which must never find its table unmapped.
	retire func(*slab.WordBuf)
}

const (
	entryUsed = 1 << 63
	distShift = 55
	distMask  = 0xff
	// indexMaxDist is the longest probe an entry may have (what its distance field can hold); an insert
	// that would need more grows the table.
	indexMaxDist = distMask
	tagShift     = slab.RefBits
	tagMask      = 1<<15 - 1
	// hashTagShift selects the hash bits used as tag: the top 15, disjoint from the slot bits (low 32)
	// and the shard bits (see shardOf).
	hashTagShift = 49
	refMask      = 1<<slab.RefBits - 1

	// indexInitialSlots is a shard's starting table size (32 KiB).
	indexInitialSlots = 1 << 12
	// The table grows when count would exceed indexLoadNum/indexLoadDen of its size.
	indexLoadNum, indexLoadDen = 9, 10
	// The table grows by indexGrowNum/indexGrowDen: each item is rehashed about four times over the
	// table's life, and the load never drops below 0.72.
	indexGrowNum, indexGrowDen = 5, 4
)

func newIndex(slots int) index {
	mem, err := slab.NewWordBuf(slots)
	if err != nil {
		panic("shard: " + err.Error()) // out of memory, as a failed make would be
	}
	return index{mem: mem, slots: mem.W, n: uint64(slots)}
}

// free gives the table's memory back; the index must not be used after.
func (x *index) free() {
	x.mem.Free()
	*x = index{}
}

// home is the slot where an entry of hash h belongs: the low 32 bits scaled to the table size.
func (x *index) home(h uint64) uint64 { return uint64(uint32(h)) * x.n >> 32 }

// step is the slot after i, wrapping.
func (x *index) step(i uint64) uint64 {
	if i++; i == x.n {
		return 0
	}
	return i
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

func (x *index) probe(h uint64) probe { return probe{i: x.home(h), tag: tagOf(h)} }

// next returns the next candidate entry (same home and tag), its slot and ref, or false when the probe
// sequence ends: at an empty slot or at an entry closer to its home than the probe (robin hood order).
//
// It is the innermost loop of every lookup (about three slots per lookup at the loads the table keeps),
// so the probe lives in registers until it returns, one comparison checks use, distance and tag at once,
// and the wrap doubles as the bounds check.
func (x *index) next(p *probe) (uint64, slab.Ref, bool) {
	const match = entryUsed | distMask<<distShift | tagMask<<tagShift
	slots := x.slots
	i, dist, want := p.i, p.dist, entryUsed|p.tag<<tagShift
	for ; dist <= indexMaxDist; dist++ {
		if i >= uint64(len(slots)) {
			i = 0
		}
		e := slots[i]
		if e&match == dist<<distShift|want {
			p.i, p.dist = i+1, dist+1
			return i, entryRef(e), true
		}
		if e == 0 || entryDist(e) < dist {
			break
		}
		i++
	}
	p.dist = indexMaxDist + 1 // ended: later calls return false at once
	return 0, 0, false
}

// at returns the ref of the entry at slot i if there is one there with h's tag: a candidate for a key of
// hash h, which only the key can confirm.
func (x *index) at(h, i uint64) (slab.Ref, bool) {
	const match = entryUsed | tagMask<<tagShift
	if i < uint64(len(x.slots)) {
		if e := x.slots[i]; e&match == entryUsed|tagOf(h)<<tagShift {
			return entryRef(e), true
		}
	}
	return 0, false
}

// holds says whether slot i holds ref's entry (any i: one past the table holds nothing).
func (x *index) holds(i uint64, ref slab.Ref) bool {
	return i < uint64(len(x.slots)) && x.slots[i]&(entryUsed|refMask) == entryUsed|uint64(ref)
}

// slotOf finds the slot holding ref (which must be indexed under hash h).
func (x *index) slotOf(h uint64, ref slab.Ref) (uint64, bool) {
	i := x.home(h)
	for d := uint64(0); d <= indexMaxDist; d++ {
		e := x.slots[i]
		if e == 0 || entryDist(e) < d {
			return 0, false
		}
		if entryRef(e) == ref {
			return i, true
		}
		i = x.step(i)
	}
	return 0, false
}

// needsGrow says whether one more entry would exceed the load factor.
func (x *index) needsGrow() bool {
	return uint64(x.count+1)*indexLoadDen > x.n*indexLoadNum
}

// insert adds ref under hash h; false, with the table unchanged, if an entry's probe would get too
// long (the caller grows the table and retries).
func (x *index) insert(h uint64, ref slab.Ref) bool {
	// The new entry goes before the first entry whose home is after its own (robin hood order), and
	// the rest of the cluster moves one slot on.
	at, d := x.home(h), uint64(0)
	for {
		e := x.slots[at]
		if e == 0 || entryDist(e) < d {
			break
		}
		if d == indexMaxDist {
			return false
		}
		at, d = x.step(at), d+1
	}
	end := at
	for k := uint64(0); x.slots[end] != 0; k++ {
		if entryDist(x.slots[end]) == indexMaxDist || k == x.n {
			return false
		}
		end = x.step(end)
	}
	for end != at {
		prev := end - 1
		if end == 0 {
			prev = x.n - 1
		}
		e := x.slots[prev]
		x.slots[end] = withDist(e, entryDist(e)+1)
		end = prev
	}
	x.slots[at] = entryUsed | d<<distShift | tagOf(h)<<tagShift | uint64(ref)
	x.count++
	return true
}

// replace points the entry at slot to another chunk of the same key.
func (x *index) replace(slot uint64, ref slab.Ref) {
	x.slots[slot] = x.slots[slot]&^refMask | uint64(ref)
}

// remove deletes the entry at slot, shifting the rest of its cluster one slot back until an entry
// already at its home or an empty slot.
func (x *index) remove(slot uint64) {
	hole := slot
	for {
		j := x.step(hole)
		e := x.slots[j]
		if e == 0 || entryDist(e) == 0 {
			break
		}
		x.slots[hole] = withDist(e, entryDist(e)-1)
		hole = j
	}
	x.slots[hole] = 0
	x.count--
}

// grownSize is the table size after one growth step from n.
func grownSize(n uint64) uint64 { return max(n*indexGrowNum/indexGrowDen, n+1) }

// grow enlarges the table by indexGrowNum/indexGrowDen (more if probes stay too long), rehashing every
// key through hashOf. Rare, and the cost is proportional to the items.
func (x *index) grow(hashOf func(slab.Ref) uint64) {
	x.resize(grownSize(x.n), hashOf)
}

// resize rebuilds the table with at least size slots (more if probes would be too long or the entries
// would not fit the load factor) and frees the old one.
func (x *index) resize(size uint64, hashOf func(slab.Ref) uint64) {
	size = max(size, (uint64(x.count)*indexLoadDen+indexLoadNum-1)/indexLoadNum, 1)
	old := *x
	for ; ; size = grownSize(size) {
		nx := newIndex(int(size))
		ok := true
		for _, e := range old.slots {
			if e != 0 && !nx.insert(hashOf(entryRef(e)), entryRef(e)) {
				ok = false
				break
			}
		}
		if ok {
			nx.retire = old.retire
			*x = nx
			if old.retire != nil {
				old.retire(old.mem)
			} else {
				old.free()
			}
			return
		}
		nx.free()
	}
}

// bytes is the table's memory (memcached's hash_bytes).
func (x *index) bytes() int64 { return int64(x.n) * 8 }
