package near

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasecached/leasecached/clientlib"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const longTTL = time.Hour // so that only the watch stream can drop a copy

// makeHot reads key through nc until it is copied (bounded: the watcher has to connect first).
func makeHot(t *testing.T, nc *Cache, key string) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < 2000; i++ {
		_, err := nc.Get(ctx, key)
		require.NoError(t, err)
		if _, ok := nc.store.get(key, time.Now(), false); ok {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("%s never copied", key)
}

// copied reports whether nc holds a fresh copy of key, made by Get or by GetOrFill.
func copied(nc *Cache, key string) bool {
	_, byGet := nc.store.get(key, time.Now(), false)
	_, byFill := nc.store.get(key, time.Now(), true)
	return byGet || byFill
}

func set(t *testing.T, c *clientlib.Client, key, value string) {
	t.Helper()
	require.NoError(t, c.Set(context.Background(), &clientlib.Item{Key: key, Value: []byte(value)}))
}

func TestInvalidationFromAnotherClient(t *testing.T) {
	d := startLeasecached(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		write func(c *clientlib.Client)
		want  string // "" for a miss
	}{
		{"set", func(c *clientlib.Client) { set(t, c, "k", "new") }, "new"},
		{"refused add still invalidates", func(c *clientlib.Client) {
			require.ErrorIs(t, c.Add(ctx, &clientlib.Item{Key: "k", Value: []byte("x")}), clientlib.ErrNotStored)
		}, "old"},
		{"delete", func(c *clientlib.Client) { require.NoError(t, c.Delete(ctx, "k")) }, ""},
		{"flush_all", func(c *clientlib.Client) { require.NoError(t, c.FlushAll(ctx)) }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			writer := newClient(t, d.Addr)
			nc := newNear(t, newClient(t, d.Addr), Config{TTL: longTTL, HotReads: 2, HotKeysPoll: -1})
			set(t, writer, "k", "old")
			makeHot(t, nc, "k")
			waitState(t, nc.watchers[d.Addr], stateFull)
			tc.write(writer)
			require.Eventually(t, func() bool { return !copied(nc, "k") }, 5*time.Second, time.Millisecond,
				"the watch line drops the copy")
			it, err := nc.Get(ctx, "k")
			if tc.want == "" {
				require.ErrorIs(t, err, clientlib.ErrCacheMiss)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(it.Value))
		})
	}
}

func TestWriteThroughInvalidatesAtOnce(t *testing.T) {
	d := startLeasecached(t)
	nc := newNear(t, newClient(t, d.Addr), Config{TTL: longTTL, HotReads: 2, HotKeysPoll: -1})
	ctx := context.Background()
	require.NoError(t, nc.Set(ctx, &clientlib.Item{Key: "k", Value: []byte("v0")}))
	makeHot(t, nc, "k")
	for i := 1; i <= 20; i++ {
		v := "v" + strconv.Itoa(i)
		require.NoError(t, nc.Set(ctx, &clientlib.Item{Key: "k", Value: []byte(v)}))
		it, err := nc.Get(ctx, "k")
		require.NoError(t, err)
		require.Equal(t, v, string(it.Value), "a read after Set returns sees the write")
	}
	require.NoError(t, nc.Delete(ctx, "k"))
	_, err := nc.Get(ctx, "k")
	require.ErrorIs(t, err, clientlib.ErrCacheMiss)
}

func TestStreamLossFlushesAndReconnects(t *testing.T) {
	d := startLeasecached(t)
	ctx := context.Background()
	writer := newClient(t, d.Addr)
	nc := newNear(t, newClient(t, d.Addr), Config{TTL: longTTL, HotReads: 2, HotKeysPoll: -1})
	set(t, writer, "k", "v1")
	makeHot(t, nc, "k")

	require.NoError(t, d.Kill(5*time.Second))
	require.Eventually(t, func() bool { return !copied(nc, "k") }, 5*time.Second, time.Millisecond,
		"a lost stream flushes")
	d2 := startDaemon(t, "leasecached", leasecachedBin(t), leasecachedArgs, d.Port)
	require.Eventually(t, func() bool { return writer.Set(ctx, &clientlib.Item{Key: "k", Value: []byte("v2")}) == nil },
		10*time.Second, 10*time.Millisecond)
	waitState(t, nc.watchers[d2.Addr], stateFull)
	require.Eventually(t, func() bool {
		it, err := nc.Get(ctx, "k")
		return err == nil && string(it.Value) == "v2" && copied(nc, "k")
	}, 10*time.Second, time.Millisecond, "copied again from the restarted server")
	set(t, writer, "k", "v3")
	require.Eventually(t, func() bool { return !copied(nc, "k") }, 5*time.Second, time.Millisecond,
		"the new stream invalidates")
}

// memcached 1.6.18 refuses "watch mutations deletions": its sets invalidate through "watch mutations",
// its deletes only through TTL.
func TestMemcachedMutationsAndTTL(t *testing.T) {
	d := startMemcached(t)
	ctx := context.Background()
	writer := newClient(t, d.Addr)
	const ttl = 2 * time.Second
	var logMu sync.Mutex
	var logs []string
	nc := newNear(t, newClient(t, d.Addr), Config{TTL: ttl, HotReads: 2, HotKeysPoll: 20 * time.Millisecond,
		Logf: func(f string, a ...any) { logMu.Lock(); logs = append(logs, fmt.Sprintf(f, a...)); logMu.Unlock() }})
	set(t, writer, "k", "old")
	set(t, writer, "marker", "m")
	makeHot(t, nc, "marker")
	waitState(t, nc.watchers[d.Addr], stateMutations)

	// A set reaches the copy through the stream.
	makeHot(t, nc, "k")
	set(t, writer, "k", "new")
	require.Eventually(t, func() bool { return !copied(nc, "k") }, 5*time.Second, time.Millisecond)

	// A delete does not: the copy lives on until its TTL.
	start := time.Now()
	makeHot(t, nc, "k")
	require.NoError(t, writer.Delete(ctx, "k"))
	set(t, writer, "marker", "m2") // once its line is read, so has everything before it
	require.Eventually(t, func() bool { return !copied(nc, "marker") }, 5*time.Second, time.Millisecond)
	if time.Since(start) < ttl {
		assert.True(t, copied(nc, "k"), "memcached does not report the delete")
	}
	require.Eventually(t, func() bool {
		_, err := nc.Get(ctx, "k")
		return errors.Is(err, clientlib.ErrCacheMiss)
	}, ttl+time.Second, 10*time.Millisecond, "the TTL bounds a delete's staleness")

	logMu.Lock()
	defer logMu.Unlock()
	assert.Contains(t, strings.Join(logs, "\n"), "local counting only", "memcached refuses stats hotkeys")
}

func TestServerListedHotKey(t *testing.T) {
	d := startLeasecached(t)
	ctx := context.Background()
	other := newClient(t, d.Addr)
	set(t, other, "listed", "v")
	for i := 0; i < 3000; i++ { // another process makes it hot on the server
		_, err := other.Get(ctx, "listed")
		require.NoError(t, err)
	}
	nc := newNear(t, newClient(t, d.Addr), Config{TTL: longTTL, HotReads: 1 << 30, HotKeysPoll: 20 * time.Millisecond})
	require.Eventually(t, func() bool {
		_, err := nc.Get(ctx, "listed")
		return err == nil && copied(nc, "listed")
	}, 5*time.Second, 5*time.Millisecond, "listed by stats hotkeys, copied without local counts")
}

// Off by default: the core client never keeps a near copy, and a Cache copies only hot keys.
func TestOffByDefault(t *testing.T) {
	d := startLeasecached(t)
	ctx := context.Background()
	c := newClient(t, d.Addr)
	set(t, c, "k", "v")
	getHits := func() int {
		st, err := c.ServerStats(ctx, "")
		require.NoError(t, err)
		n, err := strconv.Atoi(st[d.Addr]["get_hits"])
		require.NoError(t, err)
		return n
	}
	before := getHits()
	for i := 0; i < 100; i++ {
		_, err := c.Get(ctx, "k")
		require.NoError(t, err)
	}
	assert.Equal(t, 100, getHits()-before, "every core read reaches the server")

	nc := newNear(t, c, Config{TTL: longTTL, HotReads: 50, HotKeysPoll: -1})
	for i := 0; i < 49; i++ {
		_, err := nc.Get(ctx, "k")
		require.NoError(t, err)
	}
	assert.Zero(t, nc.Stats().Entries, "below HotReads nothing is copied")
	assert.Empty(t, nc.watchers, "nor any stream opened")
}

func TestSizeBoundLive(t *testing.T) {
	d := startLeasecached(t)
	c := newClient(t, d.Addr)
	nc := newNear(t, c, Config{TTL: longTTL, HotReads: 1, MaxEntries: 4, HotKeysPoll: -1})
	for i := 0; i < 20; i++ {
		key := "k" + strconv.Itoa(i)
		set(t, c, key, "v")
		for j := 0; j < 50 && !copied(nc, key); j++ {
			_, err := nc.Get(context.Background(), key)
			require.NoError(t, err)
			time.Sleep(time.Millisecond)
		}
		require.LessOrEqual(t, nc.Stats().Entries, 4)
	}
	assert.Positive(t, nc.Stats().Fills)
}

// While a server's stream is not up (here it never is), its hot keys are read through, not copied:
// a write the stream would have reported must not be hidden behind a copy.
func TestNoCopyWithoutStream(t *testing.T) {
	d := startLeasecached(t)
	c := newClient(t, d.Addr)
	set(t, c, "k", "v")
	var dials atomic.Int64
	nc := newNear(t, c, Config{TTL: longTTL, HotReads: 1, HotKeysPoll: -1,
		DialContext: func(context.Context, string, string) (net.Conn, error) {
			dials.Add(1)
			return nil, errors.New("no watch for this test")
		}})
	for i := 0; i < 200; i++ {
		_, err := nc.Get(context.Background(), "k")
		require.NoError(t, err)
	}
	st := nc.Stats()
	assert.Zero(t, st.Fills)
	assert.Zero(t, st.Hits)
	assert.Positive(t, dials.Load(), "the watcher keeps trying")
}
