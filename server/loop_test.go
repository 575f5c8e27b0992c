package server

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestConnsShareLoopState serves several connections that share one loopShared (as the connections of an
// event loop do), in interleaved reads cut at random points: pipelined batches, multi-key gets, replies
// past the flush threshold, a swallowed data block and partial requests left for the next read. Each must
// get exactly the replies it gets served alone on a connection with state of its own. (Nothing in the
// scripts replies with a CAS or a lease token: those count across the store.)
func TestConnsShareLoopState(t *testing.T) {
	const conns = 4
	big := strings.Repeat("b", flushThreshold+1000)
	script := func(c int) string {
		var w strings.Builder
		k := func(i int) string { return fmt.Sprintf("c%d:k%d", c, i) }
		for i := range 40 {
			fmt.Fprintf(&w, "set %s %d 0 %d\r\n%s\r\n", k(i), i*c, i+1, strings.Repeat(string(rune('a'+c)), i+1))
		}
		for i := range 40 {
			fmt.Fprintf(&w, "get %s\r\nget %s %s %s\r\n", k(i), k(i), k((i+7)%40), k(99))
		}
		fmt.Fprintf(&w, "set %s 0 0 %d\r\n%s\r\nget %s %s\r\n", k(100), len(big), big, k(100), k(1))
		fmt.Fprintf(&w, "set %s 0 0 5\r\ntoo long\r\nget %s\r\nmn\r\n", k(2), k(2)) // refused, swallowed
		fmt.Fprintf(&w, "incr %s 5\r\ndelete %s\r\nget %s %s\r\nmn\r\n", k(8), k(3), k(3), k(8))
		return w.String()
	}
	cut := func(r *rand.Rand, s string) []string {
		var pieces []string
		for len(s) > 0 {
			n := min(len(s), 1+r.IntN(600))
			pieces, s = append(pieces, s[:n]), s[n:]
		}
		return pieces
	}
	alone := make([]string, conns)
	for c := range conns {
		cn, fc := newConn(newTestServer(t), nil), &fakeConn{}
		alone[c], _ = feed(cn, fc, script(c))
		if !strings.HasSuffix(alone[c], "MN\r\n") || strings.Count(alone[c], "VALUE") < 80 {
			t.Fatalf("connection %d's script does not do what it was written for: %q", c, trim(alone[c]))
		}
	}
	for round := range 10 {
		r := rand.New(rand.NewPCG(uint64(round), 13))
		s := newTestServer(t)
		ls := s.newLoopShared(true)
		cns, fcs, pieces := make([]*conn, conns), make([]*fakeConn, conns), make([][]string, conns)
		for c := range conns {
			cns[c], fcs[c], pieces[c] = newConn(s, ls), &fakeConn{}, cut(r, script(c))
		}
		for left := conns; left > 0; {
			c := r.IntN(conns)
			if len(pieces[c]) == 0 {
				continue
			}
			fcs[c].in.WriteString(pieces[c][0])
			serveWoken(cns[c], fcs[c])
			if pieces[c] = pieces[c][1:]; len(pieces[c]) == 0 {
				left--
			}
			if cns[c].out != nil {
				t.Fatalf("round %d: connection %d kept a reply buffer after serve", round, c)
			}
		}
		for c := range conns {
			if got := fcs[c].out.String(); got != alone[c] {
				i := 0
				for i < min(len(got), len(alone[c])) && got[i] == alone[c][i] {
					i++
				}
				t.Fatalf("round %d: connection %d's replies differ from its replies alone at byte %d:\n got %q\nwant %q",
					round, c, i, trim(got[i:]), trim(alone[c][i:]))
			}
		}
	}
}

// TestStatsSumLoopShares: each event loop's connections count in the loop's own share, and stats reports
// the sum of every share; stats reset clears them all. (memcached counts cmd_get per key.)
func TestStatsSumLoopShares(t *testing.T) {
	s := newTestServer(t)
	a, b := newConn(s, s.newLoopShared(true)), newConn(s, s.newLoopShared(true))
	fa, fb := &fakeConn{}, &fakeConn{}
	feed(a, fa, "set k 0 0 1\r\nx\r\nget k\r\nget k nope\r\n")
	feed(b, fb, "get k\r\nget nope\r\n")
	stat := func(name string) string {
		t.Helper()
		fa.out.Reset()
		out, _ := feed(a, fa, "stats\r\n")
		for _, l := range strings.Split(out, "\r\n") {
			if v, ok := strings.CutPrefix(l, "STAT "+name+" "); ok {
				return v
			}
		}
		t.Fatalf("no %s in %q", name, out)
		return ""
	}
	for name, want := range map[string]string{"cmd_get": "5", "get_hits": "3", "get_misses": "2", "cmd_set": "1"} {
		if got := stat(name); got != want {
			t.Errorf("%s %s, want %s", name, got, want)
		}
	}
	fa.out.Reset()
	if out, _ := feed(a, fa, "stats reset\r\n"); out != "RESET\r\n" {
		t.Fatalf("stats reset: %q", out)
	}
	if got := stat("cmd_get"); got != "0" {
		t.Errorf("cmd_get %s after stats reset, want 0", got)
	}
}
