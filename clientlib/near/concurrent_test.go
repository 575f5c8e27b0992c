package near

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasecached/leasecached/clientlib"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Readers, writes through the Cache and through another client, flush_all, and Close in the middle:
// for the race detector, and to check that a closed Cache still answers and leaves no goroutine.
func TestConcurrentUseAndClose(t *testing.T) {
	d := startLeasecached(t)
	ctx := context.Background()
	other := newClient(t, d.Addr)
	c := newClient(t, d.Addr)
	nc, err := New(c, Config{TTL: 50 * time.Millisecond, HotReads: 2, HotKeysPoll: 10 * time.Millisecond, MaxEntries: 3})
	require.NoError(t, err)
	keys := []string{"a", "b", "c", "d"}
	var wg sync.WaitGroup
	var closeOnce sync.Once
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 3000; i++ {
				if g == 0 && i == 1500 {
					closeOnce.Do(func() { require.NoError(t, nc.Close()) })
				}
				it, err := nc.Get(ctx, keys[i%len(keys)])
				if errors.Is(err, clientlib.ErrCacheMiss) {
					continue
				}
				if !assert.NoError(t, err) {
					return
				}
				assert.True(t, strings.HasPrefix(string(it.Value), "v"), "%q", it.Value)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 300; i++ {
			k := keys[i%len(keys)]
			v := []byte("v" + strconv.Itoa(i))
			switch i % 10 {
			case 0:
				assert.NoError(t, other.FlushAll(ctx))
			case 1, 2:
				err := nc.Delete(ctx, k)
				assert.True(t, err == nil || errors.Is(err, clientlib.ErrCacheMiss), "%v", err)
			case 3, 4, 5:
				assert.NoError(t, nc.Set(ctx, &clientlib.Item{Key: k, Value: v}))
			default:
				assert.NoError(t, other.Set(ctx, &clientlib.Item{Key: k, Value: v}))
			}
		}
	}()
	wg.Wait()
	require.NoError(t, nc.Close(), "a second Close is harmless")
	assert.Zero(t, nc.Stats().Entries)
	require.Eventually(t, func() bool { return !nearGoroutines() }, 5*time.Second, 10*time.Millisecond,
		"the watchers and the poll are gone")
}

// nearGoroutines reports whether a watcher or the hot-keys poll is still running.
func nearGoroutines() bool {
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	return strings.Contains(stacks, "near.(*watcher).run") || strings.Contains(stacks, "near.(*Cache).pollHotKeys")
}
