package shard

import (
	"bytes"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/leasecached/leasecached/slab"
)

// Prefetch reads a shard's table without its lock while other goroutines grow it (each growth retires
// the old table) and delete from it. Run with -race: the lock-free read must stay invisible to the race
// detector and harmless, and the stored data must come out unchanged. The window in which a table freed
// too early is read is too narrow for this test to hit reliably: TestRetiredTableOutlivesPrefetch checks
// that rule directly.
func TestPrefetchWhileTablesGrow(t *testing.T) {
	s, _ := newStore(t, Config{MemoryLimit: 64 << 20, Shards: 2})
	const keys = 40_000
	deadline := time.Now().Add(2 * time.Second)
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() { // writers: every index starts at indexInitialSlots and grows several times
			defer wg.Done()
			for i := w; i < keys && time.Now().Before(deadline); i += 2 {
				s.Store(ModeSet, key(i), 0, 0, pattern(40, i), 0)
				if i%7 == 0 {
					s.Delete(key(i / 2))
				}
			}
		}()
	}
	for r := range 2 {
		wg.Add(1)
		go func() { // readers: batches of keys, present and absent
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 9))
			batch := make([][]byte, PrefetchMax+4) // longer than Prefetch takes
			var hs [PrefetchMax]Hashed
			for n := 0; n < 200_000 && time.Now().Before(deadline); n++ {
				for i := range batch {
					batch[i] = key(rng.IntN(2 * keys))
				}
				s.Prefetch(batch, hs[:])
			}
		}()
	}
	wg.Wait()
	for i := range keys {
		v, _, ok := s.Get(nil, key(i))
		if ok && !bytes.Equal(v, pattern(40, i)) {
			t.Fatalf("key %d: value changed", i)
		}
	}
}

// A table the index outgrows while a Prefetch may be reading it stays mapped until no Prefetch runs, then
// is unmapped by the next growth or reclaimer tick; Prefetch always probes the current table.
func TestRetiredTableOutlivesPrefetch(t *testing.T) {
	s, _ := newStore(t, Config{Shards: 1})
	sh := &s.shards[0]
	old := sh.view.Load()
	if old.n != sh.idx.n || &old.slots[0] != &sh.idx.slots[0] {
		t.Fatal("the published view is not the index's table")
	}
	s.prefetching.Add(1) // a Prefetch in flight, which may have loaded old
	for i := 0; sh.idx.n == old.n; i++ {
		s.Store(ModeSet, key(i), 0, 0, []byte("v"), 0)
	}
	if len(sh.retired) != 1 || sh.retired[0].W == nil {
		t.Fatalf("%d tables retired, want the outgrown one kept", len(sh.retired))
	}
	sum := uint64(0)
	for _, e := range old.slots { // mapped still (and given back, so it reads as zeros)
		sum |= e
	}
	if sum != 0 {
		t.Errorf("retired table was not discarded: words still set (%#x)", sum)
	}
	if v := sh.view.Load(); v.n != sh.idx.n || &v.slots[0] != &sh.idx.slots[0] {
		t.Fatal("the view was not moved to the new table")
	}
	s.reclaimTick()
	if len(sh.retired) != 1 {
		t.Fatal("a retired table was freed while a Prefetch was running")
	}
	s.prefetching.Add(-1)
	s.reclaimTick()
	if len(sh.retired) != 0 {
		t.Fatalf("%d retired tables left after the reclaimer's tick with no Prefetch running", len(sh.retired))
	}
	for i := 0; i < 100; i++ {
		if v, _, ok := s.Get(nil, key(i)); !ok || string(v) != "v" {
			t.Fatalf("key %d lost", i)
		}
	}
}

func TestPrefetchAllocatesNothing(t *testing.T) {
	s := benchStore(t)
	batch := make([][]byte, 16)
	for i := range batch {
		batch[i] = key(i * 37)
	}
	batch[3] = []byte("absent")
	var hs [16]Hashed
	if n := testing.AllocsPerRun(200, func() { s.Prefetch(batch, hs[:]) }); n != 0 {
		t.Errorf("Prefetch: %v allocs per call", n)
	}
}

// The Hashed Prefetch hands out carry the keys' Hash and, for a key it found, the slot of its entry, so the
// ...Hashed methods given them find what the plain methods find; it fills only the first PrefetchMax.
func TestPrefetchHashes(t *testing.T) {
	s, _ := newStore(t, Config{})
	keys := make([][]byte, PrefetchMax+3)
	for i := range keys {
		keys[i] = key(i)
		if r := s.StoreHashed(ModeSet, keys[i], HashOf(keys[i]), 7, 0, pattern(20, i), 0); r != Stored {
			t.Fatalf("StoreHashed %d: %v", i, r)
		}
	}
	keys[5] = []byte("absent")
	hs := make([]Hashed, len(keys))
	s.Prefetch(keys, hs)
	for i, k := range keys {
		want := HashOf(k)
		if i >= PrefetchMax {
			want = Hashed{}
		}
		if hs[i].Sum != want.Sum {
			t.Fatalf("hash %d: %#x, want %#x", i, hs[i].Sum, want.Sum)
		}
		if i >= PrefetchMax {
			continue
		}
		sh := s.shardOf(hs[i].Sum)
		if ref, ok := sh.idx.at(hs[i].Sum, uint64(hs[i].slot)-1); (i == 5) == (hs[i].slot != 0) ||
			i != 5 && (!ok || string(itemKey(sh.chunk(ref))) != string(k)) {
			t.Fatalf("key %q: slot hint %d does not name its entry", k, hs[i].slot)
		}
		got, ok := s.AppendGetHashed(nil, k, hs[i], false, func(dst, key []byte, flags uint32, n int, _ uint64, _ bool) []byte {
			return append(dst, key...)
		})
		if v, _, found := s.Get(nil, k); ok != found || ok && string(got) != string(k)+string(v)+"\r\n" {
			t.Fatalf("AppendGetHashed %d: %q", i, got)
		}
	}
}

// A slot hint is checked, never trusted: whatever slot it names, a lookup finds what a plain one finds. The
// hints here are right, absent, out of the table, another key's, and taken before the table was shifted by
// deletes and inserts and then grown.
func TestStaleSlotHints(t *testing.T) {
	const n = 2000
	s, sh := filledShard(t, n)
	hs := make([]Hashed, n)
	for i := 0; i < n; i += PrefetchMax {
		ks := make([][]byte, 0, PrefetchMax)
		for j := i; j < min(n, i+PrefetchMax); j++ {
			ks = append(ks, key(j))
		}
		s.Prefetch(ks, hs[i:])
	}
	check := func(what string, i int, k Hashed) {
		t.Helper()
		want, _, wantOK := s.Get(nil, key(i))
		got, ok := s.AppendGetHashed(nil, key(i), k, false, func(dst, _ []byte, _ uint32, _ int, _ uint64, _ bool) []byte {
			return dst
		})
		if ok != wantOK || ok && !bytes.Equal(got, append(want, "\r\n"...)) {
			t.Fatalf("%s hint %d for key %d: found %v (%q), want %v (%q)", what, k.slot, i, ok, got, wantOK, want)
		}
	}
	for i := range n {
		h := hs[i]
		check("fresh", i, h)
		check("no", i, Hashed{Sum: h.Sum})
		check("out-of-table", i, Hashed{Sum: h.Sum, slot: math.MaxUint32})
		check("other key's", i, Hashed{Sum: h.Sum, slot: hs[(i+1)%n].slot})
		// Another key's Hashed, slot and all: the entry it names is not key(i)'s.
		other := hs[(i+1)%n]
		sh.mu.Lock()
		ref, _ := sh.findHinted(other, key(i), s.now())
		sh.mu.Unlock()
		if ref != slab.NilRef {
			t.Fatalf("key %d found through key %d's hash and slot", i, (i+1)%n)
		}
	}
	for i := 0; i < n; i += 3 {
		s.Delete(key(i))
	}
	for i := n; i < 3*n; i++ { // shifts clusters, then grows the table
		s.Store(ModeSet, key(i), 0, 0, pattern(20, i), 0)
	}
	for i := range n {
		check("stale", i, hs[i])
	}
	// A store given a stale hint replaces the key's entry; it must not index the key twice.
	items := sh.idx.count
	for i := range n {
		if r := s.StoreHashed(ModeSet, key(i), hs[i], 0, 0, pattern(30, i), 0); r != Stored {
			t.Fatalf("StoreHashed %d: %v", i, r)
		}
		check("stored", i, hs[i])
	}
	if want := items + (n+2)/3; sh.idx.count != want {
		t.Fatalf("%d entries after storing every key again, want %d", sh.idx.count, want)
	}
}

// BenchmarkGetBatch is what a pipelined connection does: 16 gets of random keys in a table much larger
// than the CPU caches, with and without handing the batch to Prefetch first. Compare ns/op of the two.
func BenchmarkGetBatch(b *testing.B) {
	const items, batch = 1_000_000, 16
	s, _ := newStore(b, Config{MemoryLimit: 512 << 20})
	keys := make([][]byte, items)
	for i := range keys {
		keys[i] = key(i)
		s.Store(ModeSet, keys[i], 0, 0, pattern(100, i), 0)
	}
	for _, mode := range []string{"plain", "prefetch"} {
		b.Run(mode, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 1))
			ks := make([][]byte, batch)
			var hs [batch]Hashed
			buf := make([]byte, 0, 4096)
			b.ReportAllocs()
			for b.Loop() {
				for i := range ks {
					ks[i] = keys[rng.IntN(items)]
				}
				if mode == "prefetch" {
					s.Prefetch(ks, hs[:])
				}
				buf = buf[:0]
				for _, k := range ks {
					buf, _, _ = s.Get(buf, k)
				}
			}
		})
	}
}

// TestFoundSlotIsOnlyAHint: mutate starts at the slot where the last find found its key, and must change
// only the entry of the item it is given even when that slot has since come to hold another entry, an
// empty slot, or no slot at all.
func TestFoundSlotIsOnlyAHint(t *testing.T) {
	const n = 3000
	s, sh := filledShard(t, n)
	slots := make([]uint64, 0, n)
	for i, e := range sh.idx.slots {
		if e&entryUsed != 0 {
			slots = append(slots, uint64(i))
		}
	}
	empty := uint64(0)
	for sh.idx.slots[empty] != 0 {
		empty++
	}
	hints := []struct {
		name string
		slot func(i int) uint64
	}{
		{"another entry's", func(i int) uint64 { return slots[(i*7+1)%len(slots)] }},
		{"an empty", func(int) uint64 { return empty }},
		{"a past-the-table", func(int) uint64 { return math.MaxUint64 }},
	}
	for i := range n {
		hint := hints[i%len(hints)]
		sh.mu.Lock()
		now := s.now()
		h := Hash(key(i))
		ref, _ := sh.find(h, key(i), now)
		if ref == slab.NilRef {
			sh.mu.Unlock()
			t.Fatalf("key %d not found", i)
		}
		sh.foundSlot = hint.slot(i)
		if i%2 == 0 {
			sh.mutate(h, ref, slab.NilRef, causeDelete, now)
		} else {
			nu, nb, ok := sh.allocItem(len(key(i)), 1, layoutOf(0, 0, 1), now)
			if !ok {
				sh.mu.Unlock()
				t.Fatal("no memory for a one-byte item")
			}
			writeHeader(nb, 1, 0, uint32(now), 0, key(i), 1, 0)
			w := newValueWriter(sh.al, nb)
			w.write([]byte("x"))
			nb[offState] &^= flagPinned
			sh.mutate(h, ref, nu, causeStore, now)
		}
		sh.mu.Unlock()
		if got, _, ok := s.Get(nil, key(i)); i%2 == 0 && ok || i%2 == 1 && string(got) != "x" {
			t.Fatalf("key %d after mutate with %s slot as hint: %q, %v", i, hint.name, got, ok)
		}
	}
	for i := range n {
		got, _, ok := s.Get(nil, key(i))
		if i%2 == 0 && ok || i%2 == 1 && string(got) != "x" {
			t.Fatalf("key %d at the end: %q, %v", i, got, ok)
		}
	}
	if want := n / 2; sh.idx.count != want {
		t.Fatalf("%d entries indexed, want %d", sh.idx.count, want)
	}
}

// filledShard is a one-shard store holding keys 0 to n-1 (20-byte values), and its shard.
func filledShard(t *testing.T, n int) (*Store, *shard) {
	t.Helper()
	s, _ := newStore(t, Config{Shards: 1})
	for i := range n {
		s.Store(ModeSet, key(i), 0, 0, pattern(20, i), 0)
	}
	return s, &s.shards[0]
}
