package shard

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/leasecached/leasecached/slab"
)

// checkIndexInvariants checks every entry of sh's index against the item it names: each ref indexed once,
// each a live head (not a stale value, which has its own table), its distance from home and its tag those
// of its key's hash; and the entry count agrees with the index's count and the shard's curr_items.
func checkIndexInvariants(t *testing.T, sh *shard) {
	t.Helper()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	seen := map[slab.Ref]bool{}
	n := 0
	for i, e := range sh.idx.slots {
		if e == 0 {
			continue
		}
		n++
		r := entryRef(e)
		if seen[r] {
			t.Fatalf("ref %d indexed twice", r)
		}
		seen[r] = true
		b := sh.chunk(r)
		if b[offState]&kindMask != kindHead || isGhost(b) {
			t.Fatalf("slot %d: ref %d is not a live head (state %#x)", i, r, b[offState])
		}
		h := Hash(itemKey(b))
		home := sh.idx.home(h)
		d := (uint64(i) + sh.idx.n - home) % sh.idx.n
		if d != entryDist(e) || tagOf(h) != (e>>tagShift)&tagMask {
			t.Fatalf("slot %d: key %q dist %d want %d", i, itemKey(b), entryDist(e), d)
		}
	}
	if n != sh.idx.count || int64(n) != sh.stats.currItems {
		t.Fatalf("index entries %d, count %d, currItems %d", n, sh.idx.count, sh.stats.currItems)
	}
}

// TestIndexInvariantsUnderEviction runs random sets (small, large and chained values, some with an
// exptime), appends, deletes, incr/decr, touches, lease-gets, reads and clock steps on one shard of 4 MiB,
// so that most stores evict, and checks the index after every 149 operations. It covers mutate's use of the
// slot the last find saw (foundSlot), which evictions during the allocation of a replacement can move.
func TestIndexInvariantsUnderEviction(t *testing.T) {
	for seed := range 2 {
		s, clk := newStore(t, Config{Shards: 1, MemoryLimit: 4 << 20, MaxItemSize: 1 << 20})
		sh := &s.shards[0]
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		model := map[string]string{}
		for op := range 20000 {
			k := fmt.Sprintf("key:%d", rng.IntN(3000))
			var v []byte
			switch rng.IntN(4) {
			case 0:
				v = pattern(10+rng.IntN(50), op)
			case 1:
				v = pattern(100+rng.IntN(2000), op)
			case 2:
				v = pattern(5000+rng.IntN(60000), op)
			default:
				v = []byte(strconv.Itoa(rng.IntN(1000)))
			}
			switch x := rng.IntN(20); {
			case x < 8:
				exp := int64(0)
				if rng.IntN(5) == 0 {
					exp = int64(1 + rng.IntN(3))
				}
				if s.Store(ModeSet, []byte(k), uint32(rng.IntN(3)), exp, v, 0) == Stored {
					model[k] = string(v)
				}
			case x < 10:
				if s.Store(ModeAppend, []byte(k), 0, 0, v[:min(len(v), 30)], 0) == Stored {
					model[k] += string(v[:min(len(v), 30)])
				}
			case x < 12:
				s.Delete([]byte(k))
				delete(model, k)
			case x < 14:
				s.Arith([]byte(k), rng.IntN(2) == 0, uint64(rng.IntN(100000)))
				delete(model, k)
			case x < 15:
				s.Touch([]byte(k), int64(rng.IntN(5)))
			case x < 16:
				s.LeaseGet(nil, []byte(k))
			case x < 17:
				clk.advance(1)
			default:
				// Evictions may have taken anything; what is there must be the last value stored.
				got, _, ok := s.Get(nil, []byte(k))
				if want, in := model[k]; ok && in && string(got) != want {
					t.Fatalf("seed %d op %d: %s = %d bytes, want %d bytes", seed, op, k, len(got), len(want))
				}
			}
			if op%149 == 0 {
				checkIndexInvariants(t, sh)
			}
		}
		checkIndexInvariants(t, sh)
		if ev := s.Stats().Evictions; ev < 1000 {
			t.Fatalf("seed %d: only %d evictions: the test is not exercising eviction", seed, ev)
		}
	}
}
