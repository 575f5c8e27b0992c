package server

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/leasecached/leasecached/protocol"
)

func TestParseMetaFlags(t *testing.T) {
	cases := []struct {
		name string
		key  string
		toks string
		err  string // "" = accepted
		chk  func(f *metaFlags) bool
	}{
		{"none", "k", "", "", nil},
		{"return flags", "k", "v s t c f h l k Oab P L u q", "", func(f *metaFlags) bool {
			return f.value && f.noUpdate && f.noReply && f.locked
		}},
		{"T N R values", "k", "T10 N-1 R4294967396", "", func(f *metaFlags) bool {
			return f.newTTL && f.exptime == 10 && f.vivify && f.vivifyExp == -1 && f.recache && f.recacheExp == 100
		}},
		{"ms ma values", "k", "F4294967297 C12 MD J5 D7 I", "", func(f *metaFlags) bool {
			return f.clientFlags == 1 && f.hasCas && f.cas == 12 && f.mode == 'D' && f.initial == 5 && f.delta == 7 && f.setStale
		}},
		{"duplicate", "k", "v v", "CLIENT_ERROR duplicate flag", nil},
		{"high byte is duplicate", "k", "\xff", "CLIENT_ERROR duplicate flag", nil},
		{"unknown", "k", "E5", "CLIENT_ERROR invalid flag", nil},
		{"unknown wins over earlier bad value", "k", "Tx Z", "CLIENT_ERROR invalid flag", nil},
		{"bad T", "k", "Tx", "CLIENT_ERROR bad token in command line format", nil},
		{"empty N", "k", "N", "CLIENT_ERROR bad token in command line format", nil},
		{"bad F keeps default", "k", "Fx", "CLIENT_ERROR bad command line format", nil},
		{"bad F keeps earlier", "k", "Tx Fx", "CLIENT_ERROR bad token in command line format", nil},
		{"last message wins", "k", "Tx Jx", "CLIENT_ERROR invalid numeric initial value", nil},
		{"bad D", "k", "D-1", "CLIENT_ERROR invalid numeric delta value", nil},
		{"M length", "k", "MXX", "CLIENT_ERROR incorrect length for M token", nil},
		{"bad C", "k", "C", "CLIENT_ERROR bad token in command line format", nil},
		{"b decodes", "Ymlu", "b", "", func(f *metaFlags) bool { return f.keyBinary && string(f.key) == "bin" }},
		{"b fails", "abc", "b", "CLIENT_ERROR error decoding key", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var f metaFlags
			var buf [250]byte
			var toks [][]byte
			for _, s := range strings.Fields(c.toks) {
				toks = append(toks, []byte(s))
			}
			got := string(bytes.TrimSuffix(parseMetaFlags(&f, []byte(c.key), toks, buf[:]), []byte("\r\n")))
			if got != c.err {
				t.Fatalf("error %q, want %q", got, c.err)
			}
			if c.chk != nil && !c.chk(&f) {
				t.Errorf("flags %+v", f)
			}
		})
	}
}

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
		got, ok := decodeKeyBase64(buf[:], []byte(c.in))
		if ok != c.ok || string(got) != c.want {
			t.Errorf("decode(%q) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
		}
	}
	if got := string(appendKey(nil, []byte("bin\x00"), true)); got != "YmluAA== b" {
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
	cn := newConn(newTestServer(t), nil)
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

func FuzzParseMetaFlags(f *testing.F) {
	for _, s := range []string{"k v t c", "Ymlu b k", "k T10 N5 R1 O12 q", "k MD J1 D2 C3 F4 I", "k Tx Fx", "k \xff", "a=== b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			return
		}
		var toks [][]byte
		for _, s := range fields[1:] {
			toks = append(toks, []byte(s))
		}
		key := []byte(fields[0])
		var fl metaFlags
		var buf [250]byte
		errReply := parseMetaFlags(&fl, key, toks, buf[:])
		if errReply != nil {
			if !bytes.HasPrefix(errReply, []byte("CLIENT_ERROR ")) || !bytes.HasSuffix(errReply, []byte("\r\n")) {
				t.Fatalf("bad error reply %q", errReply)
			}
			return
		}
		if fl.keyBinary {
			if len(fl.key) == 0 || len(fl.key) > len(key)/4*3 {
				t.Fatalf("decoded key %q from %q", fl.key, key)
			}
			return
		}
		if !bytes.Equal(fl.key, key) {
			t.Fatalf("key changed without b: %q", fl.key)
		}
	})
}

func FuzzDecodeKeyBase64(f *testing.F) {
	for _, s := range []string{"Ymlu", "YQ==", "a===", "Y!m(l)u", "", "===="} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		buf := make([]byte, len(src))
		got, ok := decodeKeyBase64(buf, src)
		if !ok {
			return
		}
		// Whatever was decoded must survive a round trip through the strict encoder and decoder.
		enc := base64.StdEncoding.EncodeToString(got)
		again, ok2 := decodeKeyBase64(make([]byte, len(enc)), []byte(enc))
		if !ok2 || !bytes.Equal(again, got) {
			t.Fatalf("round trip of %q: %q -> %q", src, got, again)
		}
	})
}
