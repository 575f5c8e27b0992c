package shard

import (
	"math/rand"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/leasecached/leasecached/slab"
)

// refIndex drives an index with integer keys, keeping the key of each ref in
// a side table (the real shard reads it from the chunk).
type refIndex struct {
	x     index
	keyOf map[slab.Ref]uint64
}

func keyHash(k uint64) uint64 {
	var b [8]byte
	for i := range b {
		b[i] = byte(k >> (8 * i))
	}
	return xxhash.Sum64(b[:])
}

func (r *refIndex) find(k uint64) (uint64, slab.Ref, bool) {
	p := r.x.probe(keyHash(k))
	for {
		slot, ref, ok := r.x.next(&p)
		if !ok {
			return 0, 0, false
		}
		if r.keyOf[ref] == k {
			return slot, ref, true
		}
	}
}

func (r *refIndex) add(k uint64, ref slab.Ref) {
	h := keyHash(k)
	r.keyOf[ref] = k
	if r.x.needsGrow() {
		r.x.grow(func(ref slab.Ref) uint64 { return keyHash(r.keyOf[ref]) })
	}
	for !r.x.insert(h, ref) {
		r.x.grow(func(ref slab.Ref) uint64 { return keyHash(r.keyOf[ref]) })
	}
}

func TestIndexRandomizedAgainstMap(t *testing.T) {
	for _, tc := range []struct {
		name   string
		keys   uint64
		ops    int
		seed   int64
		slots  int
		delPct int
	}{
		{"small table heavy deletes", 300, 100000, 1, 16, 45},
		{"growth", 50000, 200000, 2, indexInitialSlots, 20},
		{"dense keyspace", 2000, 100000, 3, 64, 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(tc.seed))
			r := &refIndex{x: newIndex(tc.slots), keyOf: map[slab.Ref]uint64{}}
			want := map[uint64]slab.Ref{}
			next := slab.Ref(0)
			for op := 0; op < tc.ops; op++ {
				k := uint64(rng.Int63n(int64(tc.keys)))
				slot, ref, ok := r.find(k)
				wref, wok := want[k]
				if ok != wok || (ok && ref != wref) {
					t.Fatalf("op %d key %d: index (%x,%v) map (%x,%v)", op, k, ref, ok, wref, wok)
				}
				switch {
				case ok && rng.Intn(100) < tc.delPct:
					r.x.remove(slot)
					delete(want, k)
					delete(r.keyOf, ref)
				case ok:
					next += 8
					delete(r.keyOf, ref)
					r.keyOf[next] = k
					r.x.replace(slot, next)
					want[k] = next
				default:
					next += 8
					r.add(k, next)
					want[k] = next
				}
				if r.x.count != len(want) {
					t.Fatalf("op %d: count %d want %d", op, r.x.count, len(want))
				}
			}
			for k, wref := range want {
				if _, ref, ok := r.find(k); !ok || ref != wref {
					t.Fatalf("final key %d: %x %v want %x", k, ref, ok, wref)
				}
				if _, ok := r.x.slotOf(keyHash(k), wref); !ok {
					t.Fatalf("slotOf lost key %d", k)
				}
				checkAt(t, &r.x, keyHash(k))
			}
			if len(r.x.slots)*indexLoadNum < r.x.count*indexLoadDen {
				t.Fatalf("load factor exceeded: %d in %d", r.x.count, len(r.x.slots))
			}
		})
	}
}

// checkAt checks that at, given hash h and a slot, accepts every slot next offers when probing for h, with
// the same ref, and otherwise only used slots with h's tag: it tries the offered slots, their neighbours,
// and slots past the table's end.
func checkAt(t *testing.T, x *index, h uint64) {
	t.Helper()
	offered := map[uint64]slab.Ref{}
	p := x.probe(h)
	for slot, ref, ok := x.next(&p); ok; slot, ref, ok = x.next(&p) {
		offered[slot] = ref
	}
	tries := []uint64{x.n, x.n + 1, ^uint64(0), x.home(h)}
	for slot := range offered {
		tries = append(tries, slot, slot+1, slot-1, slot+2)
	}
	for _, i := range tries {
		ref, ok := x.at(h, i)
		want, wantOK := offered[i]
		if !wantOK && i < x.n && x.slots[i] != 0 && tagOf(h) == x.slots[i]>>tagShift&tagMask {
			want, wantOK = entryRef(x.slots[i]), true // another home's entry with the same tag
		}
		if ok != wantOK || ref != want {
			t.Fatalf("at(%#x, %d) = %x %v, want %x %v", h, i, ref, ok, want, wantOK)
		}
	}
}

// The table stays between 0.72 and 0.9 full as it grows (so 8.9 to 11.1 bytes per item), keeps robin hood
// order (distances along a cluster never jump by more than one), and resizing down keeps every entry.
func TestIndexLoadBand(t *testing.T) {
	for _, n := range []int{5_000, 37_000, 100_000, 250_000} {
		r := &refIndex{x: newIndex(indexInitialSlots), keyOf: map[slab.Ref]uint64{}}
		for k := range uint64(n) {
			r.add(k, slab.Ref(8*(k+1)))
		}
		load := float64(r.x.count) / float64(r.x.n)
		if load < 0.72 || load > 0.9 {
			t.Errorf("%d keys: load %.3f", n, load)
		}
		for i := range r.x.n {
			e, next := r.x.slots[i], r.x.slots[r.x.step(i)]
			if next != 0 && entryDist(next) > entryDist(e)+1 {
				t.Fatalf("%d keys: slot %d dist %d follows %d", n, i, entryDist(next), entryDist(e))
			}
		}
		hashOf := func(ref slab.Ref) uint64 { return keyHash(r.keyOf[ref]) }
		for k := uint64(0); k < uint64(n); k += 2 {
			slot, _, ok := r.find(k)
			if !ok {
				t.Fatalf("%d keys: lost key %d", n, k)
			}
			r.x.remove(slot)
			delete(r.keyOf, slab.Ref(8*(k+1)))
		}
		r.x.resize(uint64(r.x.count)*100/indexShrinkToPct, hashOf)
		for k := range uint64(n) {
			if _, _, ok := r.find(k); ok != (k%2 == 1) {
				t.Fatalf("%d keys after shrinking: key %d found=%v", n, k, ok)
			}
		}
		r.x.free()
	}
}
