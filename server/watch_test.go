package server

import (
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leasecached/leasecached/shard"
	"github.com/leasecached/leasecached/watch"
)

// watcherConn is a watcher's transport in these tests: the collector's Wake only signals the test, which
// serves the connection on its own goroutine, as the event loop would.
type watcherConn struct {
	fakeConn
	woke chan struct{}
}

func newWatcherConn() *watcherConn { return &watcherConn{woke: make(chan struct{}, 1)} }

func (w *watcherConn) Wake(gnet.AsyncCallback) error {
	select {
	case w.woke <- struct{}{}:
	default:
	}
	return nil
}

// startWatcher makes cn a watcher of args over wc and checks the OK.
func startWatcher(t *testing.T, cn *conn, wc *watcherConn, args string) {
	t.Helper()
	wc.in.WriteString("watch " + args + "\r\n")
	require.Equal(t, ServeAgain, cn.serve(wc))
	require.Equal(t, "OK\r\n", wc.out.String())
	wc.out.Reset()
	require.NotNil(t, cn.watch)
}

// collect serves the watcher whenever it is woken until its output holds n lines, or 5 s have passed.
func collect(t *testing.T, cn *conn, wc *watcherConn, n int) []string {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for strings.Count(wc.out.String(), "\n") < n {
		select {
		case <-wc.woke:
			cn.serve(wc)
		case <-deadline:
			t.Fatalf("watcher got %q, want %d lines", wc.out.String(), n)
		}
	}
	return strings.Split(strings.TrimSuffix(wc.out.String(), "\n"), "\n")
}

var tsGid = regexp.MustCompile(`^ts=\d+\.\d+ gid=\d+ `)

// After a get-family command or mn, which memcached writes out at once, watch is accepted in the same read.
func TestWatchAfterFlushingCommands(t *testing.T) {
	for _, in := range []string{"get x\r\n", "version\r\ngets x\r\n", "gat 0 x\r\n", "version\r\nmn\r\n"} {
		s := newTestServer(t)
		cn, wc := newConn(s, nil), newWatcherConn()
		wc.in.WriteString(in + "watch\r\n")
		cn.serve(wc)
		assert.True(t, strings.HasSuffix(wc.out.String(), "\r\nOK\r\n"), "%q: %q", in, wc.out.String())
		s.closeConn(cn, nil)
	}
}

// `watch`'s replies other than OK, as memcached 1.6.18 gives them.
func TestWatchReplies(t *testing.T) {
	cases := []struct{ in, want string }{
		{"watch bogus\r\n", "ERROR\r\n"},
		{"watch fetchers bogus\r\n", "ERROR\r\n"},
		{"watch noreply\r\nmn\r\n", "MN\r\n"}, // refused, and noreply hides it
		{"version\r\nwatch\r\n", "VERSION " + ProtocolVersion + "\r\nERROR cannot pipeline other commands before watch\r\n"},
		{"get x\r\nversion\r\nwatch\r\n", "END\r\nVERSION " + ProtocolVersion + "\r\nERROR cannot pipeline other commands before watch\r\n"},
	}
	for _, c := range cases {
		s := newTestServer(t)
		cn, wc := newConn(s, nil), newWatcherConn()
		wc.in.WriteString(c.in)
		serveWoken(cn, &wc.fakeConn)
		cn.serve(wc)
		assert.Equal(t, c.want, wc.out.String(), "%q", c.in)
		assert.Nil(t, cn.watch)
	}
}

// A watcher gets its kinds of lines in memcached's format, whatever its client sends after watch is
// dropped, and closing it removes it.
func TestWatchLines(t *testing.T) {
	s := newTestServer(t)
	w, wc := newConn(s, nil), newWatcherConn()
	startWatcher(t, w, wc, "fetchers mutations deletions")
	wc.in.WriteString("get ignored\r\n") // a watcher's input is read and dropped
	cl, fc := newConn(s, nil), &fakeConn{}
	cl.fd = 7
	feed(cl, fc, "set a%b 3 100 2\r\nhi\r\nget a%b nope\r\nappend a%b 0 0 1\r\n!\r\ndelete a%b\r\nflush_all\r\n")
	lines := collect(t, w, wc, 9)
	want := []string{
		"type=item_get key=a%25b status=not_found clsid=0 cfd=7 size=0",
		"type=item_store key=a%25b status=stored cmd=set ttl=100 clsid=1 cfd=7 size=2",
		"type=item_get key=a%25b status=found clsid=1 cfd=7 size=2",
		"type=item_get key=nope status=not_found clsid=0 cfd=7 size=0",
		"type=item_get key=a%25b status=found clsid=1 cfd=7 size=2",
		"type=item_store key=a%25b status=stored cmd=append ttl=100 clsid=1 cfd=7 size=3",
		"type=item_get key=a%25b status=found clsid=1 cfd=7 size=3",
		"type=deleted key=a%25b cmd=delete clsid=1 size=3",
		"type=flush_all delay=0 cfd=7",
	}
	for i, l := range lines {
		require.Regexp(t, tsGid, l)
		lines[i] = tsGid.ReplaceAllString(l, "")
	}
	assert.Equal(t, want, lines)
	assert.Zero(t, wc.in.Len())

	st := s.watch.Stats()
	assert.Equal(t, 1, st.Watchers)
	assert.EqualValues(t, 9, st.WatcherSent)
	s.closeConn(w, nil)
	assert.Zero(t, s.watch.Stats().Watchers)
	assert.False(t, s.watch.On(watch.Fetchers))
}

// A watcher whose client does not read gets no more than its bound into the transport; the lines it
// cannot take are skipped and counted, and it learns how many once it reads again.
func TestWatchSkips(t *testing.T) {
	s := newTestServer(t)
	w, wc := newConn(s, nil), newWatcherConn()
	startWatcher(t, w, wc, "fetchers")
	wc.stuck = true
	wc.out.WriteString(strings.Repeat("x", outboundLimit+1)) // the client stopped reading
	cl, fc := newConn(s, nil), &fakeConn{}
	get := "get " + strings.Repeat("k", 200) + "\r\n"
	for i := 0; s.watch.Stats().WatcherSkipped == 0; i++ {
		require.Less(t, i, 10_000, "nothing skipped")
		fc.out.Reset()
		feed(cl, fc, strings.Repeat(get, 100))
		select {
		case <-wc.woke:
			w.serve(wc)
		default:
		}
	}
	assert.Equal(t, outboundLimit+1, wc.out.Len(), "a stalled watcher must not be written to")
	wc.out.Reset()
	wc.stuck = false
	// The collector may still be moving lines of the gets into the full buffer, so a get now may be skipped
	// too: each round serves the watcher and asks for one more line, until one arrives.
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(wc.out.String(), "key=after") {
		require.True(t, time.Now().Before(deadline), "the line after the skips never came")
		w.serve(wc)
		feed(cl, fc, "get after\r\n")
		select {
		case <-wc.woke:
			w.serve(wc)
		case <-time.After(10 * time.Millisecond):
		}
	}
	// Lines of the gets that found room again may come between the count and the new line.
	assert.Regexp(t, `(?s)^(ts=[^\n]* key=k+ [^\n]*\n)*skipped=\d+\n.* key=after `, wc.out.String())
	assert.Positive(t, s.watch.Stats().WatcherSkipped)
	s.closeConn(w, nil)
}

// With a watcher of every kind, the request path still allocates nothing per request (the lines go into
// the loop's sink, and the collector moves them without allocating).
func TestExecuteAllocatesNothingWatched(t *testing.T) {
	s := newTestServer(t)
	wt, err := s.watch.Add(watch.Fetchers|watch.Mutations|watch.Deletions|watch.ConnEvents, func() {})
	require.NoError(t, err)
	t.Cleanup(func() { s.watch.Remove(wt) })
	cn := newConn(s, s.newLoopShared(true)) // an event loop's: its own sink and hot-key tracker
	reqs := []string{
		"set k 0 0 5\r\nhello\r\n", "get k\r\n", "gets k\r\n", "incr n 1\r\n", "touch k 0\r\n",
		"delete nope\r\n", "get a b c d e f g h i j\r\n", "mg k v\r\n", "ms m 2\r\nhi\r\n", "md m\r\n",
		"append k 0 0 1\r\nx\r\n",
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
		assert.Zero(t, testing.AllocsPerRun(200, run), "%q", strings.TrimSpace(r))
	}
}

// BenchmarkGetHitWatched is BenchmarkGetHit with a watcher of fetchers and mutations: the get's line is
// formatted and collected (the watcher's connection never takes it, so most lines are skipped).
func BenchmarkGetHitWatched(b *testing.B) {
	s := newTestServer(b)
	w, err := s.watch.Add(watch.Fetchers|watch.Mutations, func() {})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.watch.Remove(w) })
	cn := newConn(s, s.newLoopShared(true))
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

// A store the parser refuses (too large) logs memcached's item_store with its status, whatever the
// command, so a near-cache hears of the set that dropped the old value too.
func TestWatchRefusedStores(t *testing.T) {
	s := newTestServer(t)
	w, wc := newConn(s, nil), newWatcherConn()
	startWatcher(t, w, wc, "mutations")
	cl, fc := newConn(s, nil), &fakeConn{}
	cl.fd = 7
	big := s.cfg.MaxItemSize + 1
	value := strings.Repeat("v", big) + "\r\n"
	feed(cl, fc, "set k 0 0 1\r\nx\r\n"+
		"set k 0 0 "+strconv.Itoa(big)+"\r\n"+value+
		"add z 0 0 "+strconv.Itoa(big)+"\r\n"+value+
		"ms k "+strconv.Itoa(big)+"\r\n"+value+"get k\r\n")
	assert.Contains(t, fc.out.String(), "SERVER_ERROR object too large for cache\r\nSERVER_ERROR object too large for cache\r\n")
	assert.True(t, strings.HasSuffix(fc.out.String(), "END\r\n"), "the set refused as too large dropped k")
	lines := collect(t, w, wc, 4)
	for i, l := range lines {
		lines[i] = tsGid.ReplaceAllString(l, "")
	}
	assert.Equal(t, []string{
		"type=item_store key=k status=stored cmd=set ttl=0 clsid=1 cfd=7 size=1",
		"type=item_store key=k status=too_large cmd=set ttl=0 clsid=0 cfd=7 size=0",
		"type=item_store key=z status=too_large cmd=add ttl=0 clsid=0 cfd=7 size=0",
		"type=item_store key=k status=too_large cmd=set ttl=0 clsid=0 cfd=7 size=0",
	}, lines)
}

// A fetch logs one item_get line per key it names, as memcached logs one per do_item_get, however often
// the request is executed again: a read parked by --hold that wakes, a multi-key fetch that yields
// because its replies passed flushThreshold.
func TestWatchLogsEachLookupOnce(t *testing.T) {
	big := strings.Repeat("v", 200_000) // two of these pass flushThreshold: the get yields
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, s *Server) // sends the requests; each conn's fd is 7 on
		want []string
	}{
		{"parked get woken by a set", func(t *testing.T, s *Server) {
			r, p, w := watchedConn(s, 7), watchedConn(s, 8), watchedConn(s, 9)
			out, _ := feed(r, &fakeConn{}, "get k\r\n") // the first miss refills
			require.Equal(t, "END\r\n", out)
			fp := &fakeConn{}
			out, _ = feed(p, fp, "get other k\r\n")
			require.Empty(t, out)
			require.True(t, p.parked, "k's read parks behind the refiller")
			out, _ = feed(w, &fakeConn{}, "set k 0 0 2\r\nv1\r\n")
			require.Equal(t, "STORED\r\n", out)
			require.Positive(t, fp.wakes, "the set wakes the parked read")
			serveWoken(p, fp)
			require.Equal(t, "VALUE k 0 2\r\nv1\r\nEND\r\n", fp.out.String())
		}, []string{
			"type=item_get key=k status=not_found clsid=0 cfd=7 size=0",
			"type=item_get key=other status=not_found clsid=0 cfd=8 size=0",
			"type=item_get key=k status=not_found clsid=0 cfd=8 size=0",
			"type=item_get key=k status=not_found clsid=0 cfd=9 size=0",
			"type=item_store key=k status=stored cmd=set ttl=0 clsid=1 cfd=9 size=2",
		}},
		{"multi-key get that yields", yieldingFetch("get a b c\r\n"), abc},
		{"multi-key lease-get that yields", yieldingFetch("lease-get a b c\r\n"), abc},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, err := shard.New(shard.Config{MemoryLimit: 64 << 20, ReclaimInterval: -1, Hold: 5 * time.Second})
			require.NoError(t, err)
			t.Cleanup(store.Close)
			s := New(Config{Listen: "127.0.0.1", Port: 1, Threads: 1, ConnLimit: 10, MaxItemSize: 1 << 20,
				MemoryLimit: 64 << 20, Logger: slog.New(slog.DiscardHandler)}, store)
			for _, k := range []string{"a", "b", "c"} {
				out, _ := feed(newConn(s, nil), &fakeConn{}, "set "+k+" 0 0 200000\r\n"+big+"\r\n")
				require.Equal(t, "STORED\r\n", out)
			}
			w, wc := newConn(s, nil), newWatcherConn()
			startWatcher(t, w, wc, "fetchers mutations")
			tc.run(t, s)
			// A last lookup marks the end: every line before it was logged by then.
			out, _ := feed(watchedConn(s, 99), &fakeConn{}, "get end\r\n")
			require.Equal(t, "END\r\n", out)
			var lines []string
			for deadline := time.Now().Add(5 * time.Second); ; {
				lines = collect(t, w, wc, len(lines)+1)
				if strings.Contains(lines[len(lines)-1], "key=end ") || time.Now().After(deadline) {
					break
				}
			}
			for i, l := range lines {
				require.Regexp(t, tsGid, l)
				lines[i] = tsGid.ReplaceAllString(l, "")
			}
			assert.Equal(t, append(tc.want, "type=item_get key=end status=not_found clsid=0 cfd=99 size=0"), lines)
		})
	}
}

// yieldingFetch sends a fetch of a, b and c (200,000 bytes each, so hits), which yields after b.
func yieldingFetch(fetch string) func(t *testing.T, s *Server) {
	return func(t *testing.T, s *Server) {
		c, fc := watchedConn(s, 7), &fakeConn{}
		fc.in.WriteString(fetch)
		require.Equal(t, ServeAgain, c.serve(fc), "the fetch yields")
		serveWoken(c, fc)
		require.Equal(t, 3, strings.Count(fc.out.String(), "\r\nVALUE ")+1, "every key answered: %.80q", fc.out.String())
	}
}

// abc are the lookups of yieldingFetch.
var abc = []string{
	"type=item_get key=a status=found clsid=35 cfd=7 size=200000",
	"type=item_get key=b status=found clsid=35 cfd=7 size=200000",
	"type=item_get key=c status=found clsid=35 cfd=7 size=200000",
}

// watchedConn is a connection of s on descriptor fd, for its watch lines' cfd.
func watchedConn(s *Server, fd int) *conn {
	cn := newConn(s, nil)
	cn.fd = fd
	return cn
}
