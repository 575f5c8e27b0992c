package integration

import (
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Serving while loading (issue 30): the listener opens at once, and while the index is rebuilt every
// request is answered correctly (a key of a shard not loaded yet waits for it, it does not miss), never
// with an error.

const (
	loadingItems   = 300_000 // enough that the rebuild of a -race build takes a while
	loadingFill    = 1000    // sets pipelined per write while filling
	loadingFillers = 2       // connections filling (one per event loop)
	loadingReaders = 4       // connections reading while the index is rebuilt
	loadingBatch   = 20      // keys per get of a reader
	// loadingMaxGets bounds a reader's requests.
	loadingMaxGets = 1_000_000
)

// fillLoading stores every loadingFillers-th batch of loadingFill items, from the filler-th on.
func fillLoading(c *rsConn, filler int) error {
	for i := filler * loadingFill; i < loadingItems; i += loadingFillers * loadingFill {
		n := min(loadingFill, loadingItems-i)
		for j := i; j < i+n; j++ {
			it := loadingItem(j)
			c.queueStore("set", loadingKey(j), it.flags, 0, it.val)
		}
		if err := c.flush(); err != nil {
			return err
		}
		for range n {
			if l, err := c.line(); err != nil || l != "STORED" {
				return fmt.Errorf("set: %q, %v", l, err)
			}
		}
	}
	return nil
}

func loadingKey(i int) string { return fmt.Sprintf("ld%06d", i) }

func loadingItem(i int) rsItem {
	k := loadingKey(i)
	return rsItem{flags: uint32(i), val: rsValue(k, 0, 60+i%80)}
}

// TestRestartServesWhileLoading stores loadingItems items (-m 256: four shards) through the plain build,
// stops it gracefully, starts the race build on the directory (as the suite's other daemons) and reads
// random keys from several connections from the moment the new server accepts until stats shows
// restart_loading 0: every key is found with its value. Then restart_items_loaded is the count stored
// and every item reads back.
func TestRestartServesWhileLoading(t *testing.T) {
	requireRestart(t)
	seed := restartSeed(t)
	dir := t.TempDir()
	args := []string{"-m", "256"}
	d := startOnDirPlain(t, dir, args...)
	waitLoaded(t, d)
	fillStart := time.Now()
	fillErrs := make(chan error, loadingFillers)
	for f := range loadingFillers {
		fc, err := dialRS(d)
		require.NoError(t, err)
		go func() {
			defer fc.Close()
			fillErrs <- fillLoading(fc, f)
		}()
	}
	for range loadingFillers {
		require.NoError(t, <-fillErrs)
	}
	st, err := mustDialRS(t, d).stats()
	require.NoError(t, err)
	require.Equal(t, "0", st["evictions"], "the items must fit")
	t.Logf("stored %d items in %v", loadingItems, time.Since(fillStart))
	stopDaemon(t, d, stopTerm)

	started := time.Now()
	d = startOnDir(t, dir, args...)
	accepted := time.Since(started)
	var loading atomic.Bool
	loading.Store(true)
	var whileLoading, total atomic.Int64
	var maxWait atomic.Int64 // nanoseconds: the longest get while loading
	stop := make(chan struct{})
	errs := make(chan error, loadingReaders)
	var wg sync.WaitGroup
	for r := range loadingReaders {
		rc, err := dialRS(d)
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer rc.Close()
			rng := rand.New(rand.NewSource(seed + int64(r)))
			keys := make([]string, loadingBatch)
			idx := make([]int, loadingBatch)
			for range loadingMaxGets {
				select {
				case <-stop:
					return
				default:
				}
				was := loading.Load()
				// Distinct keys: a get naming a key twice is answered twice, which getItems refuses.
				for j, picked := 0, map[int]bool{}; j < len(keys); {
					if i := rng.Intn(loadingItems); !picked[i] {
						picked[i] = true
						idx[j], keys[j] = i, loadingKey(i)
						j++
					}
				}
				t0 := time.Now()
				got, err := rc.getItems("get", keys)
				if err != nil {
					errs <- fmt.Errorf("reader %d: %w", r, err)
					return
				}
				if was {
					whileLoading.Add(1)
					for w := int64(time.Since(t0)); ; {
						if m := maxWait.Load(); w <= m || maxWait.CompareAndSwap(m, w) {
							break
						}
					}
				}
				total.Add(1)
				for j, k := range keys {
					want := loadingItem(idx[j])
					g, ok := got[k]
					if !ok || g.flags != want.flags || string(g.val) != string(want.val) {
						errs <- fmt.Errorf("reader %d: get %s (loading %v): found %v, flags %d, %d bytes; want flags %d, %d bytes",
							r, k, was, ok, g.flags, len(g.val), want.flags, len(want.val))
						return
					}
				}
			}
		}()
	}
	st = waitLoaded(t, d)
	loadedAfter := time.Since(started)
	loading.Store(false)
	time.Sleep(100 * time.Millisecond) // the readers go on a little after the rebuild
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("accepting %v after the start, loaded %v after it; %s=%s %s=%s %s=%s; %d gets of %d keys, %d of them "+
		"sent while loading (the slowest took %v)", accepted, loadedAfter, statLoaded, st[statLoaded], statDropped,
		st[statDropped], statSeconds, st[statSeconds], total.Load(), loadingBatch, whileLoading.Load(),
		time.Duration(maxWait.Load()))
	assert.Equal(t, int64(loadingItems), statInt(t, st, statLoaded), statLoaded)

	keys := make([]string, loadingItems)
	for i := range keys {
		keys[i] = loadingKey(i)
	}
	got, err := mustDialRS(t, d).getItems("get", keys)
	require.NoError(t, err)
	missing, wrong := 0, 0
	for i, k := range keys {
		want := loadingItem(i)
		g, ok := got[k]
		switch {
		case !ok:
			missing++
		case g.flags != want.flags || string(g.val) != string(want.val):
			wrong++
		}
	}
	assert.Zero(t, missing, "items missing after the restart")
	assert.Zero(t, wrong, "items with a wrong value after the restart")
}
