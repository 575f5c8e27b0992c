package shard

import (
	"fmt"
	"sync/atomic"
	"testing"
	"unsafe"
)

func benchStore(b testing.TB) *Store {
	s, _ := newStore(b, Config{MemoryLimit: 256 << 20})
	for i := range 10_000 {
		s.Store(ModeSet, key(i), 0, 0, pattern(100, i), 0)
	}
	return s
}

func BenchmarkGetHit(b *testing.B) {
	s := benchStore(b)
	k := key(42)
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		buf, _, _ = s.Get(buf[:0], k)
	}
}

func BenchmarkSetOverwrite(b *testing.B) {
	s := benchStore(b)
	k, v := key(42), pattern(100, 1)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		s.Store(ModeSet, k, 0, 0, v, 0)
	}
}

func BenchmarkSetEvicting(b *testing.B) {
	s, _ := newStore(b, Config{MemoryLimit: 8 << 20})
	keys := make([][]byte, 1<<16)
	for i := range keys {
		keys[i] = key(i)
	}
	v := pattern(100, 1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		s.Store(ModeSet, keys[i&(len(keys)-1)], 0, 0, v, 0)
	}
}

func BenchmarkGetParallel(b *testing.B) {
	s := benchStore(b)
	keys := make([][]byte, 10_000)
	for i := range keys {
		keys[i] = key(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]byte, 0, 256)
		i := 0
		for pb.Next() {
			buf, _, _ = s.Get(buf[:0], keys[i%len(keys)])
			i++
		}
	})
}

// The steady-state paths allocate nothing (also enforced outside -bench).
func TestHotPathsAllocateNothing(t *testing.T) {
	s, _ := newStore(t, Config{})
	k, v := []byte("counter"), pattern(100, 1)
	s.Store(ModeSet, k, 0, 0, v, 0)
	s.Store(ModeSet, []byte("n"), 0, 0, []byte("1000000"), 0)
	buf := make([]byte, 0, 256)
	for name, f := range map[string]func(){
		"get":     func() { buf, _, _ = s.Get(buf[:0], k) },
		"gat":     func() { buf, _, _ = s.GetAndTouch(buf[:0], k, 100) },
		"miss":    func() { s.Get(buf[:0], []byte("absent")) },
		"set":     func() { s.Store(ModeSet, k, 0, 0, v, 0) },
		"replace": func() { s.Store(ModeReplace, k, 0, 0, v, 0) },
		"add":     func() { s.Store(ModeAdd, k, 0, 0, v, 0) },
		"touch":   func() { s.Touch(k, 10) },
		"incr":    func() { s.Arith([]byte("n"), true, 1) },
		"decr":    func() { s.Arith([]byte("n"), false, 1) },
		"delete+add": func() {
			s.Delete(k)
			s.Store(ModeAdd, k, 0, 0, v, 0)
		},
	} {
		if n := testing.AllocsPerRun(200, f); n != 0 {
			t.Errorf("%s: %v allocs/op", name, n)
		}
	}
}

// BenchmarkGetSetParallel and BenchmarkGetSetParallelOwnShards are make bench's 90/10 row in process, on two
// goroutines (run them with -cpu 2) that set one key in ten and get the rest, each over keys of its own, as
// two event loops serving different clients do. In the first the keys of both goroutines are spread over
// every shard; in the second each goroutine's keys live in its own half of the shards. What separates them
// is what the two CPUs share: every shard's lock and the lines a lookup writes, each of which costs a move
// from one CPU's cache to the other's (100-150 ns on the development VM: doc/design/memory-layout.md,
// rule 5).
func BenchmarkGetSetParallel(b *testing.B) { benchParallelMix(b, false, 10) }

// BenchmarkGetSetParallelOwnShards: see BenchmarkGetSetParallel.
func BenchmarkGetSetParallelOwnShards(b *testing.B) { benchParallelMix(b, true, 10) }

// BenchmarkSetParallel is BenchmarkGetSetParallel with sets only (overwrites of live items).
func BenchmarkSetParallel(b *testing.B) { benchParallelMix(b, false, 1) }

// benchParallelMix runs goroutines that store one key in setEvery and get the others, over two disjoint
// halves of the keys (goroutines alternate between them); with ownShards each half lives in half the shards.
func benchParallelMix(b *testing.B, ownShards bool, setEvery int) {
	s := benchStore(b)
	var part [2][][]byte
	for i := range 10_000 {
		k := key(i)
		j := i & 1
		if ownShards { // which half of the shards holds k
			off := uintptr(unsafe.Pointer(s.shardOf(Hash(k)))) - uintptr(unsafe.Pointer(&s.shards[0]))
			j = 2 * int(off/unsafe.Sizeof(s.shards[0])) / len(s.shards)
		}
		part[j] = append(part[j], k)
	}
	v := pattern(100, 1)
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]byte, 0, 256)
		keys := part[next.Add(1)&1]
		for n := 0; pb.Next(); n++ {
			k := keys[n%len(keys)]
			if n%setEvery == setEvery-1 {
				s.Store(ModeSet, k, 0, 0, v, 0)
			} else {
				buf, _, _ = s.Get(buf[:0], k)
			}
		}
	})
}

// BenchmarkSetOverwriteDataDir is BenchmarkSetOverwrite with a data directory, for the values of make
// bench's rows: the cost of sealing a store (doc/design/restart-costs.md), and proof that it allocates nothing.
func BenchmarkSetOverwriteDataDir(b *testing.B) {
	benchSetOverwriteDataDir(b, func(*testing.B) string { return "" })
}

// benchSetOverwriteDataDir is BenchmarkSetOverwriteDataDir with the live root live gives ("": none).
func benchSetOverwriteDataDir(b *testing.B, live func(b *testing.B) string) {
	for _, n := range []int{100, 4096} {
		b.Run(fmt.Sprintf("%dB", n), func(b *testing.B) {
			s := persistStore(b, b.TempDir(), nil, Config{MemoryLimit: 256 << 20, DataLive: live(b)})
			k, v := key(42), pattern(n, 1)
			s.Store(ModeSet, k, 0, 0, v, 0)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				s.Store(ModeSet, k, 0, 0, v, 0)
			}
		})
	}
}
