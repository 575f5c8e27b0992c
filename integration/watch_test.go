package integration

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leasecached/leasecached/internal/testcert"
)

// `watch` against memcached 1.6.18: the same commands to both, and the watcher's lines compared after
// normalising what differs between any two runs (see normaliseWatch). doc/design/watch.md.

// watchConn is a plain text connection with a line reader.
type watchConn struct {
	c net.Conn
	r *bufio.Reader
}

func dialWatch(t *testing.T, d *daemon) *watchConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", d.addr, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return &watchConn{c: c, r: bufio.NewReader(c)}
}

func (w *watchConn) send(t *testing.T, s string) {
	t.Helper()
	require.NoError(t, w.c.SetWriteDeadline(time.Now().Add(10*time.Second)))
	_, err := w.c.Write([]byte(s))
	require.NoError(t, err)
}

// line reads one line (without its end) within 5 s.
func (w *watchConn) line(t *testing.T) string {
	t.Helper()
	require.NoError(t, w.c.SetReadDeadline(time.Now().Add(5*time.Second)))
	l, err := w.r.ReadString('\n')
	require.NoError(t, err, "after %q", l)
	return strings.TrimRight(l, "\r\n")
}

// do sends one command, then mn, and reads the replies up to MN (mn looks no key up: it logs nothing).
func (w *watchConn) do(t *testing.T, cmd string) []string {
	t.Helper()
	w.send(t, cmd+"mn\r\n")
	var got []string
	for l := w.line(t); l != "MN"; l = w.line(t) {
		got = append(got, l)
	}
	return got
}

// doBin sends one binary request, then a NOOP, and reads the replies up to the NOOP's.
func (w *watchConn) doBin(t *testing.T, r binReq) {
	t.Helper()
	w.send(t, string(r.encode("", 1, 0))+string(bSimple(opNoop).encode("", 2, 0)))
	require.NoError(t, w.c.SetReadDeadline(time.Now().Add(5*time.Second)))
	for {
		hdr := make([]byte, binHdrLen)
		_, err := io.ReadFull(w.r, hdr)
		require.NoError(t, err)
		_, err = io.CopyN(io.Discard, w.r, int64(binary.BigEndian.Uint32(hdr[8:])))
		require.NoError(t, err)
		if hdr[1] == opNoop {
			return
		}
	}
}

// ownConn is a connevents filter for lines about cl alone: other connections of the daemon (the harness's
// readiness probe, earlier tests' connections) open and close when they do.
func ownConn(cl *watchConn) func(string) bool {
	port := " rport=" + strconv.Itoa(cl.c.LocalAddr().(*net.TCPAddr).Port) + " "
	return func(l string) bool { return strings.Contains(l, port) }
}

// watchOwn reads a watcher's lines up to and including the first that contains end, leaving out the
// connection lines own refuses (nil: none).
func (w *watchConn) watchOwn(t *testing.T, own func(string) bool, end string) []string {
	t.Helper()
	var got []string
	for {
		l := w.line(t)
		if own != nil && strings.Contains(l, " type=conn_") && !own(l) {
			continue
		}
		got = append(got, l)
		if strings.Contains(l, end) {
			return got
		}
	}
}

// watchUntil reads a watcher's lines up to and including the first that contains end.
func (w *watchConn) watchUntil(t *testing.T, end string) []string {
	t.Helper()
	var got []string
	for {
		l := w.line(t)
		got = append(got, l)
		if strings.Contains(l, end) {
			return got
		}
	}
}

var (
	watchTs   = regexp.MustCompile(`^ts=\d+\.\d{1,6} gid=(\d+) `)
	watchCfd  = regexp.MustCompile(` cfd=\d+`)
	watchPort = regexp.MustCompile(` rport=[1-9]\d*`) // a unix socket's 0 is kept
)

// normaliseWatch rewrites what differs between two runs of one server: ts (the clock), cfd (descriptor
// numbers are the process's) and rport (an ephemeral port). gids must increase and are compared as ranks:
// lines of other connections (a readiness probe or an earlier case's connections closing late) take gids
// between the ones kept. clsid is compared as it is: leasecached reports memcached's default slab class of
// the item.
func normaliseWatch(t *testing.T, lines []string) []string {
	t.Helper()
	out := make([]string, len(lines))
	prev := -1
	for i, l := range lines {
		m := watchTs.FindStringSubmatch(l)
		require.NotNil(t, m, "line %q", l)
		gid, _ := strconv.Atoi(m[1])
		require.Greater(t, gid, prev, "gids out of order at %q", l)
		prev = gid
		l = watchTs.ReplaceAllString(l, fmt.Sprintf("gid=+%d ", i))
		l = watchCfd.ReplaceAllString(l, " cfd=N")
		out[i] = watchPort.ReplaceAllString(l, " rport=N")
	}
	return out
}

// watchCase is one differential script: a watcher of flags, then a client's commands; the lines are read
// up to the first holding end.
type watchCase struct {
	name  string
	flags string
	cmds  []string
	bin   []binReq // sent in the binary protocol, after cmds
	end   string   // the last line's marker
	close bool     // the client closes after its commands (quit)
}

func watchCases() []watchCase {
	return []watchCase{
		{name: "fetchers", flags: "fetchers", end: "key=zz-end", cmds: []string{
			"set a 0 0 3\r\nabc\r\n", "get a b\r\n", "gets a\r\n", "gat 100 a b\r\n", "gats 0 a\r\n",
			"touch a 10\r\n", "touch b 10\r\n", "incr a 1\r\n", "set n 0 0 1\r\n5\r\n", "decr n 2\r\n",
			"delete b\r\n", "delete a\r\n", "mg n v\r\n", "mg b v\r\n", "me n\r\n", "md n\r\n", "ma x\r\n",
			"mg viv v N30\r\n", "mg viv v N30\r\n", "ma ctr N0 J13\r\n", "ma ctr N0 J13\r\n",
			"flush_all\r\n", "set f 0 0 1\r\nx\r\n", "flush_all\r\n", "get f\r\n",
			"get zz-end\r\n",
		}},
		{name: "mutations", flags: "mutations", end: "key=zz-end", cmds: []string{
			"mg viv v N30\r\n", "ma ctr N0 J13\r\n", "ma ctr N0 J13\r\n",
			"set a 7 100 3\r\nabc\r\n", "add a 0 0 1\r\nx\r\n", "add b 0 0 2\r\nbb\r\n",
			"replace c 0 0 1\r\nc\r\n", "replace b 3 50 1\r\nB\r\n", "append a 0 0 2\r\nde\r\n",
			"prepend a 0 0 1\r\n_\r\n", "append zz 0 0 1\r\nx\r\n", "prepend zz 0 0 1\r\nx\r\n",
			"cas a 0 0 1 1\r\nx\r\n", "cas nope 0 0 1 1\r\nx\r\n", "ms m 2\r\nhi\r\n", "ms m 1 T30\r\nx\r\n",
			"ms m 1 ME\r\nx\r\n", "ms m2 1 ME\r\nx\r\n", "ms m 1 MA\r\ny\r\n", "ms m 1 MP\r\nz\r\n",
			"ms m 1 MR\r\nr\r\n", "ms none 1 MR\r\nr\r\n",
			"set " + strings.Repeat("v", 40) + " 0 0 500\r\n" + strings.Repeat("x", 500) + "\r\n",
			"set big 0 0 20000\r\n" + strings.Repeat("x", 20000) + "\r\n",
			"set zz-end 0 0 1\r\nx\r\n",
		}},
		{name: "keys are uri-encoded", flags: "fetchers mutations", end: "key=zz-end", cmds: []string{
			"set a%b 0 0 1\r\nx\r\n", "get a%b k:1/x k~a.b_c-d\r\n", "get \x01\x7f\xff\r\n", "get zz-end\r\n",
		}},
		{name: "binary", flags: "fetchers mutations", end: "key=zz-end", bin: []binReq{
			bStore(opSet, "bk", "hello", 3, 100), bGet(opGet, "bk"), bGet(opGetK, "nope"),
			bStore(opAdd, "bk", "x", 0, 0), bStore(opReplace, "bk", "abc", 0, 0), bValue(opAppend, "bk", "de"),
			bValue(opPrepend, "none", "x"), bTouch(opTouch, "bk", 10), bTouch(opGAT, "bk", 20),
			bArith(opIncrement, "ctr", 1, 5, 0), bArith(opIncrement, "ctr", 1, 5, 0), bKey(opDelete, "bk"),
			bKey(opDelete, "bk"), bGet(opGet, "zz-end"),
		}},
		{name: "connevents", flags: "connevents", end: "conn_close", close: true, cmds: []string{"version\r\n"}},
		{name: "multiple kinds", flags: "mutations connevents fetchers", end: "conn_close", close: true,
			cmds: []string{"set k 0 0 1\r\nx\r\n", "get k\r\n"}},
	}
}

func TestWatchDifferential(t *testing.T) {
	mc := startMemcached(t, noLRUThreads...)
	lc := startLeasecached(t)
	for _, c := range watchCases() {
		t.Run(c.name, func(t *testing.T) {
			var got [2][]string
			for i, d := range []*daemon{mc, lc} {
				w := dialWatch(t, d)
				w.send(t, "watch "+c.flags+"\r\n")
				require.Equal(t, "OK", w.line(t), d.name)
				cl := dialWatch(t, d)
				for _, cmd := range c.cmds {
					cl.do(t, cmd)
				}
				for _, r := range c.bin {
					cl.doBin(t, r)
				}
				if c.close {
					cl.send(t, "quit\r\n")
				}
				got[i] = normaliseWatch(t, w.watchOwn(t, ownConn(cl), c.end))
				_ = w.c.Close()
				_ = cl.c.Close()
			}
			assert.Equal(t, strings.Join(got[0], "\n"), strings.Join(got[1], "\n"), "memcached, then leasecached")
		})
	}
}

// The replies to watch that are not OK, as memcached gives them: an unknown kind, noreply, commands
// pipelined ahead of it, and the 21st watcher.
func TestWatchRepliesDifferential(t *testing.T) {
	mc := startMemcached(t)
	lc := startLeasecached(t)
	for _, d := range []*daemon{mc, lc} {
		c := dialWatch(t, d)
		assert.Equal(t, []string{"ERROR"}, c.do(t, "watch bogus\r\n"), d.name)
		assert.Empty(t, c.do(t, "watch noreply\r\n"), d.name)
		c.send(t, "get x\r\nversion\r\nwatch\r\n") // a get's replies are written at once, version's wait
		assert.Equal(t, "END", c.line(t), d.name)
		assert.Equal(t, "VERSION 1.6.18", c.line(t), d.name)
		assert.Equal(t, "ERROR cannot pipeline other commands before watch", c.line(t), d.name)
		var ws []*watchConn
		for range 20 {
			w := dialWatch(t, d)
			w.send(t, "watch\r\n")
			require.Equal(t, "OK", w.line(t), d.name)
			ws = append(ws, w)
		}
		w := dialWatch(t, d)
		w.send(t, "watch mutations\r\n")
		assert.Equal(t, "WATCHER_TOO_MANY log watcher limit reached", w.line(t), d.name)
		for _, w := range ws {
			_ = w.c.Close()
		}
		waitWatchStat(t, c, "log_watchers", "0")
	}
}

// watchStat is one `stats` value.
func watchStat(t *testing.T, c *watchConn, name string) string {
	t.Helper()
	for _, l := range c.do(t, "stats\r\n") {
		if f := strings.Fields(l); len(f) == 3 && f[1] == name {
			return f[2]
		}
	}
	t.Fatalf("no stat %s", name)
	return ""
}

// waitWatchStat waits up to 5 s for a stat to read want.
func waitWatchStat(t *testing.T, c *watchConn, name, want string) {
	t.Helper()
	var got string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if got = watchStat(t, c, name); got == want {
			return
		}
	}
	t.Fatalf("stat %s is %s, want %s", name, got, want)
}

// A watcher that does not read loses lines, and both servers count them (log_watcher_skipped) and tell the
// watcher how many once it reads; log_watcher_sent counts what it got. Its disconnection ends it
// (log_watchers).
func TestWatchSkipsDifferential(t *testing.T) {
	mc := startMemcached(t)
	lc := startLeasecached(t)
	for _, d := range []*daemon{mc, lc} {
		w := dialWatch(t, d)
		w.send(t, "watch fetchers\r\n")
		require.Equal(t, "OK", w.line(t), d.name)
		cl := dialWatch(t, d)
		waitWatchStat(t, cl, "log_watchers", "1") // memcached updates it once per round of its logger
		get := "get " + strings.Repeat("k", 240) + "\r\n"
		for i := 0; watchStat(t, cl, "log_watcher_skipped") == "0"; i++ {
			require.Less(t, i, 2000, "%s: nothing skipped", d.name)
			cl.do(t, strings.Repeat(get, 200))
		}
		// The watcher reads again; a marker line may itself be skipped while its buffer is still full, so
		// it is asked for until one arrives.
		var lines []string
		require.NoError(t, w.c.SetReadDeadline(time.Now().Add(time.Minute)))
		done := make(chan error, 1)
		go func() {
			for {
				l, err := w.r.ReadString('\n')
				if err != nil {
					done <- err
					return
				}
				lines = append(lines, strings.TrimSuffix(l, "\n"))
				if strings.Contains(l, "key=zz-end") {
					done <- nil
					return
				}
			}
		}()
		markers := 0
	marker:
		for ; ; markers++ {
			require.Less(t, markers, 500, "%s: the marker never came", d.name)
			cl.do(t, "get zz-end\r\n")
			select {
			case err := <-done:
				require.NoError(t, err, d.name)
				break marker
			case <-time.After(20 * time.Millisecond):
			}
		}
		skipped := 0
		for _, l := range lines {
			if n, ok := strings.CutPrefix(l, "skipped="); ok {
				k, err := strconv.Atoi(n)
				require.NoError(t, err)
				skipped += k
			}
		}
		assert.Positive(t, skipped, d.name)
		// Markers asked for after the one read may be sent or skipped after it: the counts may exceed what
		// was read by that many. memcached's logger adds a round's counts after writing its lines, so the
		// stats may lag what was read for a moment: they are read until they cover it, bounded.
		read := len(lines) - strings.Count(strings.Join(lines, "\n"), "skipped=")
		var sk, sent int
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			sk, _ = strconv.Atoi(watchStat(t, cl, "log_watcher_skipped"))
			sent, _ = strconv.Atoi(watchStat(t, cl, "log_watcher_sent"))
			if sk >= skipped && sent >= read || time.Now().After(deadline) {
				break
			}
		}
		assert.GreaterOrEqual(t, sk, skipped, "%s: skipped= lines against the stat", d.name)
		assert.LessOrEqual(t, sk, skipped+markers, "%s: skipped= lines against the stat", d.name)
		assert.GreaterOrEqual(t, sent, read, d.name)
		assert.LessOrEqual(t, sent, read+markers, d.name)
		_ = w.c.Close()
		waitWatchStat(t, cl, "log_watchers", "0")
	}
}

// Two watchers of different kinds each get their own lines (leasecached; the same script's lines are
// compared with memcached's in TestWatchDifferential).
func TestWatchMultiple(t *testing.T) {
	lc := startLeasecached(t)
	f, m := dialWatch(t, lc), dialWatch(t, lc)
	f.send(t, "watch fetchers\r\n")
	m.send(t, "watch mutations\r\n")
	require.Equal(t, "OK", f.line(t))
	require.Equal(t, "OK", m.line(t))
	cl := dialWatch(t, lc)
	cl.do(t, "set k 0 0 1\r\nx\r\n")
	cl.do(t, "get k\r\n")
	cl.do(t, "set zz-end 0 0 1\r\nx\r\n")
	cl.do(t, "get zz-end\r\n")
	for _, l := range f.watchUntil(t, "zz-end status=not_found") {
		assert.Contains(t, l, "type=item_get", l)
	}
	for _, l := range m.watchUntil(t, "key=zz-end") {
		assert.Contains(t, l, "type=item_store", l)
	}
}

// deletions (memcached 1.6.20's, refused by 1.6.18): every removal of a key by a client's command, with
// memcached's deleted line; leasecached adds md with I (the value is stale) and flush_all.
func TestWatchDeletions(t *testing.T) {
	mc := startMemcached(t)
	w := dialWatch(t, mc)
	assert.Equal(t, []string{"ERROR"}, w.do(t, "watch deletions\r\n"), "memcached 1.6.18 has no deletions")

	lc := startLeasecached(t)
	w = dialWatch(t, lc)
	w.send(t, "watch deletions\r\n")
	require.Equal(t, "OK", w.line(t))
	cl := dialWatch(t, lc)
	for _, cmd := range []string{"set a 0 0 4\r\nvbar\r\n", "delete a\r\n", "delete a\r\n", "md nope\r\n",
		"set b 0 0 2\r\nbb\r\n", "md b\r\n", "set c 0 0 1\r\nc\r\n", "md c I\r\n", "flush_all 5\r\n"} {
		cl.do(t, cmd)
	}
	got := normaliseWatch(t, w.watchUntil(t, "flush_all"))
	assert.Equal(t, []string{
		"gid=+0 type=deleted key=a cmd=delete clsid=1 size=4",
		"gid=+1 type=deleted key=b cmd=md clsid=1 size=2",
		"gid=+2 type=deleted key=c cmd=md clsid=1 size=1",
		"gid=+3 type=flush_all delay=5 cfd=N",
	}, got)
}

// Evictions have memcached's line (which items go differs: CLOCK against memcached's segmented LRU, so
// the lines' shape is compared, on both servers).
func TestWatchEvictions(t *testing.T) {
	shape := regexp.MustCompile(`^ts=\d+\.\d+ gid=\d+ type=eviction key=k\d+ fetch=(yes|no) ttl=(-1|\d+) la=\d+ clsid=\d+ size=1000$`)
	for _, d := range []*daemon{startMemcached(t, "-m", "8"), startLeasecached(t, "-m", "8")} {
		w := dialWatch(t, d)
		w.send(t, "watch evictions\r\n")
		require.Equal(t, "OK", w.line(t), d.name)
		cl := dialWatch(t, d)
		value := strings.Repeat("v", 1000)
		var script strings.Builder
		for i := range 20_000 {
			fmt.Fprintf(&script, "set k%d 0 0 1000 noreply\r\n%s\r\n", i, value)
			if i%1000 == 999 {
				cl.do(t, script.String())
				script.Reset()
			}
		}
		l := w.line(t)
		assert.Regexp(t, shape, l, d.name)
	}
}

// A connection closed for idleness is logged with reason=idle_timeout; the watcher itself, silent as long
// as it lives, is never closed for it (memcached's logger thread owns it).
func TestWatchIdleTimeout(t *testing.T) {
	parallelWaiting(t)
	mc := startMemcached(t, "-o", "idle_timeout=1")
	lc := startLeasecached(t, "--idle-timeout", "1")
	var got [2][]string
	for i, d := range []*daemon{mc, lc} {
		w := dialWatch(t, d)
		w.send(t, "watch connevents\r\n")
		require.Equal(t, "OK", w.line(t), d.name)
		cl := dialWatch(t, d)
		got[i] = normaliseWatch(t, w.watchOwn(t, ownConn(cl), "conn_close"))
		_, err := cl.r.ReadByte() // the idle client was closed
		assert.Error(t, err, d.name)
		other := dialWatch(t, d)
		assert.Equal(t, "1", watchStat(t, other, "log_watchers"), "%s: the watcher outlived the timeout", d.name)
	}
	assert.Equal(t, got[0], got[1], "memcached, then leasecached")
	assert.Equal(t, "gid=+1 type=conn_close rip=127.0.0.1 rport=N transport=tcp reason=idle_timeout cfd=N", got[1][1])
}

// A watcher over TLS (served on the event loops, looptls.go) gets its lines encrypted like any reply.
func TestWatchTLS(t *testing.T) {
	certs := testcert.New(t)
	lc := startLeasecached(t, tlsFlags(certs)...)
	tc, err := dialTLS(lc.addr, clientTLS(t, certs, nil))
	require.NoError(t, err)
	t.Cleanup(func() { _ = tc.Close() })
	w := &watchConn{c: tc, r: bufio.NewReader(tc)}
	w.send(t, "watch mutations connevents\r\n")
	require.Equal(t, "OK", w.line(t))
	c2, err := dialTLS(lc.addr, clientTLS(t, certs, nil))
	require.NoError(t, err)
	cl := &watchConn{c: c2, r: bufio.NewReader(c2)}
	cl.do(t, "set over-tls 0 0 2\r\nok\r\n")
	cl.send(t, "quit\r\n")
	got := normaliseWatch(t, w.watchOwn(t, ownConn(cl), "conn_close"))
	assert.Equal(t, []string{
		"gid=+0 type=conn_new rip=127.0.0.1 rport=N transport=tcp cfd=N",
		"gid=+1 type=item_store key=over-tls status=stored cmd=set ttl=0 clsid=1 cfd=N size=2",
		"gid=+2 type=conn_close rip=127.0.0.1 rport=N transport=tcp reason=normal cfd=N",
	}, got)
}

// Connections on a unix socket: memcached shows rip=unix rport=0 transport=local.
func TestWatchUnixSocket(t *testing.T) {
	dir := t.TempDir()
	var got [2][]string
	for i, server := range []string{"memcached", "leasecached"} {
		sock := filepath.Join(dir, server[:2]+".sock")
		startOnSocket(t, server, sock, "-s", sock)
		dial := func() *watchConn {
			c, err := net.DialTimeout("unix", sock, 5*time.Second)
			require.NoError(t, err)
			t.Cleanup(func() { _ = c.Close() })
			return &watchConn{c: c, r: bufio.NewReader(c)}
		}
		w := dial()
		w.send(t, "watch connevents mutations\r\n")
		require.Equal(t, "OK", w.line(t), server)
		cl := dial()
		cl.do(t, "set u 0 0 1\r\nx\r\n")
		cl.send(t, "quit\r\n")
		// A unix socket's lines show no port, and a descriptor is reused at once: the client's lines are the
		// set's, the last conn_new before it and the first conn_close after it, of the set's cfd.
		storeAt := regexp.MustCompile(`type=item_store .* (cfd=\d+) `)
		var lines []string
		cfd, newAt := "", -1
		for {
			l := w.line(t)
			if m := storeAt.FindStringSubmatch(l); m != nil {
				cfd = m[1]
				for j := len(lines) - 1; j >= 0 && newAt < 0; j-- {
					if strings.Contains(lines[j], "type=conn_new") && strings.HasSuffix(lines[j], " "+cfd) {
						newAt = j
					}
				}
				require.GreaterOrEqual(t, newAt, 0, "%s: no conn_new of %s before %q", server, cfd, l)
				lines = append(lines[newAt:newAt+1], l)
				continue
			}
			if cfd != "" && strings.Contains(l, "type=conn_close") && strings.HasSuffix(l, " "+cfd) {
				lines = append(lines, l)
				break
			}
			if cfd == "" {
				lines = append(lines, l)
			}
		}
		// memcached 1.6.18 may print the close of a unix connection with an empty rip: its address is
		// left uninitialised (fixed after 1.6.18), so it is not compared.
		own := []string{lines[0], lines[1], strings.Replace(lines[2], " rip= ", " rip=unix ", 1)}
		got[i] = normaliseWatch(t, own)
	}
	assert.Equal(t, got[0], got[1], "memcached, then leasecached")
	assert.Equal(t, "gid=+0 type=conn_new rip=unix rport=0 transport=local cfd=N", got[1][0])
}
