package shard

import (
	"encoding/binary"
	"math/rand"
	"sync"
	"testing"
	"time"
)

// Mixed operations from many goroutines under a tight memory limit (so
// evictions and page moves run concurrently too). Run with -race. Values
// embed their key so any cross-talk between items is detected.
func TestConcurrentMixedOps(t *testing.T) {
	s, c := newStore(t, Config{MemoryLimit: 16 << 20, Shards: 4, MaxItemSize: 2 << 20})
	const workers, keys = 8, 5000
	deadline := time.Now().Add(2 * time.Second)
	var wg sync.WaitGroup
	errs := make(chan string, workers)
	for w := range workers {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w)))
			var buf []byte
			for op := 0; op < 50_000 && time.Now().Before(deadline); op++ {
				k := rng.Intn(keys)
				kb := key(k)
				nk := append([]byte("n"), kb...) // counters live apart from tagged values
				switch r := rng.Intn(100); {
				case r < 40:
					v, info, ok := s.Get(buf[:0], kb)
					if ok && (len(v) < 4 || binary.LittleEndian.Uint32(v) != uint32(k) || info.Len != len(v)) {
						errs <- "value of another key"
						return
					}
					if v, _, ok := s.Get(nil, nk); ok {
						if _, num := parseCounter(v); !num {
							errs <- "counter corrupted: " + string(v)
							return
						}
					}
					buf = v
				case r < 70:
					size := 4 + rng.Intn(300)
					if rng.Intn(100) == 0 {
						size = 200_000 + rng.Intn(900_000) // chained now and then
					}
					v := make([]byte, size)
					binary.LittleEndian.PutUint32(v, uint32(k))
					if res := s.Store(ModeSet, kb, 0, int64(rng.Intn(3)), v, 0); res != Stored && res != NoMemory {
						errs <- "set: " + res.String()
						return
					}
				case r < 75:
					s.Store(ModeAppend, kb, 0, 0, []byte("tail"), 0)
				case r < 80:
					s.Delete(kb)
				case r < 85:
					s.Touch(kb, 100)
				case r < 90:
					s.Store(ModeAdd, nk, 0, 0, []byte("10"), 0)
					s.Arith(nk, rng.Intn(2) == 0, uint64(rng.Intn(100)))
				case r < 95:
					s.GetAndTouch(nil, kb, 0)
				case r < 97:
					c.advance(1)
				case r < 98:
					s.Stats()
				default:
					for i := range s.shards {
						s.shards[i].reclaim(c.now(), 1000)
					}
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	checkByteStats(t, s, s.Stats()) // stores in place and through new chunks kept the totals right
	s.FlushAll(0)
	st := s.Stats()
	if s.arena.PagesTaken() > s.arena.MaxPages() {
		t.Fatalf("pages %d over %d", s.arena.PagesTaken(), s.arena.MaxPages())
	}
	// Occupancy stats agree with the allocator.
	used := 0
	for _, cl := range st.Classes {
		used += cl.UsedChunks
	}
	if st.CurrItems < 0 || int64(used) < st.CurrItems {
		t.Fatalf("items %d but used chunks %d", st.CurrItems, used)
	}
}
