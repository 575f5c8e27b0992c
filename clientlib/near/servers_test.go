package near

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/leasecached/leasecached/clientlib"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The near-cache follows Client.SetServers: a copy whose key the new list places on another server is
// not served (that server's writes are not on the stream the copy relies on), a server taken out of
// the list loses its watcher, a key that stays keeps its copy, and the new server's keys are copied and
// invalidated through a watcher of their own.
func TestFollowsSetServers(t *testing.T) {
	a, b := startLeasecached(t), startLeasecached(t)
	for _, tc := range []struct {
		name     string
		after    []string
		aWatched bool // a is still in the list, so its watcher stays
	}{
		{"server replaced", []string{b.Addr}, false},
		{"server added", []string{a.Addr, b.Addr}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var after []clientlib.Server
			for _, addr := range tc.after {
				after = append(after, clientlib.Server{Addr: addr})
			}
			moved, stays := keysPlaced(t, after, b.Addr), keysPlaced(t, after, a.Addr)
			writerA, writerB := newClient(t, a.Addr), newClient(t, b.Addr)
			c := newClient(t, a.Addr)
			nc := newNear(t, c, Config{TTL: longTTL, HotReads: 2, HotKeysPoll: -1})
			// Both writes come before any key is hot, so before a's watch stream starts: a write's line that
			// arrived after a copy was made would drop it, as it should, and the test would see no copy.
			set(t, writerA, moved, "a")
			if stays != "" {
				set(t, writerA, stays, "a")
			}
			makeHot(t, nc, moved)
			if stays != "" {
				makeHot(t, nc, stays)
			}
			wa := nc.watcherOf(a.Addr)
			waitState(t, wa, stateFull)

			set(t, writerB, moved, "b")
			require.NoError(t, c.SetServers(after...))
			it, err := nc.Get(t.Context(), moved)
			require.NoError(t, err)
			require.Equal(t, "b", string(it.Value), "a copy from the old placement is not served")
			if stays != "" {
				assert.True(t, copied(nc, stays), "a key that stays keeps its copy")
			}
			if tc.aWatched {
				assert.Same(t, wa, nc.watcherOf(a.Addr), "a stays listed: its stream stays")
			} else {
				assert.Nil(t, nc.watcherOf(a.Addr), "a is no longer watched")
				select {
				case <-wa.done:
				case <-time.After(5 * time.Second):
					t.Fatal("a's watcher still runs")
				}
			}

			makeHot(t, nc, moved)
			waitState(t, nc.watcherOf(b.Addr), stateFull)
			set(t, writerB, moved, "b2")
			require.Eventually(t, func() bool { return !copied(nc, moved) }, 5*time.Second, time.Millisecond,
				"b's stream invalidates the copy from b")
		})
	}
}

// keysPlaced returns a key that a client with list places on addr ("" when list lacks addr).
func keysPlaced(t *testing.T, list []clientlib.Server, addr string) string {
	t.Helper()
	c, err := clientlib.New(clientlib.Config{Servers: list}) // never dialled: placement needs the list alone
	require.NoError(t, err)
	defer c.Close()
	for i := 0; i < 1000; i++ {
		key := "key" + strconv.Itoa(i)
		if got, err := c.ServerFor(key); err == nil && got == addr {
			return key
		}
	}
	return ""
}

// Readers while the server list changes back and forth: for the race detector, and so that no copy
// from an earlier list outlives the changes (with an hour's TTL only following the list drops it).
func TestSetServersWhileReading(t *testing.T) {
	a, b := startLeasecached(t), startLeasecached(t)
	lists := [][]clientlib.Server{{{Addr: a.Addr}}, {{Addr: b.Addr}}, {{Addr: a.Addr}, {Addr: b.Addr}}}
	writers := []*clientlib.Client{newClient(t, a.Addr), newClient(t, b.Addr)}
	keys := []string{"k0", "k1", "k2", "k3", "k4", "k5"}
	for _, w := range writers {
		for _, k := range keys {
			set(t, w, k, "old")
		}
	}
	c := newClient(t, a.Addr)
	nc, err := New(c, Config{TTL: longTTL, HotReads: 2, HotKeysPoll: 5 * time.Millisecond})
	require.NoError(t, err)
	done := make(chan struct{})
	var wg sync.WaitGroup
	stop := sync.OnceFunc(func() { close(done); wg.Wait() })
	defer stop() // also when a require below fails
	for g := 0; g < 3; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				_, err := nc.Get(t.Context(), keys[i%len(keys)])
				assert.NoError(t, err)
			}
		}()
	}
	for i := 0; i < 60; i++ {
		require.NoError(t, c.SetServers(lists[i%len(lists)]...))
		time.Sleep(2 * time.Millisecond)
	}
	require.NoError(t, c.SetServers(lists[1]...)) // b alone
	for _, k := range keys {
		set(t, writers[1], k, "new")
	}
	require.Eventually(t, func() bool {
		for _, k := range keys {
			if it, err := nc.Get(t.Context(), k); err != nil || string(it.Value) != "new" {
				return false
			}
		}
		return true
	}, 5*time.Second, time.Millisecond, "every read sees b's write")
	stop()
	assert.Nil(t, nc.watcherOf(a.Addr), "a is no longer watched")
	require.NoError(t, nc.Close())
	require.Eventually(t, func() bool { return !nearGoroutines() }, 5*time.Second, 10*time.Millisecond)
}
