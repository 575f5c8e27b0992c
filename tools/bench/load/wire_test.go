package load

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

type recordingChecker struct{ keys, values []string }

func (r *recordingChecker) check(key []byte, _ uint64, data []byte) {
	r.keys = append(r.keys, string(key))
	r.values = append(r.values, string(data))
}

func TestReadGetReply(t *testing.T) {
	big := strings.Repeat("x", 3*readBufSize) // forces the read buffer to grow
	tests := []struct {
		name    string
		in      string
		hits    int
		keys    []string
		values  []string
		wantErr string
	}{
		{"miss", "END\r\n", 0, nil, nil, ""},
		{"one hit", "VALUE a 5 3\r\nabc\r\nEND\r\n", 1, []string{"a"}, []string{"abc"}, ""},
		{"gets cas field", "VALUE a 0 2 99\r\nhi\r\nEND\r\n", 1, []string{"a"}, []string{"hi"}, ""},
		{"two hits", "VALUE a 0 1\r\n1\r\nVALUE bb 0 2\r\n22\r\nEND\r\n", 2, []string{"a", "bb"}, []string{"1", "22"}, ""},
		{"empty value", "VALUE a 0 0\r\n\r\nEND\r\n", 1, []string{"a"}, []string{""}, ""},
		{"data with crlf inside", "VALUE a 0 4\r\n\r\n\r\n\r\nEND\r\n", 1, []string{"a"}, []string{"\r\n\r\n"}, ""},
		{"lease granted is not a hit", "LVALUE a 12345 0 0\r\n\r\nEND\r\n", 0, nil, nil, ""},
		{"hot miss with stale value", "LVALUE a 1 7 3\r\nold\r\nEND\r\n", 0, nil, nil, ""},
		{"large value", "VALUE k 0 " + itoa(len(big)) + "\r\n" + big + "\r\nEND\r\n", 1, []string{"k"}, []string{big}, ""},
		{"server error", "SERVER_ERROR out of memory\r\n", 0, nil, nil, "SERVER_ERROR out of memory"},
		{"client error", "CLIENT_ERROR bad command line format\r\n", 0, nil, nil, "CLIENT_ERROR"},
		{"error", "ERROR\r\n", 0, nil, nil, "ERROR"},
		{"garbage", "STORED\r\n", 0, nil, nil, "unexpected line"},
		{"bad length", "VALUE a 0 x\r\nabc\r\nEND\r\n", 0, nil, nil, "malformed"},
		{"short block", "VALUE a 0 5\r\nab\r\nEND\r\n", 0, nil, nil, "not followed"},
		{"truncated", "VALUE a 0 3\r\nab", 0, nil, nil, "EOF"},
	}
	for _, tc := range tests {
		for _, oneByte := range []bool{false, true} {
			var r io.Reader = strings.NewReader(tc.in)
			if oneByte {
				r = iotest.OneByteReader(r)
			}
			rc := &recordingChecker{}
			hits, err := newReplyReader(r).readGetReply(rc)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("%s (one byte %v): err %v, want %q", tc.name, oneByte, err, tc.wantErr)
				}
				continue
			}
			if err != nil || hits != tc.hits || !equalStrings(rc.keys, tc.keys) || !equalStrings(rc.values, tc.values) {
				t.Errorf("%s (one byte %v): hits %d keys %q err %v; want hits %d keys %q",
					tc.name, oneByte, hits, rc.keys, err, tc.hits, tc.keys)
			}
		}
	}
}

func TestReadStoreReply(t *testing.T) {
	tests := []struct {
		in   string
		want storeResult
		err  bool
	}{
		{"STORED\r\n", storeOK, false},
		{"NOT_STORED\r\n", storeNotStored, false},
		{"SERVER_ERROR out of memory storing object\r\n", storeServerError, false},
		{"CLIENT_ERROR bad data chunk\r\n", 0, true},
		{"EXISTS\r\n", 0, true},
		{"", 0, true},
	}
	for _, tc := range tests {
		got, err := newReplyReader(strings.NewReader(tc.in)).readStoreReply()
		if (err != nil) != tc.err || (!tc.err && got != tc.want) {
			t.Errorf("%q: got %v err %v", tc.in, got, err)
		}
	}
	var se *serverError
	_, err := newReplyReader(strings.NewReader("ERROR\r\n")).readStoreReply()
	if !errors.As(err, &se) {
		t.Errorf("ERROR gives %T %v, want *serverError", err, err)
	}
}

func TestReplyLineTooLong(t *testing.T) {
	_, err := newReplyReader(strings.NewReader(strings.Repeat("a", 2*maxReplyLine))).line()
	if !errors.Is(err, errReplyLineTooLong) {
		t.Errorf("err %v, want %v", err, errReplyLineTooLong)
	}
}

func TestEncodersAndKeySpace(t *testing.T) {
	ks, err := newKeySpace(1000, 10, 8)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := newValueSource(5)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(appendGet(nil, "get", ks, []uint64{0, 9})); got != "get k0001000 k0001009\r\n" {
		t.Errorf("appendGet = %q", got)
	}
	set := string(appendSet(nil, ks, vs, 3))
	want := "set k0001003 " + itoa(int(vs.flags(3))) + " 0 5\r\n" + string(vs.value(3)) + "\r\n"
	if set != want {
		t.Errorf("appendSet = %q, want %q", set, want)
	}
	for i := uint64(0); i < 10; i++ {
		k := ks.appendKey(nil, i)
		if len(k) != 8 {
			t.Fatalf("key %q not 8 bytes", k)
		}
		if j, ok := ks.index(k); !ok || j != i {
			t.Errorf("index(%q) = %d %v, want %d", k, j, ok, i)
		}
	}
	for _, bad := range []string{"k0001010", "x0001000", "k000100", "k00010a0", "k0000999"} {
		if _, ok := ks.index([]byte(bad)); ok {
			t.Errorf("index(%q) accepted", bad)
		}
	}
	if _, err := newKeySpace(0, 1000000, 6); err == nil {
		t.Error("6-byte keys for a million indexes accepted")
	}
	if _, err := newKeySpace(0, 10, maxKeyLen+1); err == nil {
		t.Error("over-long keys accepted")
	}
	if bytes.Equal(vs.value(1), vs.value(2)) {
		t.Error("neighbouring indexes share a value")
	}
}

// TestRoundTripVerification writes a reply the way a server would for encoded sets and checks that the
// fill checker accepts exact values and catches a flipped byte and a wrong flag.
func TestRoundTripVerification(t *testing.T) {
	ks, _ := newKeySpace(0, 100, 14)
	vs, _ := newValueSource(100)
	reply := func(i uint64, flags uint32, data []byte) string {
		return "VALUE " + string(ks.appendKey(nil, i)) + " " + itoa(int(flags)) + " " + itoa(len(data)) + "\r\n" +
			string(data) + "\r\n"
	}
	flipped := append([]byte(nil), vs.value(5)...)
	flipped[50] ^= 1
	in := reply(4, vs.flags(4), vs.value(4)) + reply(5, vs.flags(5), flipped) +
		reply(6, vs.flags(6)+1, vs.value(6)) + reply(7, vs.flags(7), vs.value(8)) + "END\r\n"
	fc := &fillChecker{ks: ks, vs: vs}
	if _, err := newReplyReader(strings.NewReader(in)).readGetReply(fc); err != nil {
		t.Fatal(err)
	}
	if fc.present != 1 || fc.corrupt != 3 {
		t.Errorf("present %d corrupt %d, want 1 and 3", fc.present, fc.corrupt)
	}
}

// repeatReader serves the same bytes forever.
type repeatReader struct {
	data []byte
	off  int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], r.data[r.off:])
		n += c
		r.off = (r.off + c) % len(r.data)
	}
	return n, nil
}

func TestHotPathAllocatesNothing(t *testing.T) {
	ks, _ := newKeySpace(0, 1000, 14)
	vs, _ := newValueSource(100)
	buf := make([]byte, 0, writeBufSize)
	idx := []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if a := testing.AllocsPerRun(1000, func() {
		buf = appendGet(buf[:0], "get", ks, idx)
		buf = appendSet(buf, ks, vs, 7)
	}); a != 0 {
		t.Errorf("encoding allocates %v times", a)
	}
	rr := newReplyReader(&repeatReader{data: []byte("VALUE k0000000000001 0 3\r\nabc\r\nEND\r\nSTORED\r\n")})
	if a := testing.AllocsPerRun(1000, func() {
		if _, err := rr.readGetReply(nil); err != nil {
			t.Fatal(err)
		}
		if _, err := rr.readStoreReply(); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("reply parsing allocates %v times", a)
	}
}

func TestProcParsers(t *testing.T) {
	stat := []byte("1234 (mem cached) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 4 0 100 0 0")
	cpu, err := parseProcStatCPU(stat)
	if err != nil || cpu.Seconds() != 3 {
		t.Errorf("cpu %v err %v, want 3s (300 ticks)", cpu, err)
	}
	if _, err := parseProcStatCPU([]byte("garbage")); err == nil {
		t.Error("garbage stat accepted")
	}
	rss, err := parseVmRSS([]byte("Name:\tx\nVmPeak:\t 100 kB\nVmRSS:\t   2048 kB\n"))
	if err != nil || rss != 2048<<10 {
		t.Errorf("rss %d err %v", rss, err)
	}
	if _, err := parseVmRSS([]byte("Name:\tx\n")); err == nil {
		t.Error("status without VmRSS accepted")
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func itoa(i int) string { return string(appendInt(nil, i)) }

func appendInt(b []byte, i int) []byte {
	if i >= 10 {
		b = appendInt(b, i/10)
	}
	return append(b, byte('0'+i%10))
}

// appendKey writes the index's number, zero-padded, for every length of number and key, with and without
// a base.
func TestAppendKeyDigits(t *testing.T) {
	for _, base := range []uint64{0, 7, 1e9} {
		for size := 2; size <= 22; size++ {
			ks, err := newKeySpace(base, 1, size)
			if err != nil {
				continue // base does not fit in size
			}
			for v := uint64(1); v < 1e19; v = v*10 + v%7 {
				if 1+decimalLen(base+v) > size {
					break
				}
				ks.count = v + 1
				want := "k" + strings.Repeat("0", size-1-decimalLen(base+v)) + itoa(int(base+v))
				if got := string(ks.appendKey([]byte("get "), v)); got != "get "+want {
					t.Fatalf("base %d size %d: appendKey(%d) = %q, want %q", base, size, v, got, "get "+want)
				}
			}
			if got := string(ks.appendKey(nil, 0)); got != "k"+strings.Repeat("0", size-1-decimalLen(base))+itoa(int(base)) {
				t.Fatalf("base %d size %d: appendKey(0) = %q", base, size, got)
			}
		}
	}
}
