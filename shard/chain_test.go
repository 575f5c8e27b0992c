package shard

import (
	"bytes"
	"testing"

	"github.com/leasecached/leasecached/slab"
)

func TestBigValuesReadBackExact(t *testing.T) {
	// The header of an item with flags and a 4-byte length: the first size just fits one chunk (flags 0,
	// so 4 bytes to spare), the second is chained by one byte (flags 1).
	hdr := headerLen(layoutOf(1, 0, slab.ChunkMax), false)
	for _, tc := range []struct {
		name    string
		limit   int64
		maxItem int
		sizes   []int
	}{
		{"around the chunk max", 64 << 20, 2 << 20, []int{
			slab.ChunkMax - hdr - 3, slab.ChunkMax - hdr - 2, slab.ChunkMax,
			2*slab.ChunkMax - partData, 2 * slab.ChunkMax}},
		{"1 MiB", 64 << 20, 2 << 20, []int{1 << 20}},
		{"8 MiB with -I 16m", 64 << 20, 16 << 20, []int{8 << 20, 8<<20 + 12345}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newStore(t, Config{MemoryLimit: tc.limit, MaxItemSize: tc.maxItem})
			for i, n := range tc.sizes {
				want := pattern(n, i)
				if r := s.Store(ModeSet, []byte("big"), uint32(i), 0, want, 0); r != Stored {
					t.Fatalf("size %d: %v", n, r)
				}
				got, info, ok := s.Get(nil, []byte("big"))
				if !ok || !bytes.Equal(got, want) || info.Len != n || info.Flags != uint32(i) {
					t.Fatalf("size %d: read back %d bytes ok=%v equal=%v", n, len(got), ok, bytes.Equal(got, want))
				}
			}
			if st := s.Stats(); st.CurrItems != 1 {
				t.Fatalf("curr items %d", st.CurrItems)
			}
		})
	}
}

func TestChainedAppendPrependAndArith(t *testing.T) {
	// No stale values: the test checks that deleting frees every chunk at once.
	s, _ := newStore(t, Config{MaxItemSize: 4 << 20, StaleWindow: -1})
	a, b, c := pattern(700_000, 1), pattern(900_000, 2), pattern(10, 3)
	s.Store(ModeSet, []byte("k"), 5, 0, a, 0)
	if r := s.Store(ModeAppend, []byte("k"), 0, 0, b, 0); r != Stored {
		t.Fatal(r)
	}
	if r := s.Store(ModePrepend, []byte("k"), 0, 0, c, 0); r != Stored {
		t.Fatal(r)
	}
	want := append(append(append([]byte{}, c...), a...), b...)
	got, info := mustGet(t, s, "k")
	if got != string(want) || info.Flags != 5 {
		t.Fatalf("chained append/prepend: %d bytes, equal=%v flags %d", len(got), got == string(want), info.Flags)
	}
	// A chained value is never a number for incr (memcached: chunked item).
	d := append([]byte("5"), bytes.Repeat([]byte(" "), 600_000)...)
	s.Store(ModeSet, []byte("n"), 0, 0, d, 0)
	if _, r := s.Arith([]byte("n"), true, 1); r != NonNumeric {
		t.Fatalf("incr on chained: %v", r)
	}
	// Shrinking a chained item back to one chunk frees every part.
	s.Store(ModeSet, []byte("k"), 0, 0, []byte("small"), 0)
	s.Delete([]byte("n"))
	st := s.Stats()
	used := 0
	for _, cl := range st.Classes {
		used += cl.UsedChunks
	}
	if used != 1 || st.CurrItems != 1 {
		t.Fatalf("chunks leaked: used %d items %d", used, st.CurrItems)
	}
}

// Reading into a caller buffer with room allocates nothing, chained or not.
func TestGetIntoBufferAllocatesNothing(t *testing.T) {
	s, _ := newStore(t, Config{MaxItemSize: 2 << 20})
	s.Store(ModeSet, []byte("small"), 0, 0, pattern(100, 1), 0)
	s.Store(ModeSet, []byte("big"), 0, 0, pattern(1<<20, 2), 0)
	buf := make([]byte, 0, 2<<20)
	for _, k := range []string{"small", "big"} {
		key := []byte(k)
		if n := testing.AllocsPerRun(50, func() { buf, _, _ = s.Get(buf[:0], key) }); n != 0 {
			t.Errorf("get %s: %v allocs", k, n)
		}
	}
}
