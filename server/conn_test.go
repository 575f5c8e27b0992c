package server

import (
	"bytes"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/panjf2000/gnet/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leasecached/leasecached/protocol"
	bp "github.com/leasecached/leasecached/protocol/binprot"
	"github.com/leasecached/leasecached/shard"
)

// fakeConn is the part of gnet.Conn that conn.serve uses: an inbound buffer that keeps what serve does not
// discard (as gnet does between read events) and an outbound buffer.
//
// Its client reads every reply at once, unless stuck: then all of out stays unsent (OutboundBuffered) until
// the test drains it. serveWoken records a pause.
type fakeConn struct {
	gnet.Conn // nil: any other method panics, which is what a test wants to know
	in, out   bytes.Buffer
	stuck     bool
	paused    bool   // serve asked for PauseRead and the test has not resumed
	wakes     int    // Wake calls (OnTraffic's answer to ServeAgain) not yet served
	onWrite   func() // called before each Write, when not nil
}

func (f *fakeConn) Peek(n int) ([]byte, error) { return f.in.Bytes(), nil }
func (f *fakeConn) Discard(n int) (int, error) { f.in.Next(n); return n, nil }
func (f *fakeConn) Write(p []byte) (int, error) {
	if f.onWrite != nil {
		f.onWrite()
	}
	return f.out.Write(p)
}
func (f *fakeConn) InboundBuffered() int             { return f.in.Len() }
func (f *fakeConn) PauseRead() error                 { f.paused = true; return nil }
func (f *fakeConn) Wake(cb gnet.AsyncCallback) error { f.wakes++; return nil }
func (f *fakeConn) OutboundBuffered() int {
	if f.stuck {
		return f.out.Len()
	}
	return 0
}

// maxWakes bounds how often serveWoken serves a connection again that asked for it.
const maxWakes = 100_000

func newTestServer(t testing.TB) *Server { return newTestServerConfig(t, nil) }

// newTestServerConfig is newTestServer with its configuration changed by edit (when not nil).
func newTestServerConfig(t testing.TB, edit func(*Config)) *Server {
	t.Helper()
	store, err := shard.New(shard.Config{MemoryLimit: 64 << 20, ReclaimInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	cfg := Config{Listen: "127.0.0.1", Port: 1, Threads: 1, ConnLimit: 10, MaxItemSize: 1 << 20,
		MemoryLimit: 64 << 20, Logger: slog.New(slog.DiscardHandler), HotKeys: DefaultHotKeys}
	if edit != nil {
		edit(&cfg)
	}
	return New(cfg, store)
}

// feed sends input to a connection in the given pieces, one read event each, and returns all replies and
// the action of the last event.
func feed(cn *conn, fc *fakeConn, pieces ...string) (string, Action) {
	var act Action
	for _, p := range pieces {
		fc.in.WriteString(p)
		act = serveWoken(cn, fc)
	}
	return fc.out.String(), act
}

// serveWoken serves one read event, then serves again as long as the connection asks to, as its event
// loop would; a pause is recorded in fc for the test to end (as the client's reading would).
func serveWoken(cn *conn, fc *fakeConn) Action {
	act := cn.serve(fc)
	for i := 0; act == ServeAgain && i < maxWakes; i++ {
		act = cn.serve(fc)
	}
	switch act {
	case ServeAgain, PauseRead:
		fc.paused = act == PauseRead
		return Continue
	}
	return act
}

func TestServeScripts(t *testing.T) {
	big := strings.Repeat("v", 300_000)
	cases := []struct {
		name   string
		pieces []string
		want   string
		close  bool
	}{
		{"pipelined in one read", []string{"set a 0 0 1\r\nx\r\nget a\r\ndelete a\r\nget a\r\n"},
			"STORED\r\nVALUE a 0 1\r\nx\r\nEND\r\nDELETED\r\nEND\r\n", false},
		{"request split across reads", []string{"se", "t a 0 0 5\r", "\nhel", "lo\r", "\nget a\r\n"},
			"STORED\r\nVALUE a 0 5\r\nhello\r\nEND\r\n", false},
		{"too large value swallowed across reads, connection kept", []string{
			"set big 0 0 2000000\r\n" + strings.Repeat("x", 1000), strings.Repeat("x", 1_999_000) + "\r\n", "mn\r\n"},
			"SERVER_ERROR object too large for cache\r\nMN\r\n", false},
		{"noreply is silent", []string{"set a 0 0 1 noreply\r\nx\r\ndelete a noreply\r\nmn\r\n"}, "MN\r\n", false},
		{"quit closes without a reply", []string{"quit\r\nget a\r\n"}, "", true},
		{"unknown command", []string{"bogus\r\n"}, "ERROR\r\n", false},
		{"replies past the flush threshold arrive whole and in order", []string{
			"set b 0 0 300000\r\n" + big + "\r\nget b b\r\nmn\r\n"},
			"STORED\r\nVALUE b 0 300000\r\n" + big + "\r\nVALUE b 0 300000\r\n" + big + "\r\nEND\r\nMN\r\n", false},
		{"version", []string{"version\r\n"}, "VERSION " + ProtocolVersion + "\r\n", false},
		{"shutdown refused", []string{"shutdown\r\n"}, "ERROR: shutdown not enabled\r\n", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestServer(t)
			cn, fc := newConn(s, nil), &fakeConn{}
			got, act := feed(cn, fc, tc.pieces...)
			if got != tc.want {
				t.Fatalf("replies\n got %q\nwant %q", trim(got), trim(tc.want))
			}
			if (act == Close) != tc.close {
				t.Fatalf("action %v, want close=%v", act, tc.close)
			}
		})
	}
}

func trim(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

func TestServeLease(t *testing.T) {
	s := newTestServer(t)
	cn, fc := newConn(s, nil), &fakeConn{}
	got, _ := feed(cn, fc, "lease-get k\r\n")
	var token uint64
	if _, err := fmt.Sscanf(got, "LVALUE k %d 0 0\r\n\r\nEND\r\n", &token); err != nil || token < 2 {
		t.Fatalf("grant reply %q (token %d, %v)", got, token, err)
	}
	fc.out.Reset()
	got, _ = feed(cn, fc, "lease-get k\r\nlease-set k 1 0 0 1\r\nx\r\n")
	if got != "LVALUE k 1 0 0\r\n\r\nEND\r\nNOT_STORED\r\n" {
		t.Fatalf("hot miss / bad token: %q", got)
	}
	fc.out.Reset()
	line := "lease-set k " + strconv.FormatUint(token, 10) + " 3 0 2\r\nhi\r\nlease-get k\r\n"
	if got, _ = feed(cn, fc, line); got != "STORED\r\nVALUE k 3 2\r\nhi\r\nEND\r\n" {
		t.Fatalf("lease-set with the token: %q", got)
	}
}

// The request path allocates nothing per request once a connection's buffers have grown.
func TestExecuteAllocatesNothing(t *testing.T) {
	s := newTestServer(t)
	cn := newConn(s, s.newLoopShared(true)) // an event loop's: execute samples into its hot-key tracker
	reqs := []string{
		"set k 0 0 5\r\nhello\r\n", "get k\r\n", "gets k\r\n", "lease-get k\r\n", "lease-get miss\r\n",
		"incr n 1\r\n", "touch k 0\r\n", "delete nope\r\n", "get a b c d e f g h i j\r\n", "gats 0 k\r\n",
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
		run() // warm buffers
		if a := testing.AllocsPerRun(200, run); a != 0 {
			t.Errorf("%q: %.1f allocations per request", strings.TrimSpace(r), a)
		}
	}
}

// The pipelined path (serveAhead: parse a batch, prefetch its keys, execute it) allocates nothing once the
// buffers have grown.
func TestPipelinedServeAllocatesNothing(t *testing.T) {
	s := newTestServer(t)
	cn := newConn(s, nil)
	fc := &fakeConn{}
	batch := strings.Repeat("get a\r\nget k\r\nget b c d\r\nlease-get k\r\n", 5) + "set k 0 0 5\r\nhello\r\nmg k v\r\n"
	serve := func() {
		fc.out.Reset()
		fc.in.WriteString(batch)
		measuredServe(cn, fc)
	}
	serve()
	if a := testing.AllocsPerRun(200, serve); a != 0 {
		t.Errorf("%.1f allocations per pipelined batch", a)
	}
}

// Parsing a pipelined read ahead of executing it changes nothing a client can see: a script of requests of
// every kind (refused ones, swallowed data blocks, noreply, more keys than Prefetch takes, more requests than
// a batch holds, meta commands with base64 keys, quit with requests behind it) gets the same replies, byte
// for byte, fed one request per read, all in one read, and cut at random points.
func TestPipelinedServeMatchesOneByOne(t *testing.T) {
	var script []string
	add := func(reqs ...string) { script = append(script, reqs...) }
	var keys []string
	for i := range 50 {
		k := fmt.Sprintf("k%d", i)
		keys = append(keys, k)
		add(fmt.Sprintf("set %s %d 0 %d\r\n%s\r\n", k, i, len(k)+3, k+"val"))
	}
	add("get "+strings.Join(keys[:40], " ")+"\r\n", "gets k3 k4 nope\r\n", "set q 0 0 1 noreply\r\nq\r\n", "get q\r\n")
	add("set big 0 0 2000000\r\n"+strings.Repeat("b", 2_000_000)+"\r\n", "get big k5\r\n")
	add("bogus\r\n", "get "+strings.Repeat("x", 251)+"\r\n", "set k6 0 0 abc\r\n", "get k6\r\n")
	add("incr n 1\r\n", "set n 0 0 1\r\n5\r\n", "incr n 10\r\n", "decr n 3\r\n", "touch k7 100\r\n")
	add("gat 0 k8\r\n", "delete k9\r\n", "delete k9\r\n", "get k9 k10\r\n", "append k10 0 0 2\r\n!!\r\n")
	add("mg k11 v f\r\n", "ms k12 2\r\nzz\r\n", "mg azEy b v\r\n", "md k13 q\r\n", "mn\r\n", "mg k13 v\r\n")
	for i := range 20 {
		add(fmt.Sprintf("get k%d\r\n", i))
	}
	add("version\r\n", "cas k14 0 0 1 999\r\nc\r\n", "verbosity 1 noreply\r\n", "quit\r\n", "get k1\r\n")

	run := func(pieces []string) string {
		cn := newConn(newTestServer(t), nil)
		fc := &fakeConn{}
		for _, p := range pieces {
			fc.in.WriteString(p)
			if cn.serve(fc) == Close {
				break
			}
		}
		return fc.out.String()
	}
	want := run(script)
	if !strings.Contains(want, "VALUE k39 39 6\r\nk39val\r\nEND\r\n") ||
		!strings.HasSuffix(want, "VERSION "+ProtocolVersion+"\r\nEXISTS\r\n") {
		t.Fatalf("the script's replies are not what it was written for; they end:\n%q", want[max(0, len(want)-700):])
	}
	whole := strings.Join(script, "")
	if got := run([]string{whole}); got != want {
		t.Fatalf("in one read:\n%q\nwant\n%q", got, want)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		var pieces []string
		for rest := whole; len(rest) > 0; {
			n := min(len(rest), 1+rng.IntN(300))
			if rng.IntN(50) == 0 {
				n = min(len(rest), rng.IntN(3_000_000))
			}
			pieces, rest = append(pieces, rest[:n]), rest[n:]
		}
		if got := run(pieces); got != want {
			t.Fatalf("in %d pieces: replies differ", len(pieces))
		}
	}
}

func TestResultReplyCoversEveryResult(t *testing.T) {
	for r := shard.Stored; r <= shard.NonNumeric; r++ {
		if bytes.Equal(resultReply(r), replyInternalResult) {
			t.Errorf("result %v has no reply", r)
		}
	}
	if !bytes.Equal(resultReply(shard.Stored), protocol.ReplyStored) {
		t.Error("Stored must answer STORED")
	}
}

func BenchmarkGetHit(b *testing.B) {
	s := newTestServer(b)
	cn := newConn(s, s.newLoopShared(true)) // an event loop's: execute samples into its hot-key tracker
	cn.parser.Parse([]byte("set k 0 0 100\r\n"+strings.Repeat("v", 100)+"\r\n"), &cn.req)
	cn.execute(&cn.req)
	in := []byte("get k\r\n")
	b.ReportAllocs()
	for b.Loop() {
		cn.parser.Parse(in, &cn.req)
		cn.execute(&cn.req)
		cn.out = cn.out[:0]
	}
}

func BenchmarkLeaseGetHit(b *testing.B) {
	s := newTestServer(b)
	cn := newConn(s, s.newLoopShared(true)) // an event loop's: execute samples into its hot-key tracker
	cn.parser.Parse([]byte("set k 0 0 100\r\n"+strings.Repeat("v", 100)+"\r\n"), &cn.req)
	cn.execute(&cn.req)
	in := []byte("lease-get k\r\n")
	b.ReportAllocs()
	for b.Loop() {
		cn.parser.Parse(in, &cn.req)
		cn.execute(&cn.req)
		cn.out = cn.out[:0]
	}
}

// BenchmarkPipelinedMultiGet is one read of a client at pipeline 16 sending 10-key gets (the load tool's
// hashed flags, 100-byte values): serve's whole path, parse-ahead and prefetch included. ns/op is per read
// of 160 keys.
func BenchmarkPipelinedMultiGet(b *testing.B) {
	cn := newConn(newTestServer(b), nil)
	fc := &fakeConn{}
	var keys []string
	for i := range 10 {
		k := fmt.Sprintf("k%013d", i*7919)
		keys = append(keys, k)
		fc.in.WriteString("set " + k + " 3735928559 0 100\r\n" + strings.Repeat("v", 100) + "\r\n")
	}
	cn.serve(fc)
	batch := strings.Repeat("get "+strings.Join(keys, " ")+"\r\n", 16)
	b.ReportAllocs()
	for b.Loop() {
		fc.out.Reset()
		fc.in.WriteString(batch)
		measuredServe(cn, fc)
	}
}

func BenchmarkSet(b *testing.B) {
	s := newTestServer(b)
	cn := newConn(s, s.newLoopShared(true)) // an event loop's: execute samples into its hot-key tracker
	in := []byte("set k 0 0 100\r\n" + strings.Repeat("v", 100) + "\r\n")
	b.ReportAllocs()
	for b.Loop() {
		cn.parser.Parse(in, &cn.req)
		cn.execute(&cn.req)
		cn.out = cn.out[:0]
	}
}

// BenchmarkPipelinedGetSet is one read of a client at pipeline 16 on make bench's pipelined 90/10 row: 100k
// keys drawn uniformly, the load tool's hashed flags, 100-byte values, one set in ten. ns/request is per
// request, serve's whole path included; the items are spread over more memory than the CPU caches hold.
func BenchmarkPipelinedGetSet(b *testing.B) { benchPipelinedGetSet(b, newTestServer(b), 10) }

// BenchmarkPipelinedGetSet5050 is BenchmarkPipelinedGetSet on make bench's 50/50 row: one set in two.
func BenchmarkPipelinedGetSet5050(b *testing.B) { benchPipelinedGetSet(b, newTestServer(b), 2) }

// benchPipelinedGetSet serves reads of batchRequests requests on s, one set in setEvery and gets otherwise.
func benchPipelinedGetSet(b *testing.B, s *Server, setEvery int) {
	const keys, reads = 100_000, 256
	cn := newConn(s, nil)
	fc := &fakeConn{}
	value := strings.Repeat("v", 100)
	set := func(w *bytes.Buffer, k int) {
		fmt.Fprintf(w, "set key:%08d %d 0 100\r\n%s\r\n", k, uint32(k)*2654435761, value)
	}
	for k := range keys {
		set(&fc.in, k)
		if k%1024 == 1023 {
			cn.serve(fc)
			fc.out.Reset()
		}
	}
	cn.serve(fc)
	rng := rand.New(rand.NewPCG(5, 6))
	batches := make([][]byte, reads)
	for i := range batches {
		var w bytes.Buffer
		for range batchRequests {
			if k := rng.IntN(keys); rng.IntN(setEvery) == 0 {
				set(&w, k)
			} else {
				fmt.Fprintf(&w, "get key:%08d\r\n", k)
			}
		}
		batches[i] = w.Bytes()
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		fc.out.Reset()
		fc.in.Write(batches[i%reads])
		measuredServe(cn, fc)
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batchRequests), "ns/request")
}

// measuredServe is serve, called only from benchmarks' timed loops: callgrind's --toggle-collect names it to
// count the instructions of those calls alone, leaving out the set-up's.
//
//go:noinline
func measuredServe(cn *conn, c Transport) Action { return cn.serve(c) }

// TestCountsPublishedBeforeReply: a request's counts reach the server's stats before its reply is written,
// so a client that has read the reply finds the request counted by `stats` on any other connection
// (TestDisableSwitchesDifferential saw cmd_flush short by a binary connection's two flushes).
func TestCountsPublishedBeforeReply(t *testing.T) {
	cases := []struct {
		name  string
		input string
		stat  statID
	}{
		{"text flush_all", "flush_all\r\n", statCmdFlush},
		{"binary flush", bpkt(bp.OpFlush, "", "", "", 0), statCmdFlush},
		{"binary flushq then noop", bpkt(bp.OpFlushQ, "", "", "", 0) + bpkt(bp.OpNoop, "", "", "", 0), statCmdFlush},
		{"get miss", "get a\r\n", statGetMisses},
		{"set noreply then mn", "set a 0 0 1 noreply\r\nx\r\nmn\r\n", statCmdSet},
		{"pipelined gets", "get a\r\nget b\r\nget c\r\n", statGetMisses},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestServer(t)
			cn, fc := newConn(s, nil), &fakeConn{}
			var seen []uint64
			fc.onWrite = func() { seen = append(seen, s.stats.get(tc.stat)) }
			fc.in.WriteString(tc.input)
			serveWoken(cn, fc)
			require.NotEmpty(t, seen, "a reply was written")
			assert.NotZero(t, seen[0], "counted when the first reply was written")
			assert.Equal(t, s.stats.get(tc.stat), seen[len(seen)-1], "every count published by the last write")
		})
	}
}
