package integration

import (
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// kill -9 while keys are overwritten again and again with values of one size: a store that keeps the
// size class rewrites the item's chunk in place (doc/design/memory-layout.md, rule 7), so this is the load
// that finds out whether a crash in the middle of such a rewrite loses the key. The restart contract: the
// key then holds its acknowledged value or one in flight, never nothing. (The mixed load of
// restart_kill_test.go rarely kills inside a rewrite: its values are small.)

const (
	overwriteRounds  = 10
	overwriteWriters = 2       // one per event loop (-t 2): each keeps a loop busy rewriting its key
	overwriteSize    = 400_000 // one slab class, not chained: the rewrite copies and seals 400 KB
	overwriteBatch   = 4       // sets pipelined per write
	overwriteMaxRun  = 400 * time.Millisecond
	overwriteMaxSets = 100_000 // bounds a writer's batches in one round (the kill stops it)
	overwriteValues  = 4       // distinct values, made once so that the client outruns the server
)

// overwriter is one connection rewriting one key; flags (a sequence number) tell its stores apart.
type overwriter struct {
	k      *kKey
	values [][]byte
	seq    int
	err    error
}

func (w *overwriter) run(c *rsConn, stop <-chan struct{}) {
	for range overwriteMaxSets {
		select {
		case <-stop:
			return
		default:
		}
		for range overwriteBatch {
			w.seq++
			v := w.values[w.seq%len(w.values)]
			c.queueStore("set", w.k.name, uint32(w.seq), 0, v)
			w.k.inflight = append(w.k.inflight, kState{present: true, flags: uint32(w.seq), val: v})
		}
		if c.flush() != nil {
			return
		}
		for range overwriteBatch {
			l, err := c.line()
			if err != nil {
				return // killed: this set and the ones after it stay in flight
			}
			if l != "STORED" {
				w.err = fmt.Errorf("set %s: %q", w.k.name, l)
				return
			}
			w.k.acked, w.k.inflight = w.k.inflight[0], w.k.inflight[1:]
		}
	}
}

// TestRestartKillDuringOverwrite kills the server at random moments while overwriteWriters connections
// each overwrite one key with same-sized values, restarts it on the same directory, and requires each key
// to hold its acknowledged value or one in flight: a key that had a value never comes back absent.
func TestRestartKillDuringOverwrite(t *testing.T) {
	requireRestart(t)
	seed := restartSeed(t)
	rng := rand.New(rand.NewSource(seed))
	dir := t.TempDir()
	writers := make([]*overwriter, overwriteWriters)
	for i := range writers {
		w := &overwriter{k: &kKey{name: fmt.Sprintf("overwritten%d", i)}}
		for j := range overwriteValues {
			w.values = append(w.values, rsValue(w.k.name, j, overwriteSize))
		}
		writers[i] = w
	}
	d := startOnDir(t, dir)
	waitLoaded(t, d)
	lost := 0
	for round := range overwriteRounds {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for _, w := range writers {
			c, err := dialRS(d)
			require.NoError(t, err)
			if !w.k.acked.present { // the first round, or a key lost by the last one
				w.seq++
				v := w.values[0]
				mustStore(t, c, "set", w.k.name, uint32(w.seq), 0, v)
				w.k.acked = kState{present: true, flags: uint32(w.seq), val: v}
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				w.run(c, stop)
			}()
		}
		time.Sleep(time.Duration(rng.Int63n(int64(overwriteMaxRun))))
		stopDaemon(t, d, stopKill)
		close(stop)
		wg.Wait()

		d = startOnDir(t, dir)
		st := waitLoaded(t, d)
		c := mustDialRS(t, d)
		for _, w := range writers {
			require.NoError(t, w.err)
			got, err := c.getItems("get", []string{w.k.name})
			require.NoError(t, err)
			g, ok := got[w.k.name]
			s := kState{present: ok, flags: g.flags, val: g.val}
			i, allowed := w.k.allowed(s)
			t.Logf("round %d, %s: %d sets in flight, got %s (state %d: 0 acknowledged, >0 in flight); %s=%s %s=%s",
				round, w.k.name, len(w.k.inflight), s, i, statLoaded, st[statLoaded], statDropped, st[statDropped])
			if !allowed {
				lost++
				t.Errorf("round %d: %s is %s after the restart; acknowledged: %s; %d sets in flight", round,
					w.k.name, s, w.k.acked, len(w.k.inflight))
			}
			w.k.acked, w.k.inflight = s, nil
		}
	}
	if lost > 0 {
		t.Logf("%d of %d keys lost their value in %d kills", lost, overwriteRounds*overwriteWriters, overwriteRounds)
	}
}
