package near

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasecached/leasecached/clientlib"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// GetOrFill through the near-cache: a hot key's cache hit is copied and then answered without a
// request to the server; a write from another client reaches it through the stream; a value this
// process filled, and a failed fill, are not copied; each copy answers only the call that made it.
func TestGetOrFill(t *testing.T) {
	d := startLeasecached(t)
	ctx := context.Background()
	var requests atomic.Int64 // requests the client sent to the server
	c, err := clientlib.New(clientlib.Config{Servers: []clientlib.Server{{Addr: d.Addr}},
		Observe: func(_ context.Context, ev clientlib.Event) {
			if ev.Addr != "" {
				requests.Add(1)
			}
		}})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	writer := newClient(t, d.Addr)
	nc := newNear(t, c, Config{TTL: longTTL, HotReads: 2, HotKeysPoll: -1})
	var fills atomic.Int64
	fill := func(value string, err error) clientlib.FillFunc {
		return func(context.Context, string) ([]byte, error) {
			fills.Add(1)
			return []byte(value), err
		}
	}
	getOrFill := func(key string, f clientlib.FillFunc) clientlib.Value { // on the test's goroutine only
		t.Helper()
		v, err := nc.GetOrFill(ctx, key, f, nil)
		require.NoError(t, err)
		return v
	}

	t.Run("hit copied and served", func(t *testing.T) {
		set(t, writer, "k", "v1")
		for i := 0; i < 2000 && !copied(nc, "k"); i++ {
			getOrFill("k", fill("never", nil))
			time.Sleep(time.Millisecond)
		}
		require.True(t, copied(nc, "k"))
		before, hits := requests.Load(), nc.Stats().Hits
		for i := 0; i < 100; i++ {
			v := getOrFill("k", fill("never", nil))
			require.Equal(t, "v1", string(v.Data))
			require.Equal(t, clientlib.SourceCache, v.Source)
		}
		assert.Equal(t, before, requests.Load(), "answered from the near copy")
		assert.Equal(t, hits+100, nc.Stats().Hits)
		assert.Zero(t, fills.Load())
	})
	t.Run("a GetOrFill copy does not answer Get", func(t *testing.T) {
		require.True(t, copied(nc, "k"))
		it, err := nc.Get(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, "v1", string(it.Value))
		assert.NotZero(t, it.CAS, "read through, with the server's CAS")
	})
	t.Run("another client's write", func(t *testing.T) {
		set(t, writer, "k", "v2")
		require.Eventually(t, func() bool {
			v, err := nc.GetOrFill(ctx, "k", fill("never", nil), nil)
			return err == nil && string(v.Data) == "v2"
		}, 5*time.Second, time.Millisecond)
		assert.Zero(t, fills.Load())
	})
	t.Run("filled value not copied", func(t *testing.T) {
		getOrFill("f", fill("first", nil)) // hot from the second read
		require.NoError(t, writer.Delete(ctx, "f"))
		v := getOrFill("f", fill("filled", nil))
		require.Equal(t, clientlib.SourceFill, v.Source)
		assert.False(t, copied(nc, "f"))
		require.Eventually(t, func() bool {
			v, err := nc.GetOrFill(ctx, "f", fill("again", nil), nil)
			return err == nil && v.Source == clientlib.SourceCache && copied(nc, "f")
		},
			5*time.Second, time.Millisecond, "its next read from the server is copied")
		assert.Equal(t, "filled", string(getOrFill("f", fill("again", nil)).Data))
	})
	t.Run("a Get copy does not answer GetOrFill", func(t *testing.T) {
		// A cached "not found" (NegativeTTL) is an item to Get and ErrNotFound to GetOrFill.
		_, err := c.GetOrFill(ctx, "neg", fill("", clientlib.ErrNotFound), &clientlib.FillOptions{NegativeTTL: time.Hour})
		require.ErrorIs(t, err, clientlib.ErrNotFound)
		makeHot(t, nc, "neg")
		for i := 0; i < 3; i++ {
			_, err := nc.GetOrFill(ctx, "neg", fill("never", nil), nil)
			require.ErrorIs(t, err, clientlib.ErrNotFound)
		}
	})
	t.Run("failed fill not copied", func(t *testing.T) {
		boom := errors.New("boom")
		for i := 0; i < 3; i++ {
			_, err := nc.GetOrFill(ctx, "e", fill("", boom), nil)
			require.ErrorIs(t, err, boom)
		}
		assert.False(t, copied(nc, "e"))
		assert.Zero(t, nc.Stats().Entries-countCopies(nc), "no reservation left behind")
	})
}

// countCopies is how many installed copies nc holds (reservations excluded).
func countCopies(nc *Cache) int {
	nc.store.mu.Lock()
	defer nc.store.mu.Unlock()
	n := 0
	for _, e := range nc.store.entries {
		if e.item != nil {
			n++
		}
	}
	return n
}
