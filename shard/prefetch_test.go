package shard

import (
	"bytes"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
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
			var hs [PrefetchMax]uint64
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
	var hs [16]uint64
	if n := testing.AllocsPerRun(200, func() { s.Prefetch(batch, hs[:]) }); n != 0 {
		t.Errorf("Prefetch: %v allocs per call", n)
	}
}

// The hashes Prefetch hands out are the keys' Hash, so the ...Hashed methods given them find what the plain
// methods find; it fills only the first PrefetchMax.
func TestPrefetchHashes(t *testing.T) {
	s, _ := newStore(t, Config{})
	keys := make([][]byte, PrefetchMax+3)
	for i := range keys {
		keys[i] = key(i)
		if r := s.StoreHashed(ModeSet, keys[i], Hash(keys[i]), 7, 0, pattern(20, i), 0); r != Stored {
			t.Fatalf("StoreHashed %d: %v", i, r)
		}
	}
	hs := make([]uint64, len(keys))
	s.Prefetch(keys, hs)
	for i, k := range keys {
		want := Hash(k)
		if i >= PrefetchMax {
			want = 0
		}
		if hs[i] != want {
			t.Fatalf("hash %d: %#x, want %#x", i, hs[i], want)
		}
		if i >= PrefetchMax {
			continue
		}
		got, ok := s.AppendGetHashed(nil, k, hs[i], false, func(dst, key []byte, flags uint32, n int, _ uint64, _ bool) []byte {
			return append(dst, key...)
		})
		if v, _, _ := s.Get(nil, k); !ok || string(got) != string(k)+string(v)+"\r\n" {
			t.Fatalf("AppendGetHashed %d: %q", i, got)
		}
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
			var hs [batch]uint64
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
