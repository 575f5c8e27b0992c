package shard

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// testValueHeader and testLValueHeader stand in for protocol's encoders (shard must not import protocol).
func testValueHeader(dst, key []byte, flags uint32, n int, cas uint64, withCas bool) []byte {
	dst = fmt.Appendf(dst, "VALUE %s %d %d", key, flags, n)
	if withCas {
		dst = fmt.Appendf(dst, " %d", cas)
	}
	return append(dst, "\r\n"...)
}

func testLValueHeader(dst, key []byte, token uint64, flags uint32, n int) []byte {
	return fmt.Appendf(dst, "LVALUE %s %d %d %d\r\n", key, token, flags, n)
}

// TestAppendGetMatchesGet: the reply block is the header Get's metadata gives, then Get's value, for
// values inline and chained across chunks, with and without CAS, and nothing on a miss.
func TestAppendGetMatchesGet(t *testing.T) {
	s, _ := newStore(t, Config{MemoryLimit: 64 << 20, MaxItemSize: 4 << 20})
	cases := []struct {
		name    string
		key     string
		size    int // 0: not stored
		withCas bool
	}{
		{"empty value", "e", -1, false},
		{"small", "small", 100, false},
		{"small with cas", "smallc", 100, true},
		{"4 KB", "four", 4 << 10, false},
		{"chained 2 MB", "big", 2 << 20, true},
		{"miss", "absent", 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var val []byte
			if tc.size != 0 {
				val = bytes.Repeat([]byte{'v'}, max(tc.size, 0))
				for i := range val {
					val[i] = byte('a' + i%26)
				}
				if r := s.Store(ModeSet, []byte(tc.key), 7, 0, val, 0); r != Stored {
					t.Fatalf("set: %v", r)
				}
			}
			prefix := []byte("PREFIX")
			got, ok := s.AppendGet(prefix, []byte(tc.key), tc.withCas, testValueHeader)
			if ok != (tc.size != 0) {
				t.Fatalf("hit %v, want %v", ok, tc.size != 0)
			}
			want := []byte("PREFIX")
			if ok {
				v, info, _ := s.Get(nil, []byte(tc.key))
				want = testValueHeader(want, []byte(tc.key), info.Flags, len(v), info.Cas, tc.withCas)
				want = append(append(want, v...), "\r\n"...)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("got %.80q..., want %.80q...", got, want)
			}
		})
	}
}

// TestAppendLeaseGet: hit, granted miss, hot miss, and a stale value on a miss, block for block as
// LeaseGet describes them.
func TestAppendLeaseGet(t *testing.T) {
	s, _ := newStore(t, Config{})
	set(t, s, "hit", "value")
	out, kind := s.AppendLeaseGet(nil, []byte("hit"), testValueHeader, testLValueHeader)
	if kind != LeaseHit || string(out) != "VALUE hit 0 5\r\nvalue\r\n" {
		t.Fatalf("hit: %v %q", kind, out)
	}
	out, kind = s.AppendLeaseGet(nil, []byte("m"), testValueHeader, testLValueHeader)
	if kind != LeaseGranted || !strings.HasPrefix(string(out), "LVALUE m ") || !strings.HasSuffix(string(out), " 0 0\r\n\r\n") {
		t.Fatalf("granted: %v %q", kind, out)
	}
	out, kind = s.AppendLeaseGet(nil, []byte("m"), testValueHeader, testLValueHeader)
	if kind != LeaseHotMiss || string(out) != "LVALUE m 1 0 0\r\n\r\n" {
		t.Fatalf("hot miss: %v %q", kind, out)
	}
	if r := s.Store(ModeSet, []byte("st"), 3, 0, []byte("old"), 0); r != Stored {
		t.Fatal(r)
	}
	if r := s.Delete([]byte("st")); r != Deleted {
		t.Fatal(r)
	}
	out, kind = s.AppendLeaseGet(nil, []byte("st"), testValueHeader, testLValueHeader)
	want := func(tok uint64) string { return "LVALUE st " + strconv.FormatUint(tok, 10) + " 3 3\r\nold\r\n" }
	if kind != LeaseGranted || !strings.HasSuffix(string(out), " 3 3\r\nold\r\n") {
		t.Fatalf("stale: %v %q, want like %q", kind, out, want(2))
	}
}

// TestAppendGetAllocatesNothing: with an output buffer of sufficient capacity a hit allocates nothing.
func TestAppendGetAllocatesNothing(t *testing.T) {
	s, _ := newStore(t, Config{})
	set(t, s, "k", strings.Repeat("x", 100))
	dst := make([]byte, 0, 4096)
	hdr := ValueHeader(func(dst, key []byte, flags uint32, n int, cas uint64, withCas bool) []byte {
		return append(dst, "H\r\n"...)
	})
	lhdr := LValueHeader(func(dst, key []byte, token uint64, flags uint32, n int) []byte { return dst })
	key := []byte("k") // allocated once: a key passed to the encoder escapes
	if n := testing.AllocsPerRun(100, func() {
		dst, _ = s.AppendGet(dst[:0], key, true, hdr)
		dst, _ = s.AppendLeaseGet(dst[:0], key, hdr, lhdr)
	}); n != 0 {
		t.Fatalf("%v allocations per hit", n)
	}
}
