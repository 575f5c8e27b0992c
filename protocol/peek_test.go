package protocol

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"
)

func TestPeekKeys(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		room int
		keys []string
		end  int // -1: len(in)
	}{
		{"one get", "get a\r\n", 8, []string{"a"}, -1},
		{"bare newline", "get a\n", 8, []string{"a"}, -1},
		{"multi-get", "get a b  c\r\n", 8, []string{"a", "b", "c"}, -1},
		{"gets gat gats lease-get bget", "gets a\r\ngat 10 b c\r\ngats 0 d\r\nlease-get e\r\nbget f\r\n", 8,
			[]string{"a", "b", "c", "d", "e", "f"}, -1},
		{"set skips its data", "set k 0 0 11\r\nget nothere\r\nget a\r\n", 8, []string{"k", "a"}, -1},
		{"cas and noreply", "cas k 1 2 3 99 noreply\r\nabc\r\nget a\r\n", 8, []string{"k", "a"}, -1},
		{"lease-set has its token first", "lease-set k 7 0 0 3\r\nabc\r\nget a\r\n", 8, []string{"k", "a"}, -1},
		{"ms", "ms k 2 T0\r\nhi\r\nmg a v\r\n", 8, []string{"k", "a"}, -1},
		{"one-key commands", "delete a\r\nincr b 1\r\ndecr c 1\r\ntouch d 0\r\nmd e q\r\nma f\r\nme g\r\n", 8,
			[]string{"a", "b", "c", "d", "e", "f", "g"}, -1},
		{"keyless commands are passed over", "version\r\nstats\r\nmn\r\nflush_all\r\nget a\r\n", 8, []string{"a"}, -1},
		{"unknown commands are passed over", "bogus x y\r\n\r\nget a\r\n", 8, []string{"a"}, -1},
		{"incomplete line", "get a\r\nget b", 8, []string{"a"}, 7},
		{"nothing complete", "get a", 8, nil, 0},
		{"data not all here", "get a\r\nset k 0 0 5\r\nhel", 8, []string{"a"}, 7},
		{"data length unreadable", "get a\r\nset k 0 0 x\r\nget b\r\n", 8, []string{"a"}, 7},
		{"data length absurd", "get a\r\nset k 0 0 1234567890\r\n", 8, []string{"a"}, 7},
		{"storage without key", "get a\r\nset\r\nget b\r\n", 8, []string{"a"}, 7},
		{"room runs out between lines", "get a b\r\nget c\r\n", 2, []string{"a", "b"}, 9},
		{"a first line longer than the room", "get a b c\r\nget d\r\n", 2, []string{"a", "b"}, 11},
		{"a later line that does not fit", "get a\r\nget b c\r\n", 2, []string{"a"}, 7},
		{"trailing space", "get a \r\n", 8, []string{"a"}, -1},
		{"leading spaces", "   get   a\r\n", 8, []string{"a"}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := []byte(tc.in)
			keys := make([][]byte, tc.room)
			n, end := PeekKeys(in, keys)
			var got []string
			for _, k := range keys[:n] {
				got = append(got, string(k))
			}
			want := tc.end
			if want < 0 {
				want = len(in)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.keys) || end != want {
				t.Errorf("PeekKeys(%q) = %q, end %d; want %q, end %d", tc.in, got, end, tc.keys, want)
			}
		})
	}
}

// A peek looks at no more than PeekLines lines, however many keys it still has room for.
func TestPeekKeysStopsAfterPeekLines(t *testing.T) {
	in := []byte(strings.Repeat("get a\r\n", PeekLines+5))
	keys := make([][]byte, 2*PeekLines)
	n, end := PeekKeys(in, keys)
	if n != PeekLines || end != PeekLines*len("get a\r\n") {
		t.Fatalf("n=%d end=%d; want %d, %d", n, end, PeekLines, PeekLines*len("get a\r\n"))
	}
}

// On well-formed traffic the peek names exactly the keys the parser will find, in the same order: the
// hint is only worth its cost if it is right where it matters.
func TestPeekKeysAgreesWithParse(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	key := func() string { return fmt.Sprintf("key:%d", rng.IntN(1000)) }
	gen := []func() string{
		func() string { return "get " + key() + "\r\n" },
		func() string { return "gets " + key() + " " + key() + " " + key() + "\r\n" },
		func() string { return "gat 100 " + key() + " " + key() + "\r\n" },
		func() string { return "lease-get " + key() + "\r\n" },
		func() string {
			v := strings.Repeat("get x\r\n", rng.IntN(3)) // data that looks like commands
			return fmt.Sprintf("set %s 5 0 %d\r\n%s\r\n", key(), len(v), v)
		},
		func() string { return fmt.Sprintf("cas %s 0 0 2 %d noreply\r\nhi\r\n", key(), rng.IntN(99)) },
		func() string { return fmt.Sprintf("lease-set %s %d 0 0 3\r\nabc\r\n", key(), 2+rng.IntN(99)) },
		func() string { return "ms " + key() + " 3 T0 F5\r\nxyz\r\n" },
		func() string { return "mg " + key() + " v f t\r\n" },
		func() string { return "delete " + key() + "\r\n" },
		func() string { return "incr " + key() + " 5\r\n" },
		func() string { return "touch " + key() + " 10\r\n" },
		func() string { return "version\r\n" },
		func() string { return "mn\r\n" },
	}
	for round := 0; round < 500; round++ {
		var b strings.Builder
		for range 1 + rng.IntN(20) {
			b.WriteString(gen[rng.IntN(len(gen))]())
		}
		in := []byte(b.String())

		var want []string
		var p Parser
		var req Request
		for off := 0; off < len(in); {
			n, err := p.Parse(in[off:], &req)
			if err != nil || n == 0 {
				t.Fatalf("generated traffic does not parse at %d: %v in %q", off, err, in)
			}
			for _, k := range req.Keys {
				want = append(want, string(k))
			}
			off += n
		}

		var got []string
		keys := make([][]byte, 8)
		for off := 0; off < len(in); {
			n, end := PeekKeys(in[off:], keys)
			if end == 0 {
				t.Fatalf("peek stalled at %d of %q", off, in)
			}
			for _, k := range keys[:n] {
				got = append(got, string(k))
			}
			off += end
		}
		// A line whose keys do not fit is left for the next peek, so with room for more keys than any
		// generated line has, nothing is lost between peeks.
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("traffic %q\npeek  %q\nparse %q", in, got, want)
		}
	}
}

// FuzzPeekKeys checks that on any input PeekKeys stays in bounds, returns keys that are non-empty
// tokens of buf itself, and never reports more than it looked at.
func FuzzPeekKeys(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s), uint8(4))
	}
	f.Fuzz(func(t *testing.T, in []byte, room uint8) {
		keys := make([][]byte, int(room)%40)
		n, end := PeekKeys(in, keys)
		if n < 0 || n > len(keys) || end < 0 || end > len(in) {
			t.Fatalf("n=%d end=%d for %d keys of room and %d bytes", n, end, len(keys), len(in))
		}
		if n > 0 && end == 0 && bytes.IndexByte(in, '\n') < 0 {
			t.Fatalf("%d keys from input without a complete line", n)
		}
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(in)))
		for _, k := range keys[:n] {
			if len(k) == 0 || bytes.ContainsAny(k, " \n") {
				t.Fatalf("key %q is not a token", k)
			}
			p := uintptr(unsafe.Pointer(unsafe.SliceData(k)))
			if p < lo || p+uintptr(len(k)) > lo+uintptr(len(in)) {
				t.Fatalf("key %q does not alias the input", k)
			}
		}
	})
}
