package main

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"

	"github.com/leasecached/leasecached/internal/logging"
	"github.com/leasecached/leasecached/internal/sdnotify"
	"github.com/leasecached/leasecached/server"
)

// fakeRlimit is RLIMIT_NOFILE as a test sets it up: setting the hard limit above hardCap fails, as it
// does without CAP_SYS_RESOURCE.
type fakeRlimit struct {
	soft, hard, hardCap uint64
	sets                int
}

func (f *fakeRlimit) ops() rlimitOps {
	return rlimitOps{
		get: func() (uint64, uint64, error) { return f.soft, f.hard, nil },
		set: func(soft, hard uint64) error {
			f.sets++
			if soft > hard || hard > f.hardCap {
				return syscall.EPERM
			}
			f.soft, f.hard = soft, hard
			return nil
		},
	}
}

// The descriptor limit is raised to fit -c as far as the process may raise it, and never lowered.
func TestFitFileLimit(t *testing.T) {
	cases := []struct {
		name                string
		soft, hard, hardCap uint64
		need                uint64
		wantSoft, wantHard  uint64
		wantErr             bool
		wantSets            int
	}{
		{"already enough", 4096, 4096, 4096, 1100, 4096, 4096, false, 0},
		{"soft raised to need", 1024, 65536, 65536, 1100, 1100, 65536, false, 1},
		{"hard raised too, as root", 1024, 1024, 1 << 20, 5000, 5000, 5000, false, 1},
		{"hard cannot be raised: soft up to hard", 256, 1024, 1024, 5000, 1024, 1024, true, 2},
		{"nothing can be raised", 1024, 1024, 1024, 5000, 1024, 1024, true, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeRlimit{soft: tc.soft, hard: tc.hard, hardCap: tc.hardCap}
			got, err := fitFileLimit(tc.need, f.ops())
			if tc.wantErr {
				require.Error(t, err)
				assert.ErrorIs(t, err, syscall.EPERM)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tc.wantSoft, got, "returned soft limit")
			assert.Equal(t, tc.wantSoft, f.soft, "soft limit")
			assert.Equal(t, tc.wantHard, f.hard, "hard limit")
			assert.Equal(t, tc.wantSets, f.sets, "setrlimit calls")
		})
	}
	_, err := fitFileLimit(10, rlimitOps{get: func() (uint64, uint64, error) { return 0, 0, errors.New("no") }})
	assert.Error(t, err)
}

func TestFdsNeeded(t *testing.T) {
	// -c plus the reserve, which grows with the event loops (an epoll and an eventfd each).
	assert.Equal(t, uint64(1024+fdReserveFixed+2*fdReservePerLoop), fdsNeeded(1024, 2))
	assert.Greater(t, fdsNeeded(1024, 8), fdsNeeded(1024, 2))
}

func TestParseIdleTimeout(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"0": 0, "1": time.Second, "60": time.Minute, "90s": 90 * time.Second, "5m": 5 * time.Minute,
		"0s": 0, "2147483647": (1<<31 - 1) * time.Second,
	} {
		got, err := parseIdleTimeout(in)
		if assert.NoError(t, err, in) {
			assert.Equal(t, want, got, in)
		}
	}
	for _, in := range []string{"", "-1", "-5s", "1.5s", "500ms", "abc", "2147483648", "1000000h", "1e3"} {
		_, err := parseIdleTimeout(in)
		assert.Error(t, err, in)
	}
}

// --idle-timeout reaches the configuration; a bad value is one line naming the flag.
func TestIdleTimeoutFlag(t *testing.T) {
	run := func(args ...string) (server.Config, error) {
		app := newApp()
		var got server.Config
		app.Action = func(c *cli.Context) error {
			var err error
			got, err = configFrom(c, 0)
			return err
		}
		err := app.Run(append([]string{"leasecached"}, args...))
		return got, err
	}
	cfg, err := run()
	require.NoError(t, err)
	assert.Zero(t, cfg.IdleTimeout, "off by default, as in memcached")
	cfg, err = run("--idle-timeout", "30")
	require.NoError(t, err)
	assert.Equal(t, 30*time.Second, cfg.IdleTimeout)
	cfg, err = run("--idle-timeout", "2m")
	require.NoError(t, err)
	assert.Equal(t, 2*time.Minute, cfg.IdleTimeout)
	_, err = run("--idle-timeout", "1.5s")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--idle-timeout")
	assert.NotContains(t, err.Error(), "\n")
}

// fakeServer is a runner whose Run ends when Stop is called (after stopTakes), or with runErr on its own.
type fakeServer struct {
	ready     chan struct{}
	stopped   chan struct{}
	fail      chan error
	stopTakes time.Duration
	reloads   atomic.Int32 // Reload calls
	reloadErr []error      // what Reload returns
}

func newFakeServer(stopTakes time.Duration) *fakeServer {
	f := &fakeServer{ready: make(chan struct{}), stopped: make(chan struct{}), fail: make(chan error, 1),
		stopTakes: stopTakes}
	close(f.ready)
	return f
}

func (f *fakeServer) Run() error {
	select {
	case <-f.stopped:
		time.Sleep(f.stopTakes)
		return nil
	case err := <-f.fail:
		return err
	}
}

func (f *fakeServer) Ready() <-chan struct{} { return f.ready }

func (f *fakeServer) Reload() []error {
	f.reloads.Add(1)
	return f.reloadErr
}

func (f *fakeServer) Stop(context.Context) error {
	close(f.stopped)
	return nil
}

// lifecycleRun runs runUntilStopped on f in the background with exit faked; the result arrives on the
// returned channel, the exit status (if exit was called) on the other.
type lifecycleRun struct {
	notifier *sdnotify.Notifier // runUntilStopped's, to notes
	notes    *notifySocket
	sigs     chan os.Signal
	result   chan [2]any // returned, err
	exited   chan int
	logLines *strings.Builder
	log      *lockedWriter // logLines, for reading while runUntilStopped may write
}

func startLifecycle(t *testing.T, f *fakeServer, timeout time.Duration) *lifecycleRun {
	t.Helper()
	return startLifecycleWith(t, f, timeout, nil)
}

// startLifecycleWith is startLifecycle telling n, or the run's notes socket when n is nil.
func startLifecycleWith(t *testing.T, f *fakeServer, timeout time.Duration, n *sdnotify.Notifier) *lifecycleRun {
	t.Helper()
	notes := listenNotify(t)
	if n == nil {
		n = sdnotify.New(notes.Name)
	}
	r := &lifecycleRun{notifier: n, notes: notes, sigs: make(chan os.Signal, 2), result: make(chan [2]any, 1), exited: make(chan int, 1),
		logLines: &strings.Builder{}}
	old := exit
	exit = func(code int) { r.exited <- code }
	t.Cleanup(func() { exit = old })
	r.log = &lockedWriter{w: r.logLines}
	logger := logging.New(r.log, logging.Text, logging.Level(0))
	go func() {
		returned, err := runUntilStopped(f, r.sigs, timeout, logger, r.notifier)
		r.result <- [2]any{returned, err}
	}()
	return r
}

type lockedWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}

func (r *lifecycleRun) wait(t *testing.T, within time.Duration) (bool, error) {
	t.Helper()
	select {
	case res := <-r.result:
		err, _ := res[1].(error)
		return res[0].(bool), err
	case <-time.After(within):
		t.Fatalf("runUntilStopped did not return within %v", within)
		return false, nil
	}
}

func TestRunUntilStopped(t *testing.T) {
	t.Run("signal: clean stop is nil", func(t *testing.T) {
		r := startLifecycle(t, newFakeServer(0), 5*time.Second)
		r.sigs <- syscall.SIGTERM
		returned, err := r.wait(t, 2*time.Second)
		assert.True(t, returned)
		assert.NoError(t, err)
	})
	t.Run("server ends by itself: its error", func(t *testing.T) {
		f := newFakeServer(0)
		r := startLifecycle(t, f, 5*time.Second)
		f.fail <- errors.New("engine stopped")
		returned, err := r.wait(t, 2*time.Second)
		assert.True(t, returned)
		assert.EqualError(t, err, "engine stopped")
	})
	t.Run("stop too slow: nil after the timeout, one log line", func(t *testing.T) {
		r := startLifecycle(t, newFakeServer(time.Hour), 200*time.Millisecond)
		r.sigs <- syscall.SIGINT
		start := time.Now()
		returned, err := r.wait(t, 2*time.Second)
		assert.False(t, returned, "Run has not returned")
		assert.NoError(t, err, "asked to stop: status 0")
		assert.Less(t, time.Since(start), time.Second)
		assert.Contains(t, r.logLines.String(), "after=200ms")
	})
	t.Run("SIGHUP reloads and does not stop", func(t *testing.T) {
		f := newFakeServer(0)
		f.reloadErr = []error{errors.New("-Y: bad line 3")}
		r := startLifecycle(t, f, 5*time.Second)
		for range 3 {
			r.sigs <- syscall.SIGHUP
		}
		require.Eventually(t, func() bool {
			return strings.Count(r.log.String(), "WARN reloaded, some files kept from before (see above) signal=SIGHUP kept=1") == 3
		},
			2*time.Second, time.Millisecond)
		select {
		case <-r.result:
			t.Fatal("runUntilStopped returned after SIGHUP")
		case <-f.stopped:
			t.Fatal("SIGHUP stopped the server")
		case <-time.After(50 * time.Millisecond):
		}
		r.sigs <- syscall.SIGTERM // and a stopping signal still stops it
		returned, err := r.wait(t, 2*time.Second)
		assert.True(t, returned)
		assert.NoError(t, err)
		assert.Equal(t, int32(3), f.reloads.Load())
	})
	t.Run("SIGHUP while stopping is not a second signal", func(t *testing.T) {
		f := newFakeServer(time.Hour)
		r := startLifecycle(t, f, 300*time.Millisecond)
		r.sigs <- syscall.SIGTERM
		time.Sleep(20 * time.Millisecond)
		r.sigs <- syscall.SIGHUP
		returned, err := r.wait(t, 2*time.Second)
		assert.False(t, returned)
		assert.NoError(t, err)
		select {
		case code := <-r.exited:
			t.Fatalf("SIGHUP while stopping exited with %d", code)
		default:
		}
		assert.Contains(t, r.logLines.String(), "after=300ms")
		assert.Zero(t, f.reloads.Load())
	})
	t.Run("second signal exits at once", func(t *testing.T) {
		r := startLifecycle(t, newFakeServer(time.Hour), time.Hour)
		r.sigs <- syscall.SIGTERM
		time.Sleep(50 * time.Millisecond)
		r.sigs <- syscall.SIGTERM
		select {
		case code := <-r.exited:
			assert.Equal(t, 128+int(syscall.SIGTERM), code)
		case <-time.After(2 * time.Second):
			t.Fatal("a second signal did not exit within 2s")
		}
		r.wait(t, 2*time.Second)
		assert.Contains(t, r.logLines.String(), "NOTICE stopping (a second signal exits at once) signal=SIGTERM")
		assert.Contains(t, r.logLines.String(), "NOTICE second signal: exiting at once signal=SIGTERM")
	})
}

// TestCloseStore: a stopping signal while the store closes (a data directory's opening, rebuild and last
// sync can take seconds) exits at once; SIGHUP does not; a close that ends returns.
func TestCloseStore(t *testing.T) {
	old := exit
	t.Cleanup(func() { exit = old })
	for _, tc := range []struct {
		name string
		sig  os.Signal // nil: none
		code int       // -1: no exit
	}{
		{"SIGTERM", syscall.SIGTERM, 128 + int(syscall.SIGTERM)},
		{"SIGINT", syscall.SIGINT, 128 + int(syscall.SIGINT)},
		{"SIGUSR1", syscall.SIGUSR1, 128 + int(syscall.SIGUSR1)},
		{"SIGHUP", syscall.SIGHUP, -1},
		{"none", nil, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exited := make(chan int, 1)
			exit = func(code int) { exited <- code }
			release, returned := make(chan struct{}), make(chan struct{})
			sigs := make(chan os.Signal, 1)
			var out strings.Builder
			go func() {
				defer close(returned)
				closeStore(func() { <-release }, true, sigs, logging.New(&out, logging.Text, logging.Level(0)))
			}()
			if tc.sig != nil {
				sigs <- tc.sig
			}
			if tc.code >= 0 {
				select {
				case code := <-exited:
					require.Equal(t, tc.code, code)
				case <-time.After(2 * time.Second):
					t.Fatal("no exit on a signal while the store closed")
				}
				<-returned
				require.Contains(t, out.String(), "second signal: exiting at once")
				close(release)
				return
			}
			select {
			case <-returned:
				t.Fatal("returned before the store closed")
			case code := <-exited:
				t.Fatalf("exited with %d", code)
			case <-time.After(100 * time.Millisecond):
			}
			close(release)
			select {
			case <-returned:
			case <-time.After(2 * time.Second):
				t.Fatal("did not return once the store closed")
			}
		})
	}
}
