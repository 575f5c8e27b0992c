package server

import (
	"fmt"
	"log/slog"
	"math/bits"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/panjf2000/gnet/v2"
	"github.com/stretchr/testify/require"

	"github.com/leasecached/leasecached/protocol"
	"github.com/leasecached/leasecached/shard"
)

// commandLike is n bytes of a data block that reads as get commands where a request is expected, so that a
// server which took a block's later reads for new requests would answer them and fail the comparison.
func commandLike(n int) string {
	return strings.Repeat("get k1\r\n", n/8+1)[:n]
}

// A data block's replies and effects do not depend on how its bytes arrive: whole in one read, in reads of
// any size, or ending in the same read as the requests after it. Large blocks are gathered in a buffer of
// the connection's (bigreq.go) and medium ones wait in gnet's input (conn.need); each case is served whole
// first, and the replies of every split must be the same bytes, with every input byte counted once.
func TestBlockRepliesIndependentOfReads(t *testing.T) {
	big, medium, limit := commandLike(200<<10), commandLike(10<<10), commandLike(1<<20-100)
	cases := []struct{ name, script string }{
		{"large set, then get", "set k 5 0 204800\r\n" + big + "\r\nget k\r\n"},
		{"set at the item limit", fmt.Sprintf("set k 0 0 %d\r\n%s\r\nget k\r\n", len(limit), limit)},
		{"large set noreply", "set k 0 0 204800 noreply\r\n" + big + "\r\nmn\r\nget k\r\n"},
		{"large ms with flags", "ms k 204800 F7 T0\r\n" + big + "\r\nmg k f v s\r\n"},
		{"large append", "append k 0 0 204800\r\n" + big + "\r\nset k 0 0 1\r\nx\r\nappend k 0 0 204800\r\n" +
			big + "\r\nget k\r\n"},
		{"large cas of a missing key", "cas k 0 0 204800 77\r\n" + big + "\r\nget k\r\n"},
		{"large lease-set without a lease", "lease-set k 12345 0 0 204800\r\n" + big + "\r\nget k\r\n"},
		{"large block not ended by CRLF", "set k 0 0 204800\r\n" + big + "XYget k\r\nmn\r\n"},
		{"two large sets back to back", "set a 0 0 204800\r\n" + big + "\r\nset b 0 0 204800\r\n" + big +
			"\r\nget a b\r\n"},
		{"medium set", "set k 3 0 10240\r\n" + medium + "\r\nget k\r\n"},
		{"medium then large", "set a 0 0 10240\r\n" + medium + "\r\nset b 0 0 204800\r\n" + big + "\r\nget b a\r\n"},
	}
	serve := func(t *testing.T, pieces []string) (string, uint64) {
		s := newTestServer(t)
		cn, fc := newConn(s, nil), &fakeConn{}
		out, _ := feed(cn, fc, pieces...)
		if cn.big.active() || cn.need != 0 {
			t.Fatalf("a request is still being gathered after the whole script (need %d)", cn.big.need)
		}
		return out, s.stats.get(statBytesRead)
	}
	rng := rand.New(rand.NewPCG(11, 12))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want, read := serve(t, []string{tc.script})
			if read != uint64(len(tc.script)) {
				t.Fatalf("whole: bytes_read %d, want %d", read, len(tc.script))
			}
			if !strings.HasSuffix(want, "END\r\n") && !strings.HasSuffix(want, "\r\n") {
				t.Fatalf("whole: replies %q", trim(want))
			}
			splits := map[string][]string{}
			for _, size := range []int{1 << 16, 1<<16 + 1, 4096, 1000} {
				splits[fmt.Sprintf("reads of %d", size)] = splitString(tc.script, size)
			}
			splits["line, then the rest"] = []string{tc.script[:strings.Index(tc.script, "\n")+1],
				tc.script[strings.Index(tc.script, "\n")+1:]}
			splits["the last byte alone"] = []string{tc.script[:len(tc.script)-1], tc.script[len(tc.script)-1:]}
			for r := range 3 {
				var pieces []string
				for rest := tc.script; rest != ""; {
					n := min(len(rest), 1+rng.IntN(150<<10))
					pieces, rest = append(pieces, rest[:n]), rest[n:]
				}
				splits[fmt.Sprintf("random %d", r)] = pieces
			}
			// A request is answered as soon as its last byte is in, however its bytes came.
			var p protocol.Parser
			var req protocol.Request
			n, _ := p.Parse([]byte(tc.script), &req) // a refused request has a length too
			if n == 0 {
				t.Fatal("the script's first request is incomplete")
			}
			first, _ := serve(t, []string{tc.script[:n]})
			for _, pieces := range [][]string{{tc.script[:n-1], tc.script[n-1 : n]}, splitString(tc.script[:n], 1000)} {
				if got, _ := serve(t, pieces); got != first {
					t.Fatalf("first request in %d reads: replies %q, want %q", len(pieces), trim(got), trim(first))
				}
			}
			for name, pieces := range splits {
				got, read := serve(t, pieces)
				if got != want {
					t.Fatalf("%s: replies %q, want %q", name, trim(got), trim(want))
				}
				if read != uint64(len(tc.script)) {
					t.Fatalf("%s: bytes_read %d, want %d", name, read, len(tc.script))
				}
			}
		})
	}
}

// splitString cuts s into pieces of size bytes (the last may be shorter).
func splitString(s string, size int) []string {
	var out []string
	for len(s) > size {
		out, s = append(out, s[:size]), s[size:]
	}
	return append(out, s)
}

// While a large block is being gathered the connection's reads are its data, whether they arrive alone or
// in a poll with other connections (OnTrafficBatch parses each connection's first request ahead, which must
// not happen to a block's continuation), and the buffer goes back once the request has been executed.
func TestLargeBlockAcrossBatchedReads(t *testing.T) {
	s := newTestServer(t)
	ls := s.newLoopShared(true)
	a, b := &ctxConn{cn: newConn(s, ls)}, &ctxConn{cn: newConn(s, ls)}
	block := commandLike(100 << 10)
	pieces := append([]string{"set big 0 0 102400\r\n"}, splitString(block+"\r\nget big\r\n", 30<<10)...)
	for i, p := range pieces {
		a.in.WriteString(p)
		b.in.WriteString(fmt.Sprintf("get k%d\r\n", i))
		s.OnTrafficBatch([]gnet.Conn{a, b}, make([]gnet.Action, 2))
		if gathering := a.cn.big.active(); gathering != (i < len(pieces)-1) {
			t.Fatalf("after read %d of %d: gathering %v", i+1, len(pieces), gathering)
		}
	}
	want := "STORED\r\nVALUE big 0 102400\r\n" + block + "\r\nEND\r\n"
	if got := a.out.String(); got != want {
		t.Fatalf("replies %q, want %q", trim(got), trim(want))
	}
	if got := b.out.String(); got != strings.Repeat("END\r\n", len(pieces)) {
		t.Fatalf("the other connection's replies: %q", trim(got))
	}
}

// A block longer than bigPrealloc (possible with -I above 1m) grows its buffer as it arrives, and its
// command line alone sets aside no more than bigPrealloc.
func TestLargeBlockGrowsItsBuffer(t *testing.T) {
	store, err := shard.New(shard.Config{MemoryLimit: 64 << 20, MaxItemSize: 4 << 20, ReclaimInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	s := New(Config{Listen: "127.0.0.1", Port: 1, Threads: 1, ConnLimit: 10, MaxItemSize: 4 << 20,
		MemoryLimit: 64 << 20, Logger: slog.New(slog.DiscardHandler)}, store)
	cn, fc := newConn(s, nil), &fakeConn{}
	block := commandLike(3 << 20)
	if out, _ := feed(cn, fc, "set big 9 0 3145728\r\n"); out != "" || cap(cn.big.buf) > bigPrealloc {
		t.Fatalf("after the command line: replies %q, buffer of %d bytes", out, cap(cn.big.buf))
	}
	var out string
	for i, p := range splitString(block+"\r\nget big\r\n", 64<<10) {
		had, held := len(cn.big.buf), cap(cn.big.buf)
		out, _ = feed(cn, fc, p)
		// A buffer grows to what has arrived, or bigGrowth times what had, in the pool's powers of two.
		limit := 1 << bits.Len(uint(max(bigGrowth*had, len(cn.big.buf))-1))
		if cn.big.active() && cap(cn.big.buf) != held && cap(cn.big.buf) > limit {
			t.Fatalf("read %d: the buffer grew to %d bytes with %d gathered before and %d now", i+1,
				cap(cn.big.buf), had, len(cn.big.buf))
		}
	}
	if want := "STORED\r\nVALUE big 9 3145728\r\n" + block + "\r\nEND\r\n"; out != want {
		t.Fatalf("replies %q, want %q", trim(out), trim(want))
	}
}

// A connection that closes while a block is being gathered gives its buffer back.
func TestLargeBlockReleasedOnClose(t *testing.T) {
	s := newTestServer(t)
	c := &ctxConn{cn: newConn(s, nil)}
	c.in.WriteString("set big 0 0 204800\r\n" + commandLike(100<<10))
	s.OnTraffic(c)
	if !c.cn.big.active() {
		t.Fatal("the block is not being gathered")
	}
	cn := c.cn
	s.OnClose(c, nil)
	if cn.big.active() || cn.need != 0 {
		t.Fatalf("after close: a buffer of %d bytes kept, need %d", cap(cn.big.buf), cn.big.need)
	}
}

// TestGatherBudget: large requests being gathered claim at most gatherBudget together. One that finds no
// room is refused as memcached refuses a store it cannot allocate, its block swallowed and the key's old
// value dropped; the others complete, and every claim is given back, also by connections that close
// half-way.
func TestGatherBudget(t *testing.T) {
	s := newTestServer(t)
	const size = 1000_000
	budget := gatherBudget(s.cfg)
	fits := int(budget / (size + 100))
	head := func(i int) string { return fmt.Sprintf("set k%d 0 0 %d\r\n", i, size) }
	first := strings.Repeat("x", 100_000)
	rest := strings.Repeat("x", size-len(first)) + "\r\nmn\r\n"

	old := &fakeConn{}
	_, _ = feed(newConn(s, nil), old, fmt.Sprintf("set k%d 0 0 3\r\nold\r\n", fits))

	type client struct {
		cn *conn
		fc *fakeConn
	}
	var cs []client
	for i := range fits + 2 {
		c := client{newConn(s, nil), &fakeConn{}}
		out, _ := feed(c.cn, c.fc, head(i)+first)
		require.Empty(t, out, "client %d answered before its block arrived", i)
		cs = append(cs, c)
	}
	require.LessOrEqual(t, s.gathering.Load(), budget)
	for i, c := range cs {
		out, _ := feed(c.cn, c.fc, rest)
		if i < fits {
			require.Equal(t, "STORED\r\nMN\r\n", out, "client %d", i)
		} else {
			require.Equal(t, "SERVER_ERROR out of memory storing object\r\nMN\r\n", out, "client %d", i)
		}
	}
	require.Zero(t, s.gathering.Load(), "claims left after every request ended")
	out, _ := feed(newConn(s, nil), &fakeConn{}, fmt.Sprintf("get k%d\r\n", fits))
	require.Equal(t, "END\r\n", out, "a refused set drops the key's old value, as memcached does")

	// A connection that closes half-way gives its claim back.
	c := client{newConn(s, nil), &fakeConn{}}
	_, _ = feed(c.cn, c.fc, head(0)+first)
	require.Positive(t, s.gathering.Load())
	c.cn.closed = true
	c.cn.releaseBig()
	require.Zero(t, s.gathering.Load())
}

// TestLongLines: a multi-key fetch line longer than bigRequestMin that arrives over many reads is
// gathered and answered as if it had come in one read (also when its answer goes in pieces), and one that
// passes protocol.MaxMultiKeyLineLength without ending is refused as the parser refuses it.
func TestLongLines(t *testing.T) {
	s := newTestServer(t)
	_, _ = feed(newConn(s, nil), &fakeConn{}, "set k 0 0 1\r\nv\r\n")
	line := "get" + strings.Repeat(" k", 100_000) + "\r\nmn\r\n" // a 200 KB line, a 1.4 MB answer
	want := strings.Repeat("VALUE k 0 1\r\nv\r\n", 100_000) + "END\r\nMN\r\n"
	pieces := func(s string, n int) []string {
		var out []string
		for len(s) > 0 {
			k := min(n, len(s))
			out, s = append(out, s[:k]), s[k:]
		}
		return out
	}
	cn, fc := newConn(s, nil), &fakeConn{}
	got, act := feed(cn, fc, pieces(line, 64<<10)...)
	require.Equal(t, Continue, act)
	require.Equal(t, len(want), len(got))
	require.True(t, want == got)
	require.False(t, cn.big.active())
	require.Zero(t, s.gathering.Load())

	cn, fc = newConn(s, nil), &fakeConn{}
	endless := "get" + strings.Repeat(" k", protocol.MaxMultiKeyLineLength)
	for _, p := range pieces(endless, 64<<10) {
		if act = serveWoken(cn, withInput(fc, p)); act != Continue {
			break
		}
	}
	require.Equal(t, Close, act)
	oneRead, _ := feed(newConn(s, nil), &fakeConn{}, endless)
	require.Equal(t, oneRead, fc.out.String(), "refused as when it arrives in one read")
	require.Zero(t, s.gathering.Load())
}

// withInput adds p to fc's input and returns fc.
func withInput(fc *fakeConn, p string) *fakeConn {
	fc.in.WriteString(p)
	return fc
}
