package clientlib_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leasecached/leasecached/clientlib"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Loaded-client shape of TestLoadedClientKeepsConnections: rounds of more concurrent requests than the
// pool's open count. Between two rounds every connection is idle at once, the moment a pool that keeps
// fewer than it opened closes the rest.
const (
	loadGoroutines = 128
	loadRounds     = 50
)

// serverStat reads one counter of addr's "stats" through c.
func serverStat(t testing.TB, c *clientlib.Client, addr, name string) int {
	t.Helper()
	s, err := c.ServerStats(context.Background(), "")
	require.NoError(t, err)
	n, err := strconv.Atoi(s[addr][name])
	require.NoError(t, err, "stat %s = %q", name, s[addr][name])
	return n
}

// TestLoadedClientKeepsConnections: a client under more concurrent load than its open count dials at
// most that many connections (memcached's total_connections counts every accept), because every
// connection it opened is kept idle for the next request instead of being closed and dialled again.
func TestLoadedClientKeepsConnections(t *testing.T) {
	p := startMemcached(t)
	c := newClient(t, clientlib.Config{}, p.Addr)
	ctx := context.Background()
	before := serverStat(t, c, p.Addr, "total_connections")
	for range loadRounds {
		var wg sync.WaitGroup
		for g := range loadGoroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				key := "load:" + strconv.Itoa(g%16)
				_ = c.Set(ctx, &clientlib.Item{Key: key, Value: []byte("v")})
				_, _ = c.Get(ctx, key)
			}()
		}
		wg.Wait()
	}
	dials := serverStat(t, c, p.Addr, "total_connections") - before
	t.Logf("%d rounds of %d concurrent set+get: %d connections dialled (open count %d)", loadRounds, loadGoroutines,
		dials, defaultOpenPerAddr)
	require.LessOrEqual(t, dials, defaultOpenPerAddr, "connections dialled under load")
}

// fillBackends are the servers GetOrFill is checked against, one for each protocol it speaks:
// leasecached (leases), memcached 1.6 (meta commands), and memcached behind twemproxy (classic only).
var fillBackends = []struct {
	name  string
	start func(t testing.TB) string // the address clients use
}{
	{"leasecached", func(t testing.TB) string { return startLeasecached(t).Addr }},
	{"memcached", func(t testing.TB) string { return startMemcached(t).Addr }},
	{"twemproxy", func(t testing.TB) string { return startNutcracker(t, startMemcached(t)) }},
}

var errSourceDown = errors.New("source is down")

// failingFills are the ways a fill fails. A value over the client's MaxValueSize (failClientMax) is
// returned to its callers but cannot be cached.
const failClientMax = 1024

var failingFills = []struct {
	name    string
	opts    clientlib.FillOptions
	fill    clientlib.FillFunc
	wantErr error // nil: the value comes back, uncached
}{
	{"error", clientlib.FillOptions{}, func(context.Context, string) ([]byte, error) { return nil, errSourceDown }, errSourceDown},
	{"panic", clientlib.FillOptions{}, func(context.Context, string) ([]byte, error) { panic("fill bug") }, clientlib.ErrFillPanicked},
	{"timeout", clientlib.FillOptions{FillTimeout: 50 * time.Millisecond}, func(ctx context.Context, _ string) ([]byte, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}, context.DeadlineExceeded},
	{"too large", clientlib.FillOptions{}, func(context.Context, string) ([]byte, error) {
		return make([]byte, 4*failClientMax), nil
	}, nil},
	{"not found, not cached", clientlib.FillOptions{}, func(context.Context, string) ([]byte, error) {
		return nil, fmt.Errorf("user 7: %w", clientlib.ErrNotFound)
	}, clientlib.ErrNotFound},
}

// TestFailedFillGivesKeyBack: a fill that fails in any way gives the key back at once (leasecached:
// delete, which cancels the lease; memcached: md of the empty item mg N created), so that another
// process asking next is granted the key on its first request and fills, without a single hot-miss wait.
// Kept, the lease would make it wait out the lease window (2 s in these tests) or the empty item's TTL.
func TestFailedFillGivesKeyBack(t *testing.T) {
	for _, be := range fillBackends {
		t.Run(be.name, func(t *testing.T) {
			addr := be.start(t)
			for _, ff := range failingFills {
				t.Run(ff.name, func(t *testing.T) {
					failer := newClient(t, clientlib.Config{MaxValueSize: failClientMax}, addr)
					next := newClient(t, clientlib.Config{}, addr) // another process
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					defer cancel()
					key := "gives-back:" + strings.ReplaceAll(ff.name, " ", "-")
					opts := ff.opts
					v, err := failer.GetOrFill(ctx, key, ff.fill, &opts)
					if ff.wantErr != nil {
						require.ErrorIs(t, err, ff.wantErr)
					} else {
						require.NoError(t, err)
						require.Equal(t, clientlib.SourceFill, v.Source)
					}
					v, err = next.GetOrFill(ctx, key, func(context.Context, string) ([]byte, error) { return []byte("fresh"), nil },
						&clientlib.FillOptions{MaxWait: 10 * time.Second, Fallback: clientlib.FallbackError})
					require.NoError(t, err)
					require.Equal(t, "fresh", string(v.Data))
					require.Equal(t, clientlib.SourceFill, v.Source, "the next caller filled the key itself")
					require.Zero(t, next.Stats().HotMissWaits, "the next caller waited for a key nobody was filling")
				})
			}
		})
	}
}

// TestFailedFillKeepsStaleValue: giving a key back keeps its stale value for the next reader: on
// leasecached the delete leaves the stale value kept after the key's last delete (leases.md rule 4); on
// memcached the key won on an item marked stale is handed back with "md I", which keeps the item.
func TestFailedFillKeepsStaleValue(t *testing.T) {
	failing := func(context.Context, string) ([]byte, error) { return nil, errSourceDown }
	tests := []struct {
		name   string
		start  func(testing.TB) *proc
		stale  func(ctx context.Context, c *clientlib.Client, key string) error           // leaves "old" as the key's stale value
		reread func(ctx context.Context, c *clientlib.Client, key string) (string, error) // the next reader's view: the stale value it may refill from
	}{
		{"leasecached", startLeasecached,
			func(ctx context.Context, c *clientlib.Client, key string) error { return c.Delete(ctx, key) },
			func(ctx context.Context, c *clientlib.Client, key string) (string, error) {
				r, err := c.LeaseGet(ctx, key)
				if err != nil || r.Status != clientlib.LeaseGranted || r.Item == nil {
					return "", fmt.Errorf("lease-get = %+v, %v; want a grant with the stale value", r, err)
				}
				return string(r.Item.Value), nil
			}},
		{"memcached", startMemcached,
			func(ctx context.Context, c *clientlib.Client, key string) error {
				_, err := c.MetaDelete(ctx, key, clientlib.MetaFlags{}.Invalidate())
				return err
			},
			func(ctx context.Context, c *clientlib.Client, key string) (string, error) {
				r, err := c.MetaGet(ctx, key, clientlib.MetaFlags{}.ReturnValue())
				if err != nil || !r.Stale() || !r.Won() {
					return "", fmt.Errorf("mg = %+v, %v; want the stale item with the recache flag won", r, err)
				}
				return string(r.Value), nil
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			addr := tc.start(t).Addr
			c := newClient(t, clientlib.Config{}, addr)
			next := newClient(t, clientlib.Config{}, addr)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			require.NoError(t, c.Set(ctx, &clientlib.Item{Key: "k", Value: []byte("old")}))
			require.NoError(t, tc.stale(ctx, c, "k"))
			_, err := c.GetOrFill(ctx, "k", failing, nil)
			require.ErrorIs(t, err, errSourceDown)
			got, err := tc.reread(ctx, next, "k")
			require.NoError(t, err)
			require.Equal(t, "old", got)
		})
	}
}

// TestNegativeCache: with NegativeTTL, a fill's ErrNotFound is cached: every process gets ErrNotFound
// without calling its fill until the entry expires, then the fill runs again. Values that merely resemble
// the entry (the reserved flags with other bytes, the bytes with other flags) are values. Without
// NegativeTTL, "not found" is not cached.
func TestNegativeCache(t *testing.T) {
	for _, be := range fillBackends {
		t.Run(be.name, func(t *testing.T) {
			addr := be.start(t)
			a := newClient(t, clientlib.Config{}, addr)
			b := newClient(t, clientlib.Config{}, addr) // another process
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var fills atomic.Int64
			notFound := func(context.Context, string) ([]byte, error) {
				fills.Add(1)
				return nil, clientlib.ErrNotFound
			}
			// 2 s, not 1: an exptime of 1 set just before the server's clock ticks is over at once, before the
			// reads below.
			neg := &clientlib.FillOptions{NegativeTTL: 2 * time.Second}
			_, err := a.GetOrFill(ctx, "user:404", notFound, neg)
			require.ErrorIs(t, err, clientlib.ErrNotFound)
			for _, c := range []*clientlib.Client{a, b, a, b} {
				v, err := c.GetOrFill(ctx, "user:404", notFound, neg)
				require.ErrorIs(t, err, clientlib.ErrNotFound)
				require.Equal(t, clientlib.SourceCache, v.Source)
			}
			require.EqualValues(t, 1, fills.Load(), "fills while \"not found\" was cached")
			// Expiry: the fill runs again (polled: the entry lives one to two seconds on memcached's clock).
			deadline := time.Now().Add(10 * time.Second)
			for fills.Load() == 1 && time.Now().Before(deadline) {
				time.Sleep(100 * time.Millisecond)
				_, err := b.GetOrFill(ctx, "user:404", notFound, neg)
				require.ErrorIs(t, err, clientlib.ErrNotFound)
			}
			require.EqualValues(t, 2, fills.Load(), "the cached \"not found\" did not expire")

			// Without NegativeTTL every call asks the source.
			fills.Store(0)
			for range 3 {
				_, err := a.GetOrFill(ctx, "user:410", notFound, nil)
				require.ErrorIs(t, err, clientlib.ErrNotFound)
			}
			require.EqualValues(t, 3, fills.Load())

			// Look-alikes are values.
			for _, it := range []*clientlib.Item{
				{Key: "alike:flags", Value: []byte("not found"), Flags: 0xFFFFFFFF},
				{Key: "alike:empty", Value: []byte{}, Flags: 0xFFFFFFFF},
			} {
				require.NoError(t, a.Set(ctx, it))
				v, err := b.GetOrFill(ctx, it.Key, notFound, neg)
				require.NoError(t, err, "%s", it.Key)
				require.Equal(t, string(it.Value), string(v.Data))
			}
		})
	}
}

// The hung-server tests: hungCalls sequential calls for keys on a SIGSTOPped server, each with a deadline
// (hungDeadline) shorter than Config.Timeout (the default, 1 s), so that no caller ever sees the server's
// own timeout.
const (
	hungCalls    = 40
	hungDeadline = 800 * time.Millisecond
)

// sigstop stops p (it keeps accepting connections in the kernel's backlog, and answers nothing) and makes
// sure it is continued before the cleanup that kills it.
func sigstop(t *testing.T, p *proc) (cont func()) {
	t.Helper()
	require.NoError(t, p.d.Cmd.Process.Signal(syscall.SIGSTOP))
	var once sync.Once
	cont = func() { once.Do(func() { _ = p.d.Cmd.Process.Signal(syscall.SIGCONT) }) }
	t.Cleanup(cont)
	// The signal is delivered asynchronously: wait until the process is stopped (state T in
	// /proc/<pid>/stat), so that no request of the test is still answered.
	stat := "/proc/" + strconv.Itoa(p.d.Cmd.Process.Pid) + "/stat"
	waitUntil(t, 5*time.Second, func() bool {
		b, err := os.ReadFile(stat)
		if err != nil {
			return true // no procfs: the requests that follow may race the stop, which only helps the server
		}
		i := bytes.LastIndexByte(b, ')')
		return i >= 0 && i+2 < len(b) && b[i+2] == 'T'
	})
	return cont
}

// keysOn returns n keys that c maps to addr.
func keysOn(t *testing.T, c *clientlib.Client, addr string, n int) []string {
	t.Helper()
	var keys []string
	for i := 0; len(keys) < n && i < 100000; i++ {
		k := "hung:" + strconv.Itoa(i)
		if a, _ := c.ServerFor(k); a == addr {
			keys = append(keys, k)
		}
	}
	require.Len(t, keys, n)
	return keys
}

// TestHungServerGetOrFill: with one of two servers stopped, every GetOrFill answers within its caller's
// deadline (the fallback fill while the server is still in the ring, the other server once it is out),
// and the stopped server is ejected after FailureLimit requests left unanswered for Config.Timeout. When
// it runs again it is put back.
func TestHungServerGetOrFill(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			victim, other := be.start(t), be.start(t)
			c := newClient(t, clientlib.Config{RetryInterval: 200 * time.Millisecond}, victim.Addr, other.Addr)
			keys := keysOn(t, c, victim.Addr, hungCalls)
			fill := func(_ context.Context, key string) ([]byte, error) { return []byte("v:" + key), nil }
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			// Both servers answer first: what they speak is learned, connections are pooled.
			for _, k := range []string{keys[0], keysOn(t, c, other.Addr, 1)[0]} {
				_, err := c.GetOrFill(ctx, k, fill, nil)
				require.NoError(t, err)
			}
			cont := sigstop(t, victim)
			failed, sources := []string{}, map[clientlib.Source]int{}
			start := time.Now()
			for _, k := range keys {
				cctx, ccancel := context.WithTimeout(context.Background(), hungDeadline)
				v, err := c.GetOrFill(cctx, k, fill, nil)
				ccancel()
				if err != nil || string(v.Data) != "v:"+k {
					failed = append(failed, fmt.Sprintf("%s at %v: %q %v", k, time.Since(start), v.Data, err))
					continue
				}
				sources[v.Source]++
			}
			h := c.Stats().Servers[0]
			t.Logf("%d GetOrFill calls with a %v deadline against a stopped server: %d failed, sources %v, health %+v",
				hungCalls, hungDeadline, len(failed), sources, h)
			require.Empty(t, failed, "calls that got no value within their deadline")
			require.NotZero(t, sources[clientlib.SourceFallback], "no fallback while the stopped server was in the ring")
			require.True(t, h.Ejected, "stopped server still in the ring")
			require.GreaterOrEqual(t, h.Errors, uint64(clientlib.DefaultFailureLimit))
			cont()
			waitUntil(t, 10*time.Second, func() bool { return !c.Stats().Servers[0].Ejected })
		})
	}
}

// TestHungServerGet: plain Gets for keys on a stopped server fail with their callers' deadlines until
// the server is ejected, about Config.Timeout after it stopped; then the keys map to the other server
// and the Gets answer (a miss there).
func TestHungServerGet(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			victim, other := be.start(t), be.start(t)
			c := newClient(t, clientlib.Config{RetryInterval: time.Minute}, victim.Addr, other.Addr)
			keys := keysOn(t, c, victim.Addr, hungCalls)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for _, k := range keys[:4] { // pooled connections, as a running service has them
				require.NoError(t, c.Set(ctx, &clientlib.Item{Key: k, Value: []byte(k)}))
			}
			sigstop(t, victim)
			failed := 0
			for _, k := range keys {
				cctx, ccancel := context.WithTimeout(context.Background(), hungDeadline)
				_, err := c.Get(cctx, k)
				ccancel()
				if err != nil && !errors.Is(err, clientlib.ErrCacheMiss) {
					failed++
				}
			}
			h := c.Stats().Servers[0]
			t.Logf("%d Gets with a %v deadline against a stopped server: %d failed, health %+v", hungCalls, hungDeadline, failed, h)
			require.True(t, h.Ejected, "stopped server still in the ring")
			require.Less(t, failed, hungCalls/2, "Gets that failed: the server was not ejected early enough")
		})
	}
}

// TestDefaultMaxWaitOutlastsSlowFill: with default options, a process waiting for another's fill that
// takes longer than a second (the old MaxWait) keeps waiting and gets the cached value: MaxWait defaults
// to FillTimeout plus the cache write's bound. (leasecached runs with a 2 s lease window in these tests,
// longer than the fill.)
func TestDefaultMaxWaitOutlastsSlowFill(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			addr := be.start(t).Addr
			holder, waiter := newClient(t, clientlib.Config{}, addr), newClient(t, clientlib.Config{}, addr)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			filling := make(chan struct{})
			slow := func(context.Context, string) ([]byte, error) {
				close(filling)
				time.Sleep(1500 * time.Millisecond)
				return []byte("slow value"), nil
			}
			done := make(chan error, 1)
			go func() { _, err := holder.GetOrFill(ctx, "slow", slow, nil); done <- err }()
			<-filling
			v, err := waiter.GetOrFill(ctx, "slow", func(context.Context, string) ([]byte, error) {
				return nil, errors.New("the waiter filled")
			}, &clientlib.FillOptions{Fallback: clientlib.FallbackError})
			require.NoError(t, err)
			require.Equal(t, "slow value", string(v.Data))
			require.Equal(t, clientlib.SourceCache, v.Source)
			require.NoError(t, <-done)
		})
	}
}

// logLines collects what a client passes to Config.Logf.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logLines) count(substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.lines {
		if strings.Contains(s, substr) {
			n++
		}
	}
	return n
}

// TestLeaseWindowWarning: the client reads leasecached's lease window (2 s in these tests) once and warns
// once, through Config.Logf, when FillTimeout exceeds it (the default, 5 s, does); with a FillTimeout
// inside the window, and against memcached, it does not.
func TestLeaseWindowWarning(t *testing.T) {
	fill := func(context.Context, string) ([]byte, error) { return []byte("v"), nil }
	tests := []struct {
		name  string
		start func(testing.TB) *proc
		fill  clientlib.FillOptions
		warns int
	}{
		{"leasecached, default FillTimeout", startLeasecached, clientlib.FillOptions{}, 1},
		{"leasecached, FillTimeout inside the window", startLeasecached, clientlib.FillOptions{FillTimeout: time.Second}, 0},
		{"memcached", startMemcached, clientlib.FillOptions{}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			addr := tc.start(t).Addr
			var log logLines
			c := newClient(t, clientlib.Config{Fill: tc.fill, Logf: log.logf}, addr)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for i := range 5 {
				_, err := c.GetOrFill(ctx, "w:"+strconv.Itoa(i), fill, nil)
				require.NoError(t, err)
			}
			require.Equal(t, tc.warns, log.count("exceeds the lease window"), "warnings in %q", log.lines)
			require.Equal(t, 1, log.count(addr+" speaks"), "capability notices in %q", log.lines)
		})
	}
}

// TestCloseWaitsForBackgroundRefresh: a StaleWhileRefresh caller gets the stale value at once while the
// refresh runs in the background; Close returns only once that refresh has filled and written the key.
func TestCloseWaitsForBackgroundRefresh(t *testing.T) {
	tests := []struct {
		name  string
		start func(testing.TB) *proc
		stale func(ctx context.Context, c *clientlib.Client, key string) error
	}{
		{"leasecached", startLeasecached, func(ctx context.Context, c *clientlib.Client, key string) error { return c.Delete(ctx, key) }},
		{"memcached", startMemcached, func(ctx context.Context, c *clientlib.Client, key string) error {
			_, err := c.MetaDelete(ctx, key, clientlib.MetaFlags{}.Invalidate())
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			addr := tc.start(t).Addr
			reader := newClient(t, clientlib.Config{}, addr)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			require.NoError(t, reader.Set(ctx, &clientlib.Item{Key: "page", Value: []byte("old")}))
			require.NoError(t, tc.stale(ctx, reader, "page"))
			c, err := clientlib.New(clientlib.Config{Servers: []clientlib.Server{{Addr: addr}}})
			require.NoError(t, err)
			var refreshed atomic.Bool
			v, err := c.GetOrFill(ctx, "page", func(context.Context, string) ([]byte, error) {
				time.Sleep(300 * time.Millisecond)
				refreshed.Store(true)
				return []byte("new"), nil
			}, &clientlib.FillOptions{StaleWhileRefresh: true})
			require.NoError(t, err)
			require.Equal(t, clientlib.SourceStale, v.Source)
			require.Equal(t, "old", string(v.Data))
			require.NoError(t, c.Close())
			require.True(t, refreshed.Load(), "Close returned before the background refresh finished")
			it, err := reader.Get(ctx, "page")
			require.NoError(t, err, "the refresh's value was not written before Close returned")
			require.Equal(t, "new", string(it.Value))
		})
	}
}

// TestGetOrFillThroughTwemproxy: twemproxy closes the connection on lease-get and on meta commands. The
// client learns once that the proxy speaks only the classic commands, uses gets, fill and set (still one
// fill per key in the process), and never counts the proxy's refusals as failures: nothing is ejected,
// LeaseGet says ErrLeasesUnsupported without sending lease-get, and Get/Set keep working.
func TestGetOrFillThroughTwemproxy(t *testing.T) {
	proxy := startNutcracker(t, startMemcached(t), startMemcached(t))
	var log logLines
	c := newClient(t, clientlib.Config{Logf: log.logf}, proxy)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var fills atomic.Int64
	fill := func(_ context.Context, key string) ([]byte, error) {
		fills.Add(1)
		time.Sleep(50 * time.Millisecond)
		return []byte("v:" + key), nil
	}
	var wg sync.WaitGroup
	for g := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				key := "tw:" + strconv.Itoa((g+i)%5)
				v, err := c.GetOrFill(ctx, key, fill, nil)
				assert.NoError(t, err)
				assert.Equal(t, "v:"+key, string(v.Data))
			}
		}()
	}
	wg.Wait()
	require.EqualValues(t, 5, fills.Load(), "fills for 5 keys")
	_, err := c.LeaseGet(ctx, "tw:0")
	require.ErrorIs(t, err, clientlib.ErrLeasesUnsupported)
	require.NoError(t, c.Set(ctx, &clientlib.Item{Key: "plain", Value: []byte("x")}))
	it, err := c.Get(ctx, "plain")
	require.NoError(t, err)
	require.Equal(t, "x", string(it.Value))
	h := c.Stats().Servers[0]
	require.Zero(t, h.Errors, "the proxy's refusals counted as failures: %+v", h)
	require.False(t, h.Ejected)
	require.Equal(t, 1, log.count("speaks classic commands only"), "capability notices in %q", log.lines)
}

// TestGetOrFillHitIsOneRequest: against memcached a GetOrFill hit is one request, mg, not a refused
// lease-get followed by gets: the bytes memcached reads per call are those of one request line carrying
// the key once.
func TestGetOrFillHitIsOneRequest(t *testing.T) {
	p := startMemcached(t)
	c := newClient(t, clientlib.Config{}, p.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	key := strings.Repeat("k", 200)
	fill := func(context.Context, string) ([]byte, error) { return []byte("v"), nil }
	_, err := c.GetOrFill(ctx, key, fill, nil)
	require.NoError(t, err)
	const calls = 50
	read0, gets0 := serverStat(t, c, p.Addr, "bytes_read"), serverStat(t, c, p.Addr, "cmd_get")
	for range calls {
		v, err := c.GetOrFill(ctx, key, fill, nil)
		require.NoError(t, err)
		require.Equal(t, clientlib.SourceCache, v.Source)
	}
	statsLine := len("stats\r\n")
	perCall := float64(serverStat(t, c, p.Addr, "bytes_read")-read0-statsLine) / calls
	gets := serverStat(t, c, p.Addr, "cmd_get") - gets0
	t.Logf("%d GetOrFill hits: %.1f bytes read by memcached per call (key %d bytes), %d gets", calls, perCall, len(key), gets)
	require.Equal(t, calls, gets, "gets per call")
	require.LessOrEqual(t, perCall, float64(len(key)+32), "more than one request line per call")
}

// TestCloseLeavesNoGoroutines: after Close, the client's goroutines are gone: flights, background
// refreshes, capability probes, the drains of requests to a stopped server and its revival prober.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	lc, mc, hung := startLeasecached(t), startMemcached(t), startMemcached(t)
	baseline := runtime.NumGoroutine()
	c, err := clientlib.New(clientlib.Config{Servers: []clientlib.Server{{Addr: lc.Addr}, {Addr: mc.Addr}, {Addr: hung.Addr}},
		RetryInterval: 50 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fill := func(context.Context, string) ([]byte, error) { return []byte("v"), nil }
	for i := range 30 {
		_, err := c.GetOrFill(ctx, "g:"+strconv.Itoa(i), fill, &clientlib.FillOptions{StaleWhileRefresh: true})
		require.NoError(t, err)
	}
	hungKeys := keysOn(t, c, hung.Addr, 8)
	sigstop(t, hung)
	for _, k := range hungKeys[:5] {
		cctx, ccancel := context.WithTimeout(ctx, 100*time.Millisecond)
		_, _ = c.GetOrFill(cctx, k, fill, nil)
		ccancel()
	}
	// Ejected: its prober runs. Its keys now live on the other servers.
	waitUntil(t, 5*time.Second, func() bool { return c.Stats().Servers[2].Ejected })
	for _, k := range hungKeys[5:] {
		_, err := c.GetOrFill(ctx, k, fill, nil)
		require.NoError(t, err)
	}
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return within 10 s")
	}
	waitUntil(t, 5*time.Second, func() bool { return runtime.NumGoroutine() <= baseline })
}
