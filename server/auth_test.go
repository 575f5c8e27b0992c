package server

import (
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"github.com/leasecached/leasecached/auth"
	"github.com/leasecached/leasecached/shard"
)

// newAuthServer is a test server with -Y set to a file holding content.
func newAuthServer(t testing.TB, content string) (*Server, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pw")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	store, err := shard.New(shard.Config{MemoryLimit: 64 << 20, ReclaimInterval: -1})
	require.NoError(t, err)
	t.Cleanup(store.Close)
	s := New(Config{Listen: "127.0.0.1", Port: 1, Threads: 1, ConnLimit: 10, MaxItemSize: 1 << 20,
		MemoryLimit: 64 << 20, Logger: slog.New(slog.DiscardHandler), AuthFile: path}, store)
	require.NoError(t, s.authErr)
	return s, path
}

const (
	authOK    = "set a 0 0 7\r\nfoo bar\r\n"
	unauth    = "CLIENT_ERROR unauthenticated\r\n"
	authFail  = "CLIENT_ERROR authentication failure\r\n"
	badTerm   = "CLIENT_ERROR bad command line termination\r\n"
	badTokens = "CLIENT_ERROR bad authentication token format\r\n"
)

// TestAuthScripts: the engine's answers to each -Y exchange, as memcached 1.6.18 answers them (each read
// event is one piece; integration/auth_test.go compares with memcached itself).
func TestAuthScripts(t *testing.T) {
	cases := []struct {
		name   string
		pieces []string
		want   string
		close  bool
	}{
		{"good", []string{authOK}, "STORED\r\n", false},
		{"wrong password, connection kept", []string{"set a 0 0 7\r\nfoo baz\r\n", authOK}, authFail + "STORED\r\n", false},
		{"unknown user", []string{"set a 0 0 7\r\nbar foo\r\n"}, authFail, false},
		{"commands before auth", []string{"get a\r\n", "quit\r\n", "stats\r\n", "set k 0 0 1\r\nv\r\n"},
			unauth + unauth + unauth + badTokens, false},
		{"noreply is answered", []string{"set a 0 0 7 noreply\r\nfoo bar\r\n"}, "STORED\r\n", false},
		{"bad terminator, connection kept", []string{"set a 0 0 7\r\nfoo barXX", authOK}, badTerm + "STORED\r\n", false},
		{"one token", []string{"set a 0 0 3\r\nfoo\r\n"}, badTokens, false},
		{"pipelined auth and commands", []string{authOK + "set k 0 0 1\r\nv\r\nget k\r\n"},
			"STORED\r\nSTORED\r\nVALUE k 0 1\r\nv\r\nEND\r\n", false},
		{"pipelined auth and quit", []string{authOK + "quit\r\nget k\r\n"}, "STORED\r\n", true},
		{"attempt split across reads", []string{"se", "t a 0 0 7\r", "\nfoo", " bar\r", "\nget k\r\n"}, "STORED\r\nEND\r\n", false},
		{"a lone byte waits", []string{"\n"}, "", false},
		{"an answer replaces the unsent one", []string{"get a\r\nget b\r\n"}, unauth, false},
		{"... and a success replaces it too", []string{"set a 0 0 7\r\nfoo baz\r\n" + authOK + "get k\r\n"}, "STORED\r\nEND\r\n", false},
		{"21 answers are sent once", []string{strings.Repeat("get a\r\n", 21)}, unauth, false},
		{"41 twice", []string{strings.Repeat("get a\r\n", 41)}, unauth + unauth, false},
		{"42 three times", []string{strings.Repeat("get a\r\n", 42)}, unauth + unauth + unauth, false},
		{"line too long closes, dropping the unsent answer", []string{"get a\r\n" + strings.Repeat("x", 3000)}, "", true},
		{"line too long after a sent answer", []string{"get a\r\n", strings.Repeat("x", 3000)}, unauth, true},
		{"a long line that has ended", []string{strings.Repeat("x", 3000) + "\n"}, unauth, false},
		{"block too long closes", []string{"get a\r\nset a 0 0 16383\r\n" + strings.Repeat("y", 16385)}, unauth, true},
		{"block too long waits for more", []string{"set a 0 0 16383\r\n" + strings.Repeat("y", 16384)}, "", false},
		{"size 2^32-2 is a 0-byte block", []string{"set a 0 0 4294967294\r\n"}, badTerm, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newAuthServer(t, "foo:bar\nbaaaz:quux\n")
			cn, fc := newConn(s, nil), &fakeConn{}
			got, act := feed(cn, fc, tc.pieces...)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.close, act == Close, "closed")
		})
	}
}

func TestAuthStats(t *testing.T) {
	s, _ := newAuthServer(t, "foo:bar\n")
	cn, fc := newConn(s, nil), &fakeConn{}
	feed(cn, fc, "set a 0 0 7\r\nfoo baz\r\n", "get a\r\n", "set a 0 0 3\r\nfoo\r\n", authOK)
	fc.out.Reset()
	out, _ := feed(cn, fc, "stats\r\n")
	assert.Contains(t, out, "STAT store_no_memory 0\r\nSTAT auth_cmds 2\r\nSTAT auth_errors 1\r\nSTAT bytes_read ",
		"memcached's names, values and place: only checked attempts count")
}

func TestNoAuthFile(t *testing.T) {
	s := newTestServer(t)
	assert.Nil(t, s.auth)
	cn := newConn(s, nil)
	assert.Nil(t, cn.auth, "without -Y the engine's branch is never taken")
	got, _ := feed(cn, &fakeConn{}, "get a\r\n")
	assert.Equal(t, "END\r\n", got)
}

func TestAuthFileMissingFailsRun(t *testing.T) {
	store, err := shard.New(shard.Config{MemoryLimit: 64 << 20, ReclaimInterval: -1})
	require.NoError(t, err)
	t.Cleanup(store.Close)
	s := New(Config{Listen: "127.0.0.1", Port: 1, Threads: 1, ConnLimit: 10, Logger: slog.New(slog.DiscardHandler),
		AuthFile: filepath.Join(t.TempDir(), "none")}, store)
	assert.ErrorContains(t, s.Run(), "-Y: open")
}

// TestAuthReload: Reload switches to the new file, keeps the old one when the new one is malformed, and
// never touches a connection that has authenticated.
func TestAuthReload(t *testing.T) {
	s, path := newAuthServer(t, "foo:bar\n")
	in := newConn(s, nil)
	inFC := &fakeConn{}
	got, _ := feed(in, inFC, authOK)
	require.Equal(t, "STORED\r\n", got)

	require.NoError(t, os.WriteFile(path, []byte("new:pw\n"), 0o600))
	assert.Empty(t, s.Reload())
	try := func(attempt string) string {
		got, _ := feed(newConn(s, nil), &fakeConn{}, attempt)
		return got
	}
	assert.Equal(t, authFail, try(authOK), "foo is gone")
	assert.Equal(t, "STORED\r\n", try("set a 0 0 6\r\nnew pw\r\n"))

	require.NoError(t, os.WriteFile(path, []byte("new:pw\nbroken\n"), 0o600))
	errs := s.Reload()
	require.Len(t, errs, 1)
	assert.ErrorContains(t, errs[0], "-Y:")
	assert.Equal(t, "STORED\r\n", try("set a 0 0 6\r\nnew pw\r\n"), "the old table is kept")

	inFC.out.Reset()
	got, _ = feed(in, inFC, "get k\r\n")
	assert.Equal(t, "END\r\n", got, "an authenticated connection stays so")
}

// wakeConn is a fakeConn whose Wake, called by a checker goroutine, is seen by the test.
type wakeConn struct {
	*fakeConn
	woken chan struct{}
}

func (w *wakeConn) Wake(gnet.AsyncCallback) error {
	w.woken <- struct{}{}
	return nil
}

// TestAuthBcryptOffLoop: a bcrypt check does not run in serve: serve returns at once with the attempt
// left in the input, and the checker's wake has it served again with the answer and what followed.
func TestAuthBcryptOffLoop(t *testing.T) {
	h, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	require.NoError(t, err)
	s, _ := newAuthServer(t, "foo:"+string(h)+"\n")
	attempt := func(pass, then string) string {
		cn, wc := newConn(s, nil), &wakeConn{fakeConn: &fakeConn{}, woken: make(chan struct{}, 1)}
		wc.in.WriteString("set a 0 0 " + strconv.Itoa(4+len(pass)) + "\r\nfoo " + pass + "\r\n")
		require.Equal(t, Continue, cn.serve(wc))
		// serve handed the check to a checker goroutine rather than making it: the attempt is pending,
		// unanswered, and the connection is woken when it is done.
		require.NotNil(t, cn.auth.pending, "serve made the bcrypt check itself")
		assert.Empty(t, wc.out.String(), "no answer before the check is done")
		wc.in.WriteString(then) // arrives while the check runs: held
		assert.Equal(t, Continue, cn.serve(wc))
		return awaitAnswer(t, cn, wc)
	}
	assert.Equal(t, "STORED\r\nEND\r\n", attempt("s3cret", "get k\r\n"))
	assert.Equal(t, authFail, attempt("wrong", ""))
	// As memcached answers a failure and the request after it in one read: the second answer replaces it.
	got := attempt("wrong", "get k\r\n")
	assert.Equal(t, unauth, got)

	// A verified pair is answered in serve: no wake.
	cn, wc := newConn(s, nil), &wakeConn{fakeConn: &fakeConn{}, woken: make(chan struct{}, 1)}
	wc.in.WriteString("set a 0 0 10\r\nfoo s3cret\r\n")
	assert.Equal(t, Continue, cn.serve(wc))
	assert.Equal(t, "STORED\r\n", wc.out.String())
	assert.Empty(t, wc.woken)
}

// TestAuthPendingInputBounded: while a check runs, a client that sends more than authPendingInput is closed.
func TestAuthPendingInputBounded(t *testing.T) {
	h, err := bcrypt.GenerateFromPassword([]byte("s3cret"), 10)
	require.NoError(t, err)
	s, _ := newAuthServer(t, "foo:"+string(h)+"\n")
	cn, fc := newConn(s, nil), &fakeConn{}
	fc.in.WriteString("set a 0 0 9\r\nfoo wrong\r\n")
	require.Equal(t, Continue, cn.serve(fc))
	require.NotNil(t, cn.auth.pending)
	fc.in.WriteString(strings.Repeat("get k\r\n", authPendingInput/7+1))
	assert.Equal(t, Close, cn.serve(fc))
}

// authAttempt opens a connection as a transport would, sends it attempt and serves it once.
func authAttempt(t *testing.T, s *Server, attempt string) (*conn, *wakeConn) {
	t.Helper()
	cn, wc := newConn(s, nil), &wakeConn{fakeConn: &fakeConn{}, woken: make(chan struct{}, 1)}
	s.openConn(cn, wc, 0, "test", "test")
	wc.in.WriteString(attempt)
	require.Equal(t, Continue, cn.serve(wc))
	return cn, wc
}

// awaitAnswer waits for the check of cn's attempt, and serves it again with the answer.
func awaitAnswer(t *testing.T, cn *conn, wc *wakeConn) string {
	t.Helper()
	select {
	case <-wc.woken:
	case <-time.After(60 * time.Second):
		t.Fatal("the checker did not wake the connection")
	}
	require.Equal(t, Continue, cn.serve(wc))
	return wc.out.String()
}

// TestAuthClosedConnChecksSkipped: a client that connects, sends a wrong password and disconnects, again
// and again, leaves no checks behind: the next login waits for the checks that were running, not for one
// per round (the review's 300 rounds made a login wait 7.1 s).
func TestAuthClosedConnChecksSkipped(t *testing.T) {
	h, err := bcrypt.GenerateFromPassword([]byte("bar"), 8) // ~15 ms a check: far above the noise
	require.NoError(t, err)
	s, _ := newAuthServer(t, "foo:"+string(h)+"\n")
	login := func() time.Duration {
		start := time.Now()
		cn, wc := authAttempt(t, s, "set a 0 0 9\r\nfoo wrong\r\n")
		require.Equal(t, authFail, awaitAnswer(t, cn, wc))
		return time.Since(start)
	}
	one := time.Hour
	for range 3 {
		one = min(one, login())
	}
	const rounds = 300
	for range rounds {
		cn, wc := authAttempt(t, s, "set a 0 0 9\r\nfoo wrong\r\n")
		require.NotNil(t, cn.auth.pending)
		assert.Empty(t, wc.out.String())
		s.closeConn(cn, nil)
	}
	assert.LessOrEqual(t, s.auth.Checking(), auth.Checkers, "the abandoned checks have left the queue")
	// A real client's rounds take a network round trip each: every abandoned check is in the queue by then.
	time.Sleep(50 * time.Millisecond)
	took := login()
	// Without the closed connections' checks skipped, it waits for up to rounds/auth.Checkers (150) checks;
	// with them, for the two running at most, then its own (3). The bound sits between, far from both: a
	// loaded machine under the race detector has made one check's time vary threefold.
	assert.Less(t, took, 40*one, "a login after %d abandoned attempts took %v, a check %v", rounds, took, one)
	require.Eventually(t, func() bool { return s.auth.Checking() == 0 }, 60*time.Second, time.Millisecond)
}

// TestAuthChecksBounded: with auth.Checkers checks running and auth.MaxQueued waiting, an attempt is
// answered at once as a failure, and counted as one.
func TestAuthChecksBounded(t *testing.T) {
	const cost = 10 // ~60 ms a check: none ends while the queue fills
	h, err := bcrypt.GenerateFromPassword([]byte("bar"), cost)
	require.NoError(t, err)
	s, _ := newAuthServer(t, "foo:"+string(h)+"\n")
	limit := auth.Checkers + auth.MaxQueued(cost)
	var queued []*conn
	for range limit {
		cn, wc := authAttempt(t, s, "set a 0 0 9\r\nfoo wrong\r\n")
		require.NotNil(t, cn.auth.pending, "attempt %d of %d is checked", len(queued), limit)
		assert.Empty(t, wc.out.String())
		queued = append(queued, cn)
	}
	before := s.stats.get(statAuthErrors)
	for _, attempt := range []string{"set a 0 0 9\r\nfoo wrong\r\n", authOK, "set a 0 0 7\r\nbar foo\r\n"} {
		cn, wc := authAttempt(t, s, attempt)
		assert.Nil(t, cn.auth.pending)
		assert.Equal(t, authFail, wc.out.String(), "answered at once")
		assert.NotNil(t, cn.auth, "not authenticated")
	}
	assert.Equal(t, before+3, s.stats.get(statAuthErrors), "counted in auth_errors")
	for _, cn := range queued {
		s.closeConn(cn, nil)
	}
	require.Eventually(t, func() bool { return s.auth.Checking() == 0 }, 60*time.Second, time.Millisecond)
	cn, wc := authAttempt(t, s, authOK)
	assert.Equal(t, "STORED\r\n", awaitAnswer(t, cn, wc), "checked again once there is room")
}
