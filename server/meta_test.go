package server

import (
	"strings"
	"testing"

	"github.com/leasecached/leasecached/protocol"
)

func TestDecodeKeyBase64(t *testing.T) {
	cases := []struct {
		in   string
		want string
		ok   bool
	}{
		{"Ymlu", "bin", true},
		{"YmluAA==", "bin\x00", true},
		{"YQ==", "a", true},
		{"YWI=", "ab", true},
		{"Y!m(l)u", "bin", true}, // bytes outside the alphabet are skipped
		{"YQ==YWJj", "a", true},  // decoding stops after the padded block
		{"abc", "", false},
		{"====", "", false},
		{"a===", "", false},
		{"", "", false},
	}
	for _, c := range cases {
		var buf [250]byte
		got, ok := protocol.DecodeKeyBase64(buf[:], []byte(c.in))
		if ok != c.ok || string(got) != c.want {
			t.Errorf("decode(%q) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
		}
	}
	if got := string(protocol.AppendMetaKey(nil, []byte("bin\x00"), true)); got != "YmluAA== b" {
		t.Errorf("appendKey binary: %q", got)
	}
}

func TestSafeStrto(t *testing.T) {
	for _, c := range []struct {
		in  string
		i32 int32
		iok bool
		u64 uint64
		uok bool
	}{
		{"0", 0, true, 0, true},
		{"+5", 5, true, 5, true},
		{"-1", -1, true, 0, false},
		{"-0", 0, true, 0, true},
		{"4294967396", 100, true, 4294967396, true},
		{"18446744073709551615", 0, false, 1<<64 - 1, true},
		{"18446744073709551616", 0, false, 0, false},
		{"5\tjunk", 5, true, 5, true},
		{"5x", 0, false, 0, false},
		{"", 0, false, 0, false},
		{"-", 0, false, 0, false},
	} {
		i, iok := protocol.SafeStrtol([]byte(c.in))
		u, uok := protocol.SafeStrtoull([]byte(c.in))
		if i != c.i32 || iok != c.iok || u != c.u64 || uok != c.uok {
			t.Errorf("%q: strtol %d %v, strtoull %d %v", c.in, i, iok, u, uok)
		}
	}
}

func TestMetaScripts(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"mg miss quiet then hit", "mg k v q\r\nms k 2 T0\r\nhi\r\nmg k v k t s\r\n", "HD\r\nVA 2 kk t-1 s2\r\nhi\r\n"},
		{"ms binary key echo", "ms Ymlu 1 b k q\r\nx\r\nms Ymlu 1 b k\r\ny\r\nmg bin k v\r\n", "HD kYmlu b\r\nVA 1 kYmlu b\r\ny\r\n"},
		{"md quiet", "md k q\r\nms k 1\r\nx\r\nmd k q\r\nmd k q Oa\r\n", "NF\r\nHD\r\nNF Oa\r\n"},
		{"ma vivify quiet shows", "ma n q N0 J7 v\r\nma n q v\r\nmg n v\r\n", "VA 1\r\n7\r\nVA 1\r\n8\r\n"},
		{"me", "me k\r\nms k 1\r\nx\r\nme k\r\n", "EN\r\nHD\r\nME k exp=-1 la=0 cas=1 fetch=no cls=1 size=61\r\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cn := newConn(newTestServer(t), nil)
			got, _ := feed(cn, &fakeConn{}, c.in)
			if got != c.want {
				t.Errorf("got  %q\nwant %q", got, c.want)
			}
		})
	}
}

// TestMetaZeroAllocRequests proves the meta request paths allocate nothing in steady state.
func TestMetaZeroAllocRequests(t *testing.T) {
	s := newTestServer(t)
	cn := newConn(s, s.newLoopShared(true)) // an event loop's: execute samples into its hot-key tracker
	reqs := []string{
		"ms k 5 T100 F3 c k\r\nhello\r\n", "mg k v t c f s k O123 h l\r\n", "mg k q\r\n", "mg nope v k\r\n",
		"ms YmluAA== 1 b k\r\nx\r\n", "mg YmluAA== b k v\r\n", "ms n 4\r\n1000\r\n", "ma n v t c\r\n",
		"md nope k\r\n", "me k\r\n", "mg k R30 N30 T30 t\r\n",
	}
	for _, r := range reqs {
		in := []byte(r)
		run := func() {
			n, err := cn.parser.Parse(in, &cn.req)
			if err != nil || n != len(in) {
				t.Fatalf("%q: n=%d err=%v", r, n, err)
			}
			cn.execute(&cn.req)
			cn.out = cn.out[:0]
		}
		run()
		if a := testing.AllocsPerRun(200, run); a != 0 {
			t.Errorf("%q: %.1f allocations per request", strings.TrimSpace(r), a)
		}
	}
}
