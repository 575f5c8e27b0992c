package integration

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The -Y exchanges, sent to memcached 1.6.18 -Y and to leasecached -Y, the replies compared byte for byte
// (doc/design/auth.md). Every exchange is one connection; its steps are written one at a time, each
// whole, and what the server answers within authQuiet of a step is that step's reply.

const (
	// authQuiet is how long a step waits for more of its reply once nothing more arrives; the steps' replies
	// are not delimited (an unauthenticated connection answers no sentinel), so silence ends them.
	authQuiet = 300 * time.Millisecond
	// authReloadWait bounds the wait for a SIGHUP's reload: memcached reloads on its next clock tick (1 s).
	authReloadWait = 5 * time.Second
	// authFile is the file both servers start with (memcached's t/authfile).
	authFile = "foo:bar\nbaaaz:quux\n"
)

// writeAuthFile writes content to path, readable by memcached after it drops privileges.
func writeAuthFile(t testing.TB, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	require.NoError(t, os.WriteFile(tmp, []byte(content), 0o644))
	require.NoError(t, os.Rename(tmp, path))
}

// startAuthPair starts both servers with -Y on one file, and returns its path.
func startAuthPair(t *testing.T) (mc, lc *daemon, path string) {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o755))
	path = filepath.Join(dir, "authfile")
	writeAuthFile(t, path, authFile)
	mc, lc = startPair(t, "-Y", path)
	return mc, lc, path
}

// authExchange sends each step on one connection to d and returns the replies and whether d closed it.
func authExchange(t testing.TB, d *daemon, steps []string) (string, bool) {
	t.Helper()
	rc := dialRaw(t, d)
	var all bytes.Buffer
	for _, step := range steps {
		rep := rc.exchange([]byte(step), wholeWrite, nil, authQuiet)
		all.Write(rep.data)
		if rep.closed {
			return all.String(), true
		}
	}
	return all.String(), false
}

// authDiff sends steps to memcached, then to leasecached, each of leasecached's steps waiting until it has
// as many bytes as memcached answered to it (bcExchange): the replies are not delimited, so only silence
// ends memcached's, and a password check on a loaded machine under -race can take longer than that.
func authDiff(t *testing.T, mc, lc *daemon, steps []string) (want, got string, wantClosed, gotClosed bool) {
	t.Helper()
	mr, wantClosed, err := bcExchange(mc, steps, nil)
	require.NoError(t, err)
	lens := make([]int, len(mr))
	for i, r := range mr {
		lens[i] = len(r)
	}
	lr, gotClosed, err := bcExchange(lc, steps, lens)
	require.NoError(t, err)
	return strings.Join(mr, ""), strings.Join(lr, ""), wantClosed, gotClosed
}

type authCase struct {
	name  string
	steps []string
}

func authCases() []authCase {
	good := "set a 0 0 7\r\nfoo bar\r\n"
	return []authCase{
		{"good", []string{good}},
		{"second user", []string{"set x 1 2 10\r\nbaaaz quux\r\n"}},
		{"bad password then good", []string{"set a 0 0 7\r\nfoo baz\r\n", good, "get k\r\n"}},
		{"unknown user", []string{"set a 0 0 7\r\nbar foo\r\n"}},
		{"commands before auth", []string{"get a\r\n", "set k 0 0 1\r\nv\r\n", "quit\r\n", "stats\r\n", "version\r\n", good}},
		{"noreply", []string{"set k 0 0 7 noreply\r\nfoo bar\r\n", "get k\r\n"}},
		{"bad flags and extra tokens", []string{"set a b c 7 x y z\r\nfoo bar\r\n"}},
		{"one token", []string{"set a 0 0 3\r\nfoo\r\n"}},
		{"three tokens", []string{"set a 0 0 11\r\nfoo bar baz\r\n"}},
		{"bad terminator", []string{"set a 0 0 7\r\nfoo barXX", good}},
		{"bare LF terminator", []string{"set a 0 0 7\r\nfoo bar\n\n"}},
		{"size not a number", []string{"set a 0 0 -1\r\n", "set a 0 0 5x\r\n"}},
		{"size wraps at 32 bits", []string{"set a 0 0 4294967303\r\nfoo bar\r\n"}},
		{"size 2^32-2", []string{"set a 0 0 4294967294\r\n"}},
		{"size 2^32-1", []string{"set a 0 0 4294967295\r\n", "f"}},
		{"data too long closes", []string{"set a 0 0 16383\r\n" + strings.Repeat("y", 16385)}},
		{"data at the buffer's size waits", []string{"set a 0 0 16383\r\n" + strings.Repeat("y", 16384)}},
		{"largest data", []string{"set a 0 0 16382\r\n" + strings.Repeat("y", 16382) + "\r\n"}},
		{"line too long closes", []string{strings.Repeat("x", 2049)}},
		{"line of 2048 waits", []string{strings.Repeat("x", 2048)}},
		{"long line that has ended", []string{strings.Repeat("x", 3000) + "\n"}},
		{"lone newline", []string{"\n", "\n"}},
		{"pipelined auth and commands", []string{good + "set k 0 0 1\r\nv\r\nget k\r\ndelete k\r\nquit\r\n"}},
		{"pipelined before auth", []string{"get a\r\nget b\r\n" + good + "get k\r\n"}},
		{"pipelined failure then command", []string{"set a 0 0 7\r\nfoo baz\r\nget k\r\n"}},
		{"pipelined 42 before auth", []string{strings.Repeat("get a\r\n", 42)}},
		{"pipelined answer then a long line", []string{"get a\r\n" + strings.Repeat("x", 3000)}},
		{"after auth", []string{good, "set k 0 0 2\r\nhi\r\n", "get k\r\n", "set k 0 0 7\r\nfoo bar\r\n", "get k\r\n"}},
	}
}

func TestDifferentialAuth(t *testing.T) {
	mc, lc, _ := startAuthPair(t)
	for i, tc := range authCases() {
		// The cases run at once: each has keys of its own.
		own := strings.NewReplacer(" k ", " k"+strconv.Itoa(i)+" ", " k\r\n", " k"+strconv.Itoa(i)+"\r\n")
		steps := make([]string, len(tc.steps))
		for j, s := range tc.steps {
			steps[j] = own.Replace(s)
		}
		t.Run(tc.name, func(t *testing.T) {
			parallelWaiting(t)
			want, got, wantClosed, gotClosed := authDiff(t, mc, lc, steps)
			assert.Equal(t, want, got, "replies")
			assert.Equal(t, wantClosed, gotClosed, "closed")
		})
	}
}

// TestDifferentialAuthStats: the counters after the same attempts, in memcached's place.
func TestDifferentialAuthStats(t *testing.T) {
	parallelWaiting(t)
	mc, lc, _ := startAuthPair(t)
	steps := []string{"set a 0 0 7\r\nfoo baz\r\n", "get a\r\n", "set a 0 0 3\r\nfoo\r\n", "set a 0 0 7\r\nfoo bar\r\n"}
	pick := func(d *daemon) string {
		authExchange(t, d, steps)
		out, _ := authExchange(t, d, append(steps[3:], "stats\r\n"))
		var keep []string
		for _, line := range strings.Split(out, "\r\n") {
			for _, name := range []string{"store_no_memory", "auth_cmds", "auth_errors"} {
				if strings.HasPrefix(line, "STAT "+name+" ") {
					keep = append(keep, line)
				}
			}
		}
		return strings.Join(keep, "\n")
	}
	want := pick(mc)
	assert.Equal(t, "STAT store_no_memory 0\nSTAT auth_cmds 3\nSTAT auth_errors 1", want)
	assert.Equal(t, want, pick(lc))
}

// TestDifferentialAuthReload: SIGHUP with a good file switches users, with a malformed one keeps the old
// table, and a connection that authenticated before stays authenticated.
func TestDifferentialAuthReload(t *testing.T) {
	parallelWaiting(t)
	mc, lc, path := startAuthPair(t)
	held := map[*daemon]*rawConn{}
	for _, d := range []*daemon{mc, lc} {
		rc := dialRaw(t, d)
		rep := rc.exchange([]byte("set a 0 0 7\r\nfoo bar\r\n"), wholeWrite, []byte("STORED\r\n"), defaultReplyTimeout)
		require.Equal(t, "STORED\r\n", string(rep.data), d.name)
		held[d] = rc
	}
	hup := func() {
		for _, d := range []*daemon{mc, lc} {
			require.NoError(t, d.cmd.Process.Signal(syscall.SIGHUP))
		}
	}
	// waitFor polls both until the attempt gets want (memcached reloads on its next clock tick).
	waitFor := func(attempt, want string) {
		for _, d := range []*daemon{mc, lc} {
			deadline := time.Now().Add(authReloadWait)
			var got string
			for time.Now().Before(deadline) {
				if got, _ = authExchange(t, d, []string{attempt}); got == want {
					break
				}
			}
			require.Equal(t, want, got, "%s after SIGHUP", d.name)
		}
	}
	writeAuthFile(t, path, "new:pw\n")
	hup()
	waitFor("set a 0 0 6\r\nnew pw\r\n", "STORED\r\n")
	for _, steps := range [][]string{{"set a 0 0 7\r\nfoo bar\r\n"}, {"set a 0 0 6\r\nnew pw\r\n"}} {
		want, got, _, _ := authDiff(t, mc, lc, steps)
		assert.Equal(t, want, got, "after the good file: %q", steps)
	}

	writeAuthFile(t, path, "new:pw\nbroken\n")
	hup()
	time.Sleep(1500 * time.Millisecond) // past memcached's clock tick: a reload that fails shows nothing
	for _, steps := range [][]string{{"set a 0 0 7\r\nfoo bar\r\n"}, {"set a 0 0 6\r\nnew pw\r\n"}} {
		want, got, _, _ := authDiff(t, mc, lc, steps)
		assert.Equal(t, want, got, "after the malformed file: %q", steps)
	}
	want, _ := authExchange(t, mc, []string{"set a 0 0 6\r\nnew pw\r\n"})
	assert.Equal(t, "STORED\r\n", want, "memcached kept the good table")

	for _, d := range []*daemon{mc, lc} {
		rep := held[d].exchange([]byte("get a\r\n"), wholeWrite, []byte("END\r\n"), defaultReplyTimeout)
		assert.Equal(t, "END\r\n", string(rep.data), "%s: authenticated before the reloads, still", d.name)
	}
}
