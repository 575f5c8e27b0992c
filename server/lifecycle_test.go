package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/panjf2000/gnet/v2"
	gerrors "github.com/panjf2000/gnet/v2/pkg/errors"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leasecached/leasecached/shard"
)

// startRun runs a server in-process and returns it once it accepts connections, with the channel Run's
// result arrives on. The server is stopped at the end of the test if it is still running.
func startRun(t *testing.T, cfg Config) (*Server, <-chan error) {
	t.Helper()
	// A port picked free can be taken by another process before the server binds it: pick again.
	for attempt := 1; ; attempt++ {
		s, result, err := tryRun(t, cfg)
		if err == nil {
			return s, result
		}
		if attempt == 5 || !strings.Contains(err.Error(), "address already in use") {
			t.Fatalf("Run ended before it was ready: %v", err)
		}
	}
}

// tryRun is one attempt of startRun, on ports picked anew: cfg.Port and the port of each TCP listener.
func tryRun(t *testing.T, cfg Config) (*Server, <-chan error, error) {
	t.Helper()
	store, err := shard.New(shard.Config{MemoryLimit: 16 << 20})
	require.NoError(t, err)
	cfg.Listen, cfg.Port = "127.0.0.1", freePort(t)
	cfg.Listeners = slices.Clone(cfg.Listeners)
	for i, l := range cfg.Listeners {
		if host, _, err := net.SplitHostPort(l.Addr); err == nil && l.Network == "tcp" {
			cfg.Listeners[i].Addr = net.JoinHostPort(host, strconv.Itoa(freePort(t)))
		}
	}
	cfg.MaxItemSize, cfg.MemoryLimit = 1<<20, 16<<20
	if cfg.Threads == 0 {
		cfg.Threads = 2
	}
	if cfg.ConnLimit == 0 {
		cfg.ConnLimit = 64
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := New(cfg, store)
	done := make(chan error, 1)
	go func() { done <- s.Run() }()
	select {
	case <-s.Ready():
	case err := <-done:
		store.Close()
		return nil, nil, err
	case <-time.After(10 * time.Second):
		t.Fatal("server not ready after 10s")
	}
	result := make(chan error, 1)
	finished := make(chan struct{})
	go func() {
		err := <-done
		result <- err
		close(finished)
	}()
	t.Cleanup(func() {
		select {
		case <-finished:
		default:
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = s.Stop(ctx)
			select {
			case <-finished:
			case <-time.After(10 * time.Second):
				t.Error("Run did not return within 10s of Stop")
			}
		}
		store.Close()
	})
	return s, result, nil
}

// An engine that stops without Stop having been called (gnet stops it when a loop fails; before the
// acceptor was patched, when accept ran out of descriptors) is an error, so the daemon exits non-zero; Run
// returned nil then, and the daemon exited 0.
func TestRunFailsWhenEngineStopsByItself(t *testing.T) {
	s, result := startRun(t, Config{})
	c, err := net.DialTimeout("tcp", net.JoinHostPort(s.cfg.Listen, strconv.Itoa(s.cfg.Port)), 5*time.Second)
	require.NoError(t, err)
	defer c.Close()
	var el gnet.EventLoop
	for deadline := time.Now().Add(5 * time.Second); el == nil && time.Now().Before(deadline); {
		s.loops.mu.Lock()
		for l := range s.loops.m {
			el = l
		}
		s.loops.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
	require.NotNil(t, el, "no event loop has a connection")
	// A loop that returns gnet's shutdown error ends the engine, as a failing loop or acceptor does.
	require.NoError(t, el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
		return gerrors.ErrEngineShutdown
	})))
	select {
	case err := <-result:
		require.Error(t, err, "Run returned nil although nobody called Stop")
		assert.Contains(t, err.Error(), "stopped without being asked to")
		assert.NotContains(t, err.Error(), "\n")
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of the engine stopping")
	}
}

// After Stop, Run returns nil: the daemon exits 0 after SIGINT or SIGTERM.
func TestRunReturnsNilAfterStop(t *testing.T) {
	s, result := startRun(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() { _ = s.Stop(ctx) }()
	select {
	case err := <-result:
		assert.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of Stop")
	}
}

// Every connection the server accepted is closed by Stop, also one accepted in the last moments: the
// acceptor hands a new connection to a loop through the loop's task queue, and a loop that stops first
// never opens it (the engine closes what is left in the queues: third_party/gnet/LEASECACHED.md, item 10).
//
// Each client sends a request before it reads: Linux may drop a handshake's last ACK when it arrives as
// the listener closes (the child socket cannot take the listener's port, counted in ListenDrops), with no
// reset, and the client then believes it is connected to nothing until it sends. The request gets it the
// reset; a connection the server left open takes the request and never answers.
func TestStopClosesConnectionsAcceptedDuringStop(t *testing.T) {
	for round := range 8 {
		s, _ := startRun(t, Config{Threads: 4})
		addr := net.JoinHostPort(s.cfg.Listen, strconv.Itoa(s.cfg.Port))
		const dialers = 16
		conns := make(chan net.Conn, dialers*8)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range dialers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 8 {
					c, err := net.DialTimeout("tcp", addr, time.Second)
					if err != nil {
						return // the listener is gone
					}
					conns <- c
					select {
					case <-stop:
						return
					default:
					}
				}
			}()
		}
		time.Sleep(time.Duration(round%5) * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
		require.NoError(t, s.Stop(ctx))
		cancel()
		close(stop)
		wg.Wait()
		close(conns)
		for c := range conns {
			require.NoError(t, c.SetDeadline(time.Now().Add(5*time.Second)))
			_, err := c.Write([]byte("version\r\n"))
			if err == nil {
				_, err = io.ReadAll(c)
			}
			c.Close()
			// A reset: in the backlog when the listener closed, or the dropped handshake above.
			if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
				require.NoError(t, err, "round %d: a connection outlived Stop", round)
			}
		}
	}
}

// Stop tells the store's data directory that the server is stopping (shard.Store.Stopping): a start on it
// meanwhile waits for it instead of being refused.
func TestStopMarksTheDataDir(t *testing.T) {
	dir := t.TempDir()
	store, err := shard.New(shard.Config{MemoryLimit: 16 << 20, DataDir: dir, ReclaimInterval: -1})
	require.NoError(t, err)
	defer store.Close()
	s := New(Config{Listen: "127.0.0.1", Port: freePort(t), Threads: 1, ConnLimit: 4, MaxItemSize: 1 << 20,
		Logger: slog.New(slog.DiscardHandler)}, store)
	lock, err := os.ReadFile(filepath.Join(dir, "lock"))
	require.NoError(t, err)
	require.Equal(t, strconv.Itoa(os.Getpid()), string(lock))
	_ = s.Stop(context.Background()) // not running: an error, but the mark is made all the same
	lock, err = os.ReadFile(filepath.Join(dir, "lock"))
	require.NoError(t, err)
	assert.Equal(t, strconv.Itoa(os.Getpid())+" stopping", string(lock))
}
