package protocol

import (
	"bytes"
	"testing"
	"unsafe"
)

// FuzzParse checks Parse's contract on arbitrary input:
//   - it never panics and 0 <= n <= len(buf);
//   - n == 0 implies err == nil (an error always consumes the offending line);
//   - a successful parse consumes something and names a command;
//   - the same bytes cut at an arbitrary point, and fed in small chunks, produce the same events
//     as the whole buffer (split invariance);
//   - the request only aliases bytes inside the consumed prefix.
func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s), uint16(3))
		f.Add([]byte(s), uint16(len(s)-2)) // mid-way through the last request, often in its data block
	}
	f.Fuzz(func(t *testing.T, in []byte, cut uint16) {
		p := Parser{MaxItemSize: 4096} // small, so the too-large/swallow path is reachable
		c := int(cut) % (len(in) + 1)
		parseChecked(t, &p, in[:c]) // a prefix, which mostly ends in an incomplete request
		parseChecked(t, &p, in)

		// Like memcached, a line longer than MaxLineLength is processed when it arrives whole and closes
		// the connection when it arrives in pieces (line.go): for such inputs the result depends on the
		// split by design, so only the invariants above apply.
		if hasLongLine(in) {
			return
		}
		whole := drive(&p, [][]byte{in})
		if got := drive(&p, [][]byte{in[:c], in[c:]}); !equalStrings(got, whole) {
			t.Fatalf("cut at %d:\n got  %q\n want %q", c, got, whole)
		}
		step := int(cut%13) + 1
		if got := drive(&p, splitEvery(in, step)); !equalStrings(got, whole) {
			t.Fatalf("chunks of %d:\n got  %q\n want %q", step, got, whole)
		}
	})
}

// parseChecked parses in request by request, as a connection would, and checks each result's invariants,
// up to the first incomplete request or closing error.
func parseChecked(t *testing.T, p *Parser, in []byte) {
	t.Helper()
	var req Request
	for off := 0; off < len(in); {
		buf := in[off:]
		n, err := p.Parse(buf, &req)
		if n < 0 || n > len(buf) {
			t.Fatalf("n=%d outside [0,%d]", n, len(buf))
		}
		if err != nil {
			e, ok := err.(*Error)
			if !ok {
				t.Fatalf("error of type %T", err)
			}
			if n == 0 {
				t.Fatalf("error %v with n == 0", e)
			}
			if e.Swallow < 0 || e.Close && e.Swallow > 0 {
				t.Fatalf("bad error %+v", e)
			}
			if e.Close {
				break
			}
			off += n + e.Swallow
			continue
		}
		if n == 0 {
			checkNeed(t, p, buf)
			break
		}
		if req.Cmd == CmdNone {
			t.Fatal("successful parse without a command")
		}
		checkAliases(t, &req, buf[:n])
		off += n
	}
}

// checkAliases verifies every slice in req points into consumed.
func checkAliases(t *testing.T, req *Request, consumed []byte) {
	t.Helper()
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(consumed)))
	hi := lo + uintptr(len(consumed))
	inside := func(what string, b []byte) {
		if len(b) == 0 {
			return
		}
		p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		if p < lo || p+uintptr(len(b)) > hi {
			t.Fatalf("%s %q is not inside the consumed bytes", what, b)
		}
	}
	for _, k := range req.Keys {
		inside("key", k)
	}
	for _, a := range req.Args {
		inside("arg", a)
	}
	inside("data", req.Data)
}

// fuzzSeeds are realistic starting points; the committed corpus in testdata/fuzz/FuzzParse holds
// the same kind of inputs.
var fuzzSeeds = []string{
	"get a b c\r\n",
	"set k 0 0 5\r\nhello\r\nget k\r\n",
	"set k 0 0 5\r\nhelloXXget k\r\n",
	"cas k 1 2 3 4 noreply\r\nabc\r\n",
	"lease-get a\r\nlease-set a 12345 0 0 1\r\nx\r\n",
	"set k 0 0 5000\r\nabc",
	"ms k 3 T5 F1 q\r\nabc\r\nmn\r\n",
	"ms k 5000 Z\r\nab",
	"mg k v t\r\nmd k q\r\nma k D3\r\nme k\r\n",
	"incr k 1\r\ndecr k x noreply\r\ntouch k 5\r\ndelete k 0 noreply\r\n",
	"flush_all 5\r\nversion\r\nverbosity 1\r\nstats items\r\nquit\r\n",
	"gat 10 a b\r\ngats x a\r\n",
	"\r\n\n \x00get\r\n",
}

// hasLongLine reports whether any newline-terminated (or final) segment of in is longer than MaxLineLength.
func hasLongLine(in []byte) bool {
	for len(in) > 0 {
		i := bytes.IndexByte(in, '\n')
		if i < 0 {
			return len(in) > MaxLineLength
		}
		if i > MaxLineLength {
			return true
		}
		in = in[i+1:]
	}
	return false
}

// FuzzSplitLine checks that splitLine's one-pass path answers exactly as frameLine followed by tokenize,
// the rules memcached's own framing and tokenising follow, on any bytes.
func FuzzSplitLine(f *testing.F) {
	fuzzCheck(f, splitLineCases, func(t *testing.T, in []byte) { checkSplitLine(t, in) })
}

// FuzzParseHot checks that the hot path agrees with the general one: whatever request it accepts, the
// general path parses to the same length and the same Request.
func FuzzParseHot(f *testing.F) {
	fuzzCheck(f, hotCases, func(t *testing.T, in []byte) { checkParseHot(t, in) })
}

// fuzzCheck fuzzes a check of one input, seeded with the check's own cases and the shared fuzzSeeds.
func fuzzCheck(f *testing.F, cases []string, check func(t *testing.T, in []byte)) {
	for _, set := range [][]string{cases, fuzzSeeds} {
		for _, s := range set {
			f.Add([]byte(s))
		}
	}
	f.Fuzz(check)
}

// checkNeed checks what Need says after buf was found incomplete: nothing, or a length past buf at which
// the same request, completed with any bytes, is whole (or refused as a whole, for a bad block end).
func checkNeed(t *testing.T, p *Parser, buf []byte) {
	t.Helper()
	need := p.Need()
	if need == 0 {
		return
	}
	if need <= len(buf) {
		t.Fatalf("Need %d for an incomplete request of %d bytes", need, len(buf))
	}
	full := append(append([]byte(nil), buf...), bytes.Repeat([]byte{'\n'}, need-len(buf))...)
	var req Request
	if n, _ := p.Parse(full, &req); n != need {
		t.Fatalf("Need %d, but the request completed to that length parses as %d bytes", need, n)
	}
	if n, err := p.Parse(full[:need-1], &req); n != 0 || err != nil {
		t.Fatalf("Need %d, but %d bytes already parse: n=%d err=%v", need, need-1, n, err)
	}
}
