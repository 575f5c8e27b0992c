package load

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

// feedChunks feeds in to p the way a connection does: chunks arrive one after the other, each appended to
// what the parser left unconsumed. It returns the error, if any, and the bytes never consumed.
func feedChunks(p *replyParser, in string, chunks []int) (rest string, err error) {
	var buf []byte
	pos := 0
	for _, n := range chunks {
		buf = append(buf, in[pos:pos+n]...)
		pos += n
		used, err := p.feed(buf)
		if used < 0 || used > len(buf) {
			panic("feed used more than it was given")
		}
		buf = buf[used:]
		if err != nil {
			return string(buf), err
		}
	}
	return string(buf), nil
}

// splits yields the ways to cut in into chunks that the tests try: whole, every single cut point, one
// byte at a time, and some random chunkings. Inputs longer than 4 KB are cut at every point of their
// first and last 300 bytes and every 97th in between, and not fed one byte at a time.
func splits(in string, seed uint64) [][]int {
	n := len(in)
	out := [][]int{{n}}
	for cut := 1; cut < n; cut++ {
		if n <= 4096 || cut < 300 || cut > n-300 || cut%97 == 0 {
			out = append(out, []int{cut, n - cut})
		}
	}
	if n > 0 && n <= 4096 {
		ones := make([]int, n)
		for i := range ones {
			ones[i] = 1
		}
		out = append(out, ones)
	}
	r := rand.New(rand.NewPCG(seed, 7))
	for range 20 {
		var ch []int
		for left := n; left > 0; {
			c := min(left, 1+r.IntN(64))
			ch = append(ch, c)
			left -= c
		}
		out = append(out, ch)
	}
	return out
}

func TestReplyParser(t *testing.T) {
	value4k := strings.Repeat("v", 4096)
	multi := ""
	for i := range 10 {
		multi += "VALUE k" + itoa(i) + " 0 4096\r\n" + value4k + "\r\n"
	}
	const g, s = true, false
	tests := []struct {
		name  string
		isGet []bool
		in    string
		hits  uint64
		sets  uint64
		fails uint64
		// wantErr is a substring of the error; rest is what the parser must leave unconsumed (no error).
		wantErr string
		rest    string
	}{
		{name: "miss", isGet: []bool{g}, in: "END\r\n"},
		{name: "one hit", isGet: []bool{g}, in: "VALUE a 5 3\r\nabc\r\nEND\r\n", hits: 1},
		{name: "gets cas field", isGet: []bool{g}, in: "VALUE a 0 2 99\r\nhi\r\nEND\r\n", hits: 1},
		{name: "empty value", isGet: []bool{g}, in: "VALUE a 0 0\r\n\r\nEND\r\n", hits: 1},
		{name: "data with crlf and END inside", isGet: []bool{g}, in: "VALUE a 0 9\r\n\r\nEND\r\n\r\n\r\nEND\r\n", hits: 1},
		{name: "lease granted is not a hit", isGet: []bool{g}, in: "LVALUE a 12345 0 0\r\n\r\nEND\r\n"},
		{name: "hot miss with stale value", isGet: []bool{g}, in: "LVALUE a 1 7 3\r\nold\r\nEND\r\n"},
		{name: "lease-get mixed", isGet: []bool{g, g},
			in: "VALUE a 0 1\r\nx\r\nLVALUE b 9 0 0\r\n\r\nEND\r\nLVALUE c 3 1 2\r\nzz\r\nVALUE d 1 1\r\ny\r\nEND\r\n", hits: 2},
		{name: "4 KB values, 10-key multi-get", isGet: []bool{g, g}, in: multi + "END\r\n" + multi + "END\r\n", hits: 20},
		{name: "sets", isGet: []bool{s, s, s}, in: "STORED\r\nNOT_STORED\r\nSERVER_ERROR out of memory storing object\r\n",
			sets: 3, fails: 2},
		{name: "mixed batch", isGet: []bool{g, s, g, s},
			in: "VALUE k1 0 3\r\nabc\r\nEND\r\nSTORED\r\nEND\r\nSTORED\r\n", hits: 1, sets: 2},
		{name: "stops after the last reply", isGet: []bool{g}, in: "END\r\nSTORED\r\n", rest: "STORED\r\n"},
		{name: "server error in a get", isGet: []bool{g}, in: "SERVER_ERROR out of memory\r\n", wantErr: "SERVER_ERROR out of memory"},
		{name: "client error", isGet: []bool{s}, in: "CLIENT_ERROR bad data chunk\r\n", wantErr: "CLIENT_ERROR"},
		{name: "error", isGet: []bool{g}, in: "ERROR\r\n", wantErr: "ERROR"},
		{name: "error after a hit", isGet: []bool{g, g}, in: "VALUE a 0 1\r\nx\r\nEND\r\nERROR\r\n", wantErr: "ERROR"},
		{name: "stored for a get", isGet: []bool{g}, in: "STORED\r\n", wantErr: "unexpected line"},
		{name: "END for a set", isGet: []bool{s}, in: "END\r\n", wantErr: "unexpected reply to a set"},
		{name: "exists", isGet: []bool{s}, in: "EXISTS\r\n", wantErr: "unexpected reply to a set"},
		{name: "bad length", isGet: []bool{g}, in: "VALUE a 0 x\r\nabc\r\nEND\r\n", wantErr: "malformed"},
		{name: "lease without token", isGet: []bool{g}, in: "LVALUE a 0 3\r\nabc\r\nEND\r\n", wantErr: "malformed"},
		{name: "value too large", isGet: []bool{g}, in: "VALUE a 0 " + itoa(4*maxValueSize+1) + "\r\n", wantErr: "malformed"},
		{name: "short block", isGet: []bool{g}, in: "VALUE a 0 5\r\nab\r\nEND\r\n", wantErr: "not followed"},
		{name: "long block", isGet: []bool{g}, in: "VALUE a 0 2\r\nabc\r\nEND\r\n", wantErr: "not followed"},
		{name: "block and a bare return", isGet: []bool{g}, in: "VALUE a 0 2\r\nab\rxEND\r\n", wantErr: "not followed"},
		{name: "line too long", isGet: []bool{g}, in: strings.Repeat("a", maxReplyLine+2), wantErr: "too long"},
		{name: "bare newline", isGet: []bool{g}, in: "VALUE a 0 1\nx\r\nEND\r\n", wantErr: "bare"},
		{name: "empty bare newline", isGet: []bool{s}, in: "\nSTORED\r\n", wantErr: "bare"},
	}
	for _, tc := range tests {
		for _, ch := range splits(tc.in, uint64(len(tc.name))) {
			var p replyParser
			p.reset(tc.isGet)
			rest, err := feedChunks(&p, tc.in, ch)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("%s, chunks %v: err %v, want %q", tc.name, ch, err, tc.wantErr)
				}
				continue
			}
			if err != nil || !p.done() || rest != tc.rest || p.hits != tc.hits || p.sets != tc.sets || p.setFailed != tc.fails {
				t.Fatalf("%s, chunks %v: err %v done %v rest %q hits %d sets %d failed %d; want rest %q hits %d sets %d failed %d",
					tc.name, ch, err, p.done(), rest, p.hits, p.sets, p.setFailed, tc.rest, tc.hits, tc.sets, tc.fails)
			}
		}
	}
}

// TestReplyParserIncomplete: a truncated reply is no error, only not done, at every cut point.
func TestReplyParserIncomplete(t *testing.T) {
	in := "VALUE a 0 3\r\nabc\r\nLVALUE b 1 0 2\r\nxy\r\nEND\r\nSTORED\r\n"
	for cut := 0; cut < len(in); cut++ {
		var p replyParser
		p.reset([]bool{true, false})
		if _, err := feedChunks(&p, in[:cut], []int{cut}); err != nil || p.done() {
			t.Errorf("cut at %d: err %v done %v", cut, err, p.done())
		}
	}
}

// TestReplyParserErrorTypes: error replies keep their type for errors.As (a lease-get against memcached
// must say that the server answered ERROR).
func TestReplyParserErrorTypes(t *testing.T) {
	for _, in := range []string{"ERROR\r\n", "CLIENT_ERROR x\r\n", "SERVER_ERROR y\r\n"} {
		var p replyParser
		p.reset([]bool{true})
		_, err := p.feed([]byte(in))
		var se *serverError
		if !errors.As(err, &se) {
			t.Errorf("%q: err %T %v, want *serverError", in, err, err)
		}
	}
	var p replyParser
	p.reset([]bool{true})
	if _, err := p.feed([]byte(strings.Repeat("x", 2*maxReplyLine))); !errors.Is(err, errReplyLineTooLong) {
		t.Errorf("long line: err %v", err)
	}
}

// TestReplyParserLargeValueSmallBuffer streams a 1 MiB value through a read buffer of minReadBuf bytes, as
// a connection does: the parser never needs a whole block in the buffer.
func TestReplyParserLargeValueSmallBuffer(t *testing.T) {
	in := "VALUE big 0 " + itoa(maxValueSize) + "\r\n" + strings.Repeat("d", maxValueSize) + "\r\nEND\r\n"
	var p replyParser
	p.reset([]bool{true})
	buf := make([]byte, 0, minReadBuf)
	for pos := 0; pos < len(in); {
		n := copy(buf[len(buf):cap(buf)], in[pos:])
		pos += n
		buf = buf[:len(buf)+n]
		used, err := p.feed(buf)
		if err != nil {
			t.Fatal(err)
		}
		buf = buf[:copy(buf, buf[used:])]
	}
	if !p.done() || p.hits != 1 || len(buf) != 0 {
		t.Errorf("done %v hits %d, %d bytes left", p.done(), p.hits, len(buf))
	}
}

func TestReplyParserAllocatesNothing(t *testing.T) {
	isGet := []bool{true, false, true, true, false, true, true, true, true, true, true, true, true, true, true, true}
	var in []byte
	for _, g := range isGet {
		if g {
			in = append(in, "VALUE k0000000000001 0 100\r\n"+strings.Repeat("x", 100)+"\r\nLVALUE k2 77 0 0\r\n\r\nEND\r\n"...)
		} else {
			in = append(in, "STORED\r\n"...)
		}
	}
	var p replyParser
	if a := testing.AllocsPerRun(1000, func() {
		p.reset(isGet)
		// Two pieces, split inside a line, as two reads would bring them.
		used, err := p.feed(in[:100])
		if err != nil {
			t.Fatal(err)
		}
		rest := in[used:]
		if used, err = p.feed(rest); err != nil || used != len(rest) || !p.done() {
			t.Fatalf("used %d of %d, err %v", used, len(rest), err)
		}
	}); a != 0 {
		t.Errorf("parsing a batch allocates %v times", a)
	}
}

// valueLineFast takes the plain VALUE lines whole and leaves every other line, complete or not, to the
// general path.
func TestValueLineFast(t *testing.T) {
	tests := []struct {
		in      string
		size, n int // n 0: declined
	}{
		{"VALUE k 0 5\r\nhello", 5, 13},
		{"VALUE k0000000012345 2654435761 100\r\n", 100, 37},
		{"VALUE k 1 2 18446744073709551\r\n", 2, 31}, // a gets reply's cas
		{"VALUE k 0 0\r\n", 0, 13},
		{"VALUE " + strings.Repeat("k", 250) + " 0 1\r\n", 1, 262},
		{"VALUE " + strings.Repeat("k", 251) + " 0 1\r\n", 0, 0}, // longer than memcached's keys
		{"VALUE k 1234567890123456789 1\r\n", 1, 31},
		{"VALUE k 12345678901234567890 1\r\n", 0, 0}, // twenty digits
		{"VALUE k 0 " + itoa(4*maxValueSize) + "\r\n", 4 * maxValueSize, 19},
		{"VALUE k 0 " + itoa(4*maxValueSize+1) + "\r\n", 0, 0},
		{"VALUE k 0 12345678\r\n", 0, 0},
		{"VALUE k  0 1\r\n", 0, 0}, // two spaces
		{"VALUE k 0 1 \r\n", 0, 0},
		{"VALUE k 0x 1\r\n", 0, 0},
		{"VALUE k 0 1x\r\n", 0, 0},
		{"VALUE k 0 1\n", 0, 0},
		{"VALUE k 0 1\r", 0, 0}, // not all there yet
		{"VALUE k 0 1", 0, 0},   // nor here
		{"VALUE k 0", 0, 0},     //
		{"VALUE k", 0, 0},       //
		{"VALUE ", 0, 0},        //
		{"VALU", 0, 0},          //
		{"LVALUE k 9 0 1\r\n", 0, 0},
		{"END\r\n", 0, 0},
		{"VALUE k\t0 1\r\n", 0, 0},
		{"VALUE \xffk 0 1\r\n", 1, 14}, // bytes above 0x7f are key bytes, as for the general path
		{"VALUE k 9:9 1\r\n", 0, 0},
		{"VALUE k 0 /\r\n", 0, 0},
	}
	for _, tc := range tests {
		size, n := valueLineFast([]byte(tc.in))
		if size != tc.size || n != tc.n {
			t.Errorf("%q: size %d n %d, want %d %d", tc.in, size, n, tc.size, tc.n)
		}
	}
}

// A line valueLineFast takes is a complete line the general path reads the same way.
func FuzzValueLineFast(f *testing.F) {
	for _, s := range []string{"VALUE k 0 5\r\nhello", "VALUE k0000000012345 2654435761 100\r\n", "VALUE k 1 2 3\r\n",
		"VALUE k 00 007\r\n", "VALUE k 0 1\r", "LVALUE k 9 0 1\r\n", "VALUE k 99999999999999999999 1\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		size, n := valueLineFast(b)
		if n == 0 {
			if size != 0 {
				t.Fatalf("declined %q with size %d", b, size)
			}
			return
		}
		line := b[:n]
		if !bytes.HasSuffix(line, []byte("\r\n")) || bytes.IndexByte(line, '\n') != n-1 {
			t.Fatalf("took %q: not one line with its \\r\\n", line)
		}
		_, _, want, lease, err := parseValueLine(line[:n-2])
		if err != nil || lease || want != size {
			t.Fatalf("%q: fast size %d; general size %d lease %v err %v", line, size, want, lease, err)
		}
	})
}

// plainLen and digitsLen agree with a byte loop, across word boundaries and the bytes whose carry could
// spoil a word test.
func TestWordScans(t *testing.T) {
	slowPlain := func(b []byte) int {
		i := 0
		for i < len(b) && b[i] > ' ' {
			i++
		}
		return i
	}
	slowDigits := func(b []byte) int {
		i := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i
	}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("0123456789 :/\x00\x1f\x20\x21\x7f\x80\xf9\xfa\xffk\r\n")
	for n := range 2000 {
		b := make([]byte, n%23)
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
			if rng.IntN(3) > 0 { // mostly long runs of digits
				b[i] = byte('0' + rng.IntN(10))
			}
		}
		if got, want := plainLen(b), slowPlain(b); got != want {
			t.Fatalf("plainLen(%q) = %d, want %d", b, got, want)
		}
		if got, want := digitsLen(b), slowDigits(b); got != want {
			t.Fatalf("digitsLen(%q) = %d, want %d", b, got, want)
		}
	}
}

// dataSize reads one to seven digits, as a byte loop does, whatever follows them and however little of the
// buffer is left, and declines none or eight and more.
func TestDataSize(t *testing.T) {
	slow := func(b []byte) (int, int) {
		k, v := 0, 0
		for k < len(b) && b[k] >= '0' && b[k] <= '9' {
			v = v*10 + int(b[k]-'0')
			k++
		}
		if k > 7 {
			return 0, 0
		}
		return v, k
	}
	rng := rand.New(rand.NewPCG(3, 4))
	followers := []string{"", "\r\n", " 7\r\n", "\r\nabcdefgh", "x", ":", "/", "\xfa\xff", "12345678"}
	var numbers []string
	for d := 1; d <= 9; d++ {
		lo := itoa(pow10(d - 1))
		numbers = append(numbers, lo, itoa(pow10(d)-1), "0"+lo, strings.Repeat("0", d))
		for range 20 {
			numbers = append(numbers, itoa(pow10(d-1)+rng.IntN(pow10(d)-pow10(d-1))))
		}
	}
	numbers = append(numbers, "", " 1", "a1")
	for _, num := range numbers {
		for _, f := range followers {
			b := []byte(num + f)
			size, k := dataSize(b)
			if ws, wk := slow(b); size != ws || k != wk {
				t.Fatalf("dataSize(%q) = %d %d, want %d %d", b, size, k, ws, wk)
			}
		}
	}
}

func pow10(d int) int {
	v := 1
	for range d {
		v *= 10
	}
	return v
}
