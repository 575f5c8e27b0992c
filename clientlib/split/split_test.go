package split

import (
	"bytes"
	"context"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasecached/leasecached/clientlib"
	"github.com/leasecached/leasecached/internal/testdaemon"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// value reads one copy's value straight through the core client ("" on a miss).
func value(t *testing.T, c *clientlib.Client, name string) string {
	t.Helper()
	it, err := c.Get(context.Background(), name)
	if errors.Is(err, clientlib.ErrCacheMiss) {
		return ""
	}
	require.NoError(t, err, name)
	return string(it.Value)
}

// TestWritesReachEveryCopy: Set, Touch and Delete through the split client reach every copy, on
// distinct servers, for N = 2..4 over 4 leasecached servers; keys not split pass through.
func TestWritesReachEveryCopy(t *testing.T) {
	_, servers := startFleet(t, 4)
	ctx := context.Background()
	for copies := 2; copies <= 4; copies++ {
		t.Run(strconv.Itoa(copies)+" copies", func(t *testing.T) {
			c := newClient(t, clientlib.Config{Servers: servers, Distribution: clientlib.Ketama})
			key := "hot:" + strconv.Itoa(copies)
			s := newSplit(t, c, Config{Keys: []string{key}, Copies: copies})
			names := s.Copies(key)
			require.Len(t, names, copies)

			require.NoError(t, s.Set(ctx, &clientlib.Item{Key: key, Value: []byte("v1"), Flags: 7, TTL: time.Minute}))
			for _, n := range names {
				assert.Equal(t, "v1", value(t, c, n), "copy %s", n)
			}
			for i := 0; i < 20; i++ {
				it, err := s.Get(ctx, key)
				require.NoError(t, err)
				assert.Equal(t, key, it.Key)
				assert.Equal(t, "v1", string(it.Value))
				assert.Equal(t, uint32(7), it.Flags)
			}
			require.NoError(t, s.Set(ctx, &clientlib.Item{Key: key, Value: []byte("v2"), TTL: time.Minute}))
			for _, n := range names {
				assert.Equal(t, "v2", value(t, c, n), "copy %s after the second write", n)
			}
			require.NoError(t, s.Touch(ctx, key, time.Hour))
			require.NoError(t, s.Delete(ctx, key))
			for _, n := range names {
				assert.Equal(t, "", value(t, c, n), "copy %s after delete", n)
			}
			require.ErrorIs(t, s.Delete(ctx, key), clientlib.ErrCacheMiss, "no copy left")
			require.ErrorIs(t, s.Touch(ctx, key, time.Hour), clientlib.ErrCacheMiss)
			_, err := s.Get(ctx, key)
			require.ErrorIs(t, err, clientlib.ErrCacheMiss)

			// Not split: one key, straight through.
			require.NoError(t, s.Set(ctx, &clientlib.Item{Key: "plain", Value: []byte("p")}))
			assert.Equal(t, "p", value(t, c, "plain"))
			assert.Equal(t, "", value(t, c, "plain"+Suffix+"1"))
		})
	}
}

// TestReplicaMissFallsBack: a replica that misses (evicted, expired, or never written because the
// writer did not split the key) is answered by the key itself, with its current value, and gets that
// value back for ReplicaTTL, so later reads of it hit.
func TestReplicaMissFallsBack(t *testing.T) {
	_, servers := startFleet(t, 3)
	ctx := context.Background()
	c := newClient(t, clientlib.Config{Servers: servers, Distribution: clientlib.Ketama})
	s := newSplit(t, c, Config{Keys: []string{"k"}})
	names := s.Copies("k")
	require.Len(t, names, 3)
	// A writer that does not split: only the key itself.
	require.NoError(t, c.Set(ctx, &clientlib.Item{Key: "k", Value: []byte("only-base")}))
	for i := 0; i < 60; i++ {
		it, err := s.Get(ctx, "k")
		require.NoError(t, err)
		require.Equal(t, "only-base", string(it.Value))
	}
	st := s.Stats()
	assert.Positive(t, st.ReplicaReads)
	assert.Equal(t, int64(2), st.Fallbacks, "one miss per replica, then it holds the value")
	assert.Equal(t, int64(2), st.Copied)
	for _, n := range names {
		assert.Equal(t, "only-base", value(t, c, n))
	}
}

// TestSplitRefusals: CAS and incr/decr of a split key are refused; of other keys they work.
func TestSplitRefusals(t *testing.T) {
	_, servers := startFleet(t, 2)
	ctx := context.Background()
	c := newClient(t, clientlib.Config{Servers: servers})
	s := newSplit(t, c, Config{Keys: []string{"k"}, Copies: 2})
	require.NoError(t, s.Set(ctx, &clientlib.Item{Key: "k", Value: []byte("1")}))
	require.NoError(t, s.Set(ctx, &clientlib.Item{Key: "n", Value: []byte("1")}))
	_, err := s.Increment(ctx, "k", 1)
	require.ErrorIs(t, err, ErrSplitKey)
	_, err = s.Decrement(ctx, "k", 1)
	require.ErrorIs(t, err, ErrSplitKey)
	require.ErrorIs(t, s.CompareAndSwap(ctx, &clientlib.Item{Key: "k", Value: []byte("2"), CAS: 1}), ErrSplitKey)
	n, err := s.Increment(ctx, "n", 2)
	require.NoError(t, err)
	assert.Equal(t, uint64(3), n)
	it, err := c.Get(ctx, "n")
	require.NoError(t, err)
	it.Value = []byte("9")
	require.NoError(t, s.CompareAndSwap(ctx, it))
}

// TestFailedWriteOfOneCopy: a Set while one replica's server cannot be reached fails for that copy
// alone: the error names it, the other copies hold the new value. What the failed copy holds then
// depends on the failure:
//   - partition (the request is lost): the copy keeps the old value and serves it to the reads that
//     pick it until its TTL (ReplicaTTL) ends; then they fall back to the key itself;
//   - hung server (SIGSTOP, the request waits in its socket): the write is carried out when the server
//     resumes, although the client reported it failed.
func TestFailedWriteOfOneCopy(t *testing.T) {
	const replicaTTL = 3 * time.Second // an item lives 2-3 s: whole-second expiry
	for _, tc := range []struct {
		name      string
		stale     bool // the failed copy keeps the old value
		fail, end func(t *testing.T, d *testdaemon.Daemon, p *proxy)
	}{
		{"partition", true,
			func(t *testing.T, _ *testdaemon.Daemon, p *proxy) { p.setCut(true) },
			func(t *testing.T, _ *testdaemon.Daemon, p *proxy) { p.setCut(false) }},
		{"hung server", false,
			func(t *testing.T, d *testdaemon.Daemon, _ *proxy) {
				require.NoError(t, d.Cmd.Process.Signal(syscall.SIGSTOP))
				// The signal is delivered asynchronously: wait until the process is stopped.
				stat := "/proc/" + strconv.Itoa(d.Cmd.Process.Pid) + "/stat"
				require.Eventually(t, func() bool {
					b, err := os.ReadFile(stat)
					f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
					return err == nil && len(f) > 0 && f[0] == "T"
				}, 2*time.Second, time.Millisecond)
			},
			func(t *testing.T, d *testdaemon.Daemon, _ *proxy) {
				require.NoError(t, d.Cmd.Process.Signal(syscall.SIGCONT))
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds, _ := startFleet(t, 3)
			ctx := context.Background()
			proxies := make([]*proxy, len(ds))
			var servers []clientlib.Server
			for i, d := range ds {
				proxies[i] = startProxy(t, d.Addr)
				servers = append(servers, clientlib.Server{Addr: proxies[i].addr()})
			}
			c := newClient(t, clientlib.Config{Servers: servers, Distribution: clientlib.Ketama,
				Timeout: 300 * time.Millisecond, FailureLimit: 100})
			s := newSplit(t, c, Config{Keys: []string{"k"}, ReplicaTTL: replicaTTL})
			names := s.Copies("k")
			require.Len(t, names, 3)
			require.NoError(t, s.Set(ctx, &clientlib.Item{Key: "k", Value: []byte("old")}))
			written := time.Now()

			addr, err := c.ServerFor(names[1])
			require.NoError(t, err)
			bad := slices.IndexFunc(proxies, func(p *proxy) bool { return p.addr() == addr })
			tc.fail(t, ds[bad], proxies[bad])
			err = s.Set(ctx, &clientlib.Item{Key: "k", Value: []byte("new")})
			tc.end(t, ds[bad], proxies[bad])
			require.Error(t, err)
			assert.Contains(t, err.Error(), names[1], "the error names the copy that failed")
			assert.NotContains(t, err.Error(), names[2])
			assert.Equal(t, int64(1), s.Stats().FailedCopies)
			assert.Equal(t, "new", value(t, c, names[0]))
			assert.Equal(t, "new", value(t, c, names[2]))

			var got string
			require.Eventually(t, func() bool {
				it, err := c.Get(ctx, names[1])
				if err == nil {
					got = string(it.Value)
				}
				return err == nil || errors.Is(err, clientlib.ErrCacheMiss)
			}, 2*time.Second, 20*time.Millisecond, "the server answers again")
			if !tc.stale {
				assert.Equal(t, "new", got, "the hung server carried the write out when it resumed")
				return
			}
			assert.Equal(t, "old", got, "a replica whose write was lost keeps its old value")
			require.Eventually(t, func() bool { return value(t, c, names[1]) != "old" }, replicaTTL+1500*time.Millisecond,
				50*time.Millisecond, "the stale copy outlived ReplicaTTL")
			t.Logf("stale copy served for %v after the old write (ReplicaTTL %v)", time.Since(written).Round(100*time.Millisecond), replicaTTL)
			for i := 0; i < 30; i++ {
				it, err := s.Get(ctx, "k")
				require.NoError(t, err)
				require.Equal(t, "new", string(it.Value))
			}
		})
	}
}

// TestCopiesSurviveEjection: a server ejected by this process does not rename any copy (placement is
// over the configured list), so this process keeps writing the names other processes read.
func TestCopiesSurviveEjection(t *testing.T) {
	ds, servers := startFleet(t, 3)
	ctx := context.Background()
	c := newClient(t, clientlib.Config{Servers: servers, Distribution: clientlib.Modulo,
		Timeout: 200 * time.Millisecond, FailureLimit: 1, RetryInterval: time.Hour})
	keys := []string{"a", "b", "c", "d", "e", "f"}
	s := newSplit(t, c, Config{Keys: keys})
	before := map[string][]string{}
	for _, k := range keys {
		before[k] = s.Copies(k)
	}
	require.NoError(t, ds[2].Kill(5*time.Second))
	require.Eventually(t, func() bool {
		for _, k := range keys {
			_ = s.Set(ctx, &clientlib.Item{Key: k, Value: []byte("v")})
		}
		return c.Stats().Servers[2].Ejected
	}, 5*time.Second, 10*time.Millisecond)
	for _, k := range keys {
		require.NoError(t, s.Set(ctx, &clientlib.Item{Key: k, Value: []byte("v")}), "with the dead server ejected")
	}
	for _, k := range keys {
		assert.Equal(t, before[k], s.Copies(k), "copies of %s renamed after an ejection", k)
		it, err := s.Get(ctx, k)
		require.NoError(t, err)
		assert.Equal(t, "v", string(it.Value))
	}
}
