package integration

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/leasecached/leasecached/internal/testcert"
)

// `leasecached top` in a pseudo-terminal, against both servers under traffic: what it draws, that q and
// Ctrl-C end it with status 0 and the terminal as it was, and that a server it cannot reach or loses ends
// it with status 1 and a reason. The pseudo-terminal is opened with ioctls of golang.org/x/sys (a
// dependency already), which is all creack/pty would do here on Linux.
const (
	topWait      = 10 * time.Second // bound of each wait for the view to draw or exit
	topCols      = 120
	topRows      = 50
	enterAltScrn = "\x1b[?1049h"
	leaveAltScrn = "\x1b[?25h\x1b[?1049l"
)

// openPTY opens a pseudo-terminal pair with a size, both ends closed at cleanup.
func openPTY(t *testing.T) (master, tty *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { master.Close() })
	fd := int(master.Fd())
	require.NoError(t, unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0), "unlockpt")
	n, err := unix.IoctlGetUint32(fd, unix.TIOCGPTN)
	require.NoError(t, err, "ptsname")
	tty, err = os.OpenFile("/dev/pts/"+strconv.FormatUint(uint64(n), 10), os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { tty.Close() })
	require.NoError(t, unix.IoctlSetWinsize(int(tty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: topRows, Col: topCols}))
	return master, tty
}

// topView is a running `leasecached top` on a pseudo-terminal.
type topView struct {
	master, tty *os.File
	cmd         *exec.Cmd
	exited      chan struct{}
	before      uint32 // the terminal's local modes before top started
	mu          sync.Mutex
	out         bytes.Buffer // everything it drew
}

func startTop(t *testing.T, args ...string) *topView {
	t.Helper()
	requireLeasecached(t)
	v := &topView{exited: make(chan struct{})}
	v.master, v.tty = openPTY(t)
	v.before = lflag(t, v.tty)
	v.cmd = exec.Command(leasecachedPlainPath, append([]string{"top"}, args...)...)
	v.cmd.Stdin, v.cmd.Stdout, v.cmd.Stderr = v.tty, v.tty, v.tty
	v.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	require.NoError(t, v.cmd.Start())
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := v.master.Read(buf)
			v.mu.Lock()
			v.out.Write(buf[:n])
			v.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	go func() { _ = v.cmd.Wait(); close(v.exited) }()
	t.Cleanup(func() {
		select {
		case <-v.exited:
		default:
			_ = v.cmd.Process.Kill()
			<-v.exited
		}
		if t.Failed() {
			t.Logf("top drew:\n%q", truncate([]byte(v.output()), 6000))
		}
	})
	return v
}

func (v *topView) output() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.out.String()
}

// waitFor waits until what the view drew matches re, and returns the match.
func (v *topView) waitFor(t *testing.T, re *regexp.Regexp) string {
	t.Helper()
	deadline := time.Now().Add(topWait)
	for time.Now().Before(deadline) {
		if m := re.FindString(v.output()); m != "" {
			return m
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("top did not draw %v within %v", re, topWait)
	return ""
}

// wait waits for the view to exit and returns its status.
func (v *topView) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-v.exited:
	case <-time.After(topWait):
		t.Fatalf("top did not exit within %v", topWait)
	}
	// The reader takes what was written last: wait until the terminal holds nothing unread and what the
	// view drew has stopped growing.
	last := -1
	for deadline := time.Now().Add(topWait); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		unread, err := unix.IoctlGetInt(int(v.master.Fd()), unix.TIOCINQ)
		n := len(v.output())
		if err == nil && unread == 0 && n == last {
			break
		}
		last = n
	}
	return v.cmd.ProcessState.ExitCode()
}

// lflag is the terminal's local modes (echo, canonical input, signals).
func lflag(t *testing.T, tty *os.File) uint32 {
	t.Helper()
	tio, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	require.NoError(t, err)
	return tio.Lflag
}

// topTraffic sends gets and sets to d until the test ends: a few thousand a second, one key read more than
// the rest.
func topTraffic(t *testing.T, d *daemon) {
	t.Helper()
	conn, err := net.Dial("tcp", d.addr)
	require.NoError(t, err)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, conn) }()
	go func() {
		defer close(done)
		w := bufio.NewWriter(conn)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			for j := range 20 {
				fmt.Fprintf(w, "set top:%d 0 0 5 noreply\r\nhello\r\nget top:%d top:hot\r\nget top:none\r\n", j, j)
			}
			if w.Flush() != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		close(stop)
		<-done
		conn.Close()
	})
}

// A frame after the first (rates over an interval, not since start) with gets and sets under way.
var (
	topLoaded = regexp.MustCompile(`rates over [0-9.]+m?s\x1b\[K\r+\n\x1b\[K\r+\nrequests   total [1-9]\d*/s  get [1-9]\d*/s  set [1-9]\d*/s`)
	topMemory = regexp.MustCompile(`memory     [0-9.]+ (B|KiB|MiB) of 64\.0 MiB \([0-9.]+%\)  \[[#.]+\]  items [1-9]\d*`)
	topHit    = regexp.MustCompile(`hit ratio  [0-9.]+%  hits [1-9]\d*/s  misses [1-9]\d*/s`)
)

func TestTopTerminal(t *testing.T) {
	cases := []struct {
		name   string
		start  func(t *testing.T) *daemon
		key    string // how the view is quit
		shows  []*regexp.Regexp
		server string // a regexp of the server's name and version
	}{
		{"leasecached, q", func(t *testing.T) *daemon { return startLeasecached(t, "--grace", "30s") }, "q", []*regexp.Regexp{
			regexp.MustCompile(`leases     grants \d+/s  hot misses \d+/s  stale served \d+/s`),
			regexp.MustCompile(`grace      hits \d+/s  refills \d+/s  lease lapses \d+/s`),
			regexp.MustCompile(`hold       off`),
			// Hot keys as the server has them: a table, or its error while it has none.
			regexp.MustCompile(`hot keys: (sampled 1 in \d+, rates over \d+ s|not available \(the server answered [A-Z_]*ERROR[^\x1b]*\))`),
		}, `leasecached \S+`},
		{"memcached 1.6.18, Ctrl-C", func(t *testing.T) *daemon { return startMemcached(t) }, "\x03", []*regexp.Regexp{
			regexp.MustCompile(`leases     n/a`), regexp.MustCompile(`grace      n/a`), regexp.MustCompile(`hold       n/a`),
			regexp.MustCompile(`hot keys: not available \(the server answered ERROR\)`),
		}, `memcached 1\.6\.18`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.start(t)
			topTraffic(t, d)
			v := startTop(t, "-s", d.addr, "-d", "0.3")
			before := v.before
			v.waitFor(t, regexp.MustCompile(tc.server+" at "+regexp.QuoteMeta(d.addr)+", up "))
			v.waitFor(t, topLoaded)
			out := v.output()
			assert.Contains(t, out, enterAltScrn)
			assert.Regexp(t, topMemory, out)
			assert.Regexp(t, topHit, out)
			for _, re := range tc.shows {
				assert.Regexp(t, re, out)
			}
			if strings.Contains(out, "hot keys: sampled") {
				// top:hot is a fifth of the traffic's keyed requests: ranked, with a rate.
				v.waitFor(t, regexp.MustCompile(`\x1b\[K\r+\n +\d+ +[1-9]\d* +[0-9.]+% +\d+ +\d+  top:hot\x1b\[K`))
			}
			assert.NotEqual(t, before, lflag(t, v.tty), "top did not take the keys from the terminal")

			_, err := v.master.Write([]byte(tc.key))
			require.NoError(t, err)
			assert.Equal(t, 0, v.wait(t), "exit status after %q", tc.key)
			assert.True(t, bytes.HasSuffix([]byte(v.output()), []byte(leaveAltScrn)), "the screen is not put back at the end: %q",
				truncate([]byte(v.output()[max(0, len(v.output())-100):]), 100))
			assert.Equal(t, before, lflag(t, v.tty), "the terminal's modes are not restored")
		})
	}
}

// A server top cannot reach: status 1 and the reason, before anything is drawn. A server lost while it
// draws: status 1 and the reason, after the terminal is put back.
func TestTopServerGone(t *testing.T) {
	t.Run("unreachable", func(t *testing.T) {
		port, err := freePort()
		require.NoError(t, err)
		addr := "127.0.0.1:" + strconv.Itoa(port)
		v := startTop(t, "-s", addr)
		assert.Equal(t, 1, v.wait(t))
		out := v.output()
		assert.Contains(t, out, "leasecached: top: cannot reach "+addr+": ")
		assert.Contains(t, out, "connection refused")
		assert.NotContains(t, out, enterAltScrn)
		assert.Equal(t, v.before, lflag(t, v.tty))
	})
	t.Run("lost", func(t *testing.T) {
		d := startLeasecached(t)
		v := startTop(t, "-s", d.addr, "-d", "0.2")
		v.waitFor(t, regexp.MustCompile(`rates over`))
		d.forceStop()
		assert.Equal(t, 1, v.wait(t))
		out := v.output()
		i := bytes.LastIndex([]byte(out), []byte(leaveAltScrn))
		require.GreaterOrEqual(t, i, 0, "the screen is not put back")
		assert.Regexp(t, `^\r?\n?leasecached: top: lost `+regexp.QuoteMeta(d.addr)+`: `, out[i+len(leaveAltScrn):])
		assert.Equal(t, v.before, lflag(t, v.tty))
	})
}

// runTopPiped runs `leasecached top ARGS` with its output to a pipe, bounded by topWait.
func runTopPiped(t *testing.T, args ...string) (stdout, stderr string, status int) {
	t.Helper()
	requireLeasecached(t)
	cmd := exec.Command(leasecachedPlainPath, append([]string{"top"}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exitErr *exec.ExitError
		if err != nil && !errors.As(err, &exitErr) {
			t.Fatalf("top %v: %v", args, err)
		}
	case <-time.After(topWait):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("top %v did not exit within %v", args, topWait)
	}
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}

// Frames to a pipe: plain text, one per interval, -n of them, status 0.
func TestTopPipe(t *testing.T) {
	for _, d := range []*daemon{startLeasecached(t), startMemcached(t)} {
		topTraffic(t, d)
		out, stderr, status := runTopPiped(t, "-s", d.addr, "-n", "3", "-d", "0.2")
		require.Equal(t, 0, status, "%s: %s", d.name, stderr)
		assert.NotContains(t, out, "\x1b", d.name)
		assert.Equal(t, 3, strings.Count(out, " at "+d.addr+", up "), "%s: frames in\n%s", d.name, out)
		assert.Regexp(t, `rates over [0-9.]+m?s\n\nrequests   total [1-9]\d*/s  get [1-9]\d*/s`, out, d.name)
	}
}

// --tls with the client certificate a server with ssl_verify_mode=2 asks for; without it, status 1 and the
// reason.
func TestTopTLS(t *testing.T) {
	certs := testcert.New(t)
	for _, s := range tlsServers {
		t.Run(s.name, func(t *testing.T) {
			d := s.start(t, mtlsFlags(certs)...)
			tlsArgs := []string{"-s", d.addr, "-n", "1", "--tls", "--tls-ca-cert", certs.CA.CertFile}
			out, stderr, status := runTopPiped(t, append(tlsArgs, "--tls-cert", certs.Client.CertFile, "--tls-key", certs.Client.KeyFile)...)
			require.Equal(t, 0, status, stderr)
			assert.Contains(t, out, " at "+d.addr+", up ")
			assert.Contains(t, out, "hot keys: ")

			_, stderr, status = runTopPiped(t, tlsArgs...)
			assert.Equal(t, 1, status)
			assert.Contains(t, stderr, "leasecached: top: cannot reach "+d.addr+": ")
		})
	}
}

// A resized window is redrawn at once at its new width, not at the next frame; `-n` on a terminal prints
// plain frames that stay on the screen.
func TestTopResizeAndCount(t *testing.T) {
	d := startLeasecached(t)
	v := startTop(t, "-s", d.addr, "-d", "60")
	wide := regexp.MustCompile(`requests   total 0/s  get 0/s  set 0/s  delete 0/s  incr 0/s  decr 0/s  cas 0/s  touch 0/s  meta 0/s  flush 0/s\x1b\[K`)
	v.waitFor(t, wide)
	require.NoError(t, unix.IoctlSetWinsize(int(v.tty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: topRows, Col: 60}))
	v.waitFor(t, regexp.MustCompile(`requests   total 0/s  get 0/s  set 0/s  delete 0/s  incr 0/s\x1b\[K\r+\n           decr 0/s`))
	_, err := v.master.Write([]byte("q"))
	require.NoError(t, err)
	assert.Equal(t, 0, v.wait(t))

	v = startTop(t, "-s", d.addr, "-n", "2", "-d", "0.1")
	assert.Equal(t, 0, v.wait(t))
	out := v.output()
	assert.NotContains(t, out, "\x1b")
	assert.Equal(t, 2, strings.Count(out, " at "+d.addr+", up "), out)
	assert.Equal(t, v.before, lflag(t, v.tty))
}
