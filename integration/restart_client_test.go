package integration

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasecached/leasecached/internal/testdaemon"
	"github.com/stretchr/testify/require"
)

// The warm-restart tests (restart_*_test.go, issue 30) start leasecached with --data-dir, stop it in the
// ways a server stops (SIGTERM, SIGINT, SIGKILL), start it again on the same directory and check what it
// serves against a model of what was stored. This file holds what they share: the daemon's life cycle on
// a directory, and a small text client that never calls t.Fatal (the writers run in goroutines).

// Bounds of the restart tests.
const (
	// rsOpTimeout bounds one exchange of rsConn (a pipelined batch included).
	rsOpTimeout = 10 * time.Second
	// rsLoadTimeout bounds the wait for restart_loading 0 after a start.
	rsLoadTimeout = 60 * time.Second
	// rsStopTimeout bounds a graceful stop: the daemon writes item memory back (msync) before it exits.
	rsStopTimeout = 20 * time.Second
	// rsGetBatch is how many keys one get asks for when a test reads its whole model back.
	rsGetBatch = 100
)

// The restart stats (restart contract, "stats").
const (
	statLoading = "restart_loading"
	statLoaded  = "restart_items_loaded"
	statDropped = "restart_items_dropped"
	statSeconds = "restart_seconds"
)

// requireRestart skips under the harness self-test, where memcached plays leasecached: it has no
// --data-dir, so these tests cannot pass there by design.
func requireRestart(t testing.TB) {
	t.Helper()
	if os.Getenv(selfTestEnv) != "" {
		t.Skipf("%s: memcached has no --data-dir", selfTestEnv)
	}
}

// startOnDir starts leasecached with --data-dir dir (and args after the suite's defaults).
func startOnDir(t testing.TB, dir string, args ...string) *daemon {
	t.Helper()
	return startOnDirPath(t, leasecachedPath, dir, args...)
}

// startOnDirPlain is startOnDir with the daemon built without the race detector: it fills a directory
// in a fraction of the time (the race build then restarts on it).
func startOnDirPlain(t testing.TB, dir string, args ...string) *daemon {
	t.Helper()
	return startOnDirPath(t, leasecachedPlainPath, dir, args...)
}

func startOnDirPath(t testing.TB, path, dir string, args ...string) *daemon {
	t.Helper()
	requireLeasecached(t)
	return startDaemonSpec(t, testdaemon.Spec{Name: "leasecached", Path: path,
		Args: leasecachedArgs(onDirArgs(dir, args...)), Env: noExitSleep()})
}

// onDirArgs are the flags of a daemon on data directory dir: args, and --data-live off unless args name
// a live copy (liveArgs), so that no test leaves one in /dev/shm, where --data-live's default puts it;
// TestDataDirDefaultLive runs the default.
func onDirArgs(dir string, args ...string) []string {
	out := append([]string{"--data-dir", dir}, args...)
	if !slices.Contains(args, "--data-live") {
		out = append(out, "--data-live", "off")
	}
	return out
}

// liveArgs makes a root for --data-live on tmpfs and returns the flag naming it; the root, with the live
// copies in it, is removed after the test (after its daemons stop: cleanups run last first). The test
// skips without tmpfs at /dev/shm.
func liveArgs(t testing.TB) []string {
	t.Helper()
	var st syscall.Statfs_t
	if syscall.Statfs("/dev/shm", &st) != nil || st.Type != tmpfsMagic {
		t.Skip("--data-live: no tmpfs at /dev/shm")
	}
	root, err := os.MkdirTemp("/dev/shm", "lc-live-test-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	return []string{"--data-live", root}
}

// tmpfsMagic is tmpfs's statfs f_type.
const tmpfsMagic = 0x01021994

// noExitSleep is the environment that spares a -race daemon's clean exit the second it sleeps by default
// (GORACE atexit_sleep_ms, there for reports still being written): these tests stop daemons gracefully
// dozens of times. Races are reported as they happen, and still fail the test (harness_test.go).
func noExitSleep() []string {
	return []string{"GORACE=" + strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0")}
}

// stopHow is how a test ends a daemon before it starts it again.
type stopHow string

const (
	stopTerm stopHow = "SIGTERM"
	stopInt  stopHow = "SIGINT"
	stopUsr1 stopHow = "SIGUSR1" // memcached's graceful stop, the one its -e warm restart takes
	stopKill stopHow = "SIGKILL"
	// stopCommand sends memcached's shutdown command (the daemon must run with -A).
	stopCommand stopHow = "shutdown"
)

// stopDaemon ends d as how says. A graceful stop must exit 0 within rsStopTimeout.
func stopDaemon(t testing.TB, d *daemon, how stopHow) {
	t.Helper()
	switch how {
	case stopKill:
		d.forceStop()
		require.False(t, d.proc.Running(), "%s outlived SIGKILL", d.name)
		return
	case stopTerm:
		require.NoError(t, d.cmd.Process.Signal(syscall.SIGTERM))
	case stopInt:
		require.NoError(t, d.cmd.Process.Signal(syscall.SIGINT))
	case stopUsr1:
		require.NoError(t, d.cmd.Process.Signal(syscall.SIGUSR1))
	case stopCommand:
		c := mustDialRS(t, d)
		_, err := c.c.Write([]byte("shutdown\r\n"))
		require.NoError(t, err)
	default:
		t.Fatalf("unknown stop %q", how)
	}
	select {
	case <-d.exited:
	case <-time.After(rsStopTimeout):
		t.Fatalf("%s did not exit within %v of %s", d.name, rsStopTimeout, how)
	}
	require.NoError(t, d.waitErr, "%s: exit status after %s; output:\n%s", d.name, how, d.out.Tail(2000))
}

// waitLoaded polls stats until restart_loading is 0 and returns those stats. The daemon must keep
// running and answer every stats meanwhile.
func waitLoaded(t testing.TB, d *daemon) map[string]string {
	t.Helper()
	c := mustDialRS(t, d)
	deadline := time.Now().Add(rsLoadTimeout)
	for {
		st, err := c.stats()
		require.NoError(t, err, "%s: stats while loading", d.name)
		require.Contains(t, st, statLoading, "%s: stats without %s (is --data-dir on?)", d.name, statLoading)
		if st[statLoading] == "0" {
			return st
		}
		require.Equal(t, "1", st[statLoading])
		require.True(t, time.Now().Before(deadline), "%s: still loading after %v", d.name, rsLoadTimeout)
		time.Sleep(20 * time.Millisecond)
	}
}

// statInt is a numeric stat, failing the test when it is missing or not a number.
func statInt(t testing.TB, st map[string]string, name string) int64 {
	t.Helper()
	v, ok := st[name]
	require.True(t, ok, "stats has no %s", name)
	n, err := strconv.ParseInt(v, 10, 64)
	require.NoError(t, err, "stat %s=%q", name, v)
	return n
}

// dataDirLines are the lines of d's output that name --data-dir (the "starting empty" notice).
func dataDirLines(d *daemon) []string {
	var out []string
	for _, l := range strings.Split(d.out.String(), "\n") {
		if strings.Contains(l, "--data-dir") {
			out = append(out, l)
		}
	}
	return out
}

// dataFiles lists the regular files in dir except the lock: what a corruption may hit.
func dataFiles(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range ents {
		if e.Type().IsRegular() && e.Name() != "lock" {
			out = append(out, e.Name())
		}
	}
	require.NotEmpty(t, out, "no data files in %s", dir)
	return out
}

// copyDir copies the regular files of src into dst (created), keeping holes out of the question by
// copying bytes: the files are the size of -m at most.
func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dst, 0o755))
	// cp keeps sparse files sparse (a 64 MB item file is mostly holes).
	out, err := exec.Command("cp", "-a", "--sparse=always", src+"/.", dst).CombinedOutput()
	require.NoError(t, err, "cp: %s", out)
}

// rsItem is one item as gets or mg shows it.
type rsItem struct {
	flags uint32
	cas   uint64
	val   []byte
}

// rsConn is a text-protocol client connection with buffered I/O. Its methods return errors instead of
// failing the test, so writer goroutines may use it.
type rsConn struct {
	c net.Conn
	r *bufio.Reader
	w *bufio.Writer
}

func dialRS(d *daemon) (*rsConn, error) {
	c, err := net.DialTimeout("tcp", d.addr, dialTimeout)
	if err != nil {
		return nil, fmt.Errorf("dial %s at %s: %w", d.name, d.addr, err)
	}
	return &rsConn{c: c, r: bufio.NewReaderSize(c, 64<<10), w: bufio.NewWriterSize(c, 64<<10)}, nil
}

// mustDialRS connects to d and closes the connection when the test ends.
func mustDialRS(t testing.TB, d *daemon) *rsConn {
	t.Helper()
	c, err := dialRS(d)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func (c *rsConn) Close() error { return c.c.Close() }

// flush writes what is buffered; the deadline it sets also covers reading the replies.
func (c *rsConn) flush() error {
	_ = c.c.SetDeadline(time.Now().Add(rsOpTimeout))
	return c.w.Flush()
}

// line reads one reply line without its CRLF.
func (c *rsConn) line() (string, error) {
	s, err := c.r.ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("read reply line (got %q): %w", s, err)
	}
	if !strings.HasSuffix(s, "\r\n") {
		return "", fmt.Errorf("reply line %q does not end with CRLF", s)
	}
	return strings.TrimSuffix(s, "\r\n"), nil
}

// data reads a data block of n bytes and its CRLF.
func (c *rsConn) data(n int) ([]byte, error) {
	buf := make([]byte, n+2)
	if _, err := io.ReadFull(c.r, buf); err != nil {
		return nil, fmt.Errorf("read %d-byte data block: %w", n, err)
	}
	if !bytes.HasSuffix(buf, []byte("\r\n")) {
		return nil, fmt.Errorf("data block %q not terminated by CRLF", truncate(buf, 60))
	}
	return buf[:n], nil
}

// call sends a command with a one-line reply and returns the line.
func (c *rsConn) call(cmd string) (string, error) {
	c.w.WriteString(cmd)
	if err := c.flush(); err != nil {
		return "", err
	}
	return c.line()
}

// queueStore buffers a storage command (set, add, append, ...) without sending it.
func (c *rsConn) queueStore(verb, key string, flags uint32, exptime int64, val []byte) {
	fmt.Fprintf(c.w, "%s %s %d %d %d\r\n", verb, key, flags, exptime, len(val))
	c.w.Write(val)
	c.w.WriteString("\r\n")
}

// store sends a storage command and returns its reply line.
func (c *rsConn) store(verb, key string, flags uint32, exptime int64, val []byte) (string, error) {
	c.queueStore(verb, key, flags, exptime, val)
	if err := c.flush(); err != nil {
		return "", err
	}
	return c.line()
}

// getItems reads keys with verb (get or gets) in batches of rsGetBatch and returns what was found.
func (c *rsConn) getItems(verb string, keys []string) (map[string]rsItem, error) {
	out := make(map[string]rsItem, len(keys))
	for len(keys) > 0 {
		n := min(len(keys), rsGetBatch)
		c.w.WriteString(verb)
		for _, k := range keys[:n] {
			c.w.WriteString(" ")
			c.w.WriteString(k)
		}
		c.w.WriteString("\r\n")
		if err := c.flush(); err != nil {
			return nil, err
		}
		if err := c.readValues(verb, out); err != nil {
			return nil, fmt.Errorf("%s %s ...: %w", verb, keys[0], err)
		}
		keys = keys[n:]
	}
	return out, nil
}

// readValues reads VALUE blocks up to END into out; a key answered twice is an error.
func (c *rsConn) readValues(verb string, out map[string]rsItem) error {
	for {
		l, err := c.line()
		if err != nil {
			return err
		}
		if l == "END" {
			return nil
		}
		f := strings.Fields(l)
		want := 4
		if verb == "gets" {
			want = 5
		}
		if len(f) != want || f[0] != "VALUE" {
			return fmt.Errorf("unexpected reply line %q", l)
		}
		flags, err1 := strconv.ParseUint(f[2], 10, 32)
		n, err2 := strconv.Atoi(f[3])
		if err1 != nil || err2 != nil || n < 0 {
			return fmt.Errorf("bad VALUE line %q", l)
		}
		it := rsItem{flags: uint32(flags)}
		if verb == "gets" {
			if it.cas, err = strconv.ParseUint(f[4], 10, 64); err != nil {
				return fmt.Errorf("bad CAS in %q", l)
			}
		}
		if it.val, err = c.data(n); err != nil {
			return fmt.Errorf("%s: %w", l, err)
		}
		if _, dup := out[f[1]]; dup {
			return fmt.Errorf("key %s answered twice", f[1])
		}
		out[f[1]] = it
	}
}

// stats returns the general stats.
func (c *rsConn) stats() (map[string]string, error) { return c.statsGroup("") }

// statsGroup returns the stats of group ("settings", ...; "": the general ones).
func (c *rsConn) statsGroup(group string) (map[string]string, error) {
	if group != "" {
		group = " " + group
	}
	c.w.WriteString("stats" + group + "\r\n")
	if err := c.flush(); err != nil {
		return nil, err
	}
	st := map[string]string{}
	for {
		l, err := c.line()
		if err != nil {
			return nil, fmt.Errorf("stats: %w", err)
		}
		if l == "END" {
			return st, nil
		}
		f := strings.SplitN(l, " ", 3)
		if len(f) != 3 || f[0] != "STAT" {
			return nil, fmt.Errorf("stats: unexpected line %q", l)
		}
		st[f[1]] = f[2]
	}
}

// maxCAS is the largest CAS unique among items.
func maxCAS(items map[string]rsItem) uint64 {
	var m uint64
	for _, it := range items {
		m = max(m, it.cas)
	}
	return m
}

// rsValue is n deterministic bytes for (key, seq), every byte value included (CR, LF and NUL among
// them): the value a test stores, and so knows, for that key at that step.
func rsValue(key string, seq, n int) []byte {
	h := uint64(14695981039346656037)
	for i := 0; i < len(key); i++ {
		h = (h ^ uint64(key[i])) * 1099511628211
	}
	h ^= uint64(seq) * 0x9e3779b97f4a7c15
	b := make([]byte, (n+7)&^7)
	for i := 0; i < len(b); i += 8 {
		// xorshift64*: cheap, and a torn or shifted copy of it does not look like another step's value.
		h ^= h >> 12
		h ^= h << 25
		h ^= h >> 27
		binary.LittleEndian.PutUint64(b[i:], h*2685821657736338717)
	}
	return b[:n]
}

// mgReply is one meta-get answer: its header line and, for VA, its value.
type mgReply struct {
	head string
	val  []byte
}

// metaGets pipelines `mg <key> <flags>` for every key and returns the replies in order.
func (c *rsConn) metaGets(keys []string, flags string) ([]mgReply, error) {
	out := make([]mgReply, 0, len(keys))
	for len(keys) > 0 {
		n := min(len(keys), rsGetBatch)
		for _, k := range keys[:n] {
			fmt.Fprintf(c.w, "mg %s %s\r\n", k, flags)
		}
		if err := c.flush(); err != nil {
			return nil, err
		}
		for range n {
			l, err := c.line()
			if err != nil {
				return nil, err
			}
			r := mgReply{head: l}
			if strings.HasPrefix(l, "VA ") {
				f := strings.Fields(l)
				size, err := strconv.Atoi(f[1])
				if err != nil {
					return nil, fmt.Errorf("bad VA line %q", l)
				}
				if r.val, err = c.data(size); err != nil {
					return nil, err
				}
			}
			out = append(out, r)
		}
		keys = keys[n:]
	}
	return out, nil
}
