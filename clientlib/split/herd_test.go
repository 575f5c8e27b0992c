package split

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/leasecached/leasecached/clientlib"
	"github.com/stretchr/testify/require"
)

// TestFleetHerdSplit: a split key read through GetOrFill by 4 clients (each its own single-flight, as
// separate processes) of 8 goroutines, over 3 leasecached servers, with a 2 s TTL and 100 ms fills:
// the source is still called once per expiry in the whole fleet (replicas are filled from the key
// itself, not from the source), and every reader gets the source's value.
func TestFleetHerdSplit(t *testing.T) {
	const (
		clients    = 4
		goroutines = 8
		ttl        = 2 * time.Second
		fillTime   = 100 * time.Millisecond
		run        = 4500 * time.Millisecond
		maxCalls   = 100000
		// Two fills closer than this were one expiry's herd: exptimes are whole seconds, so an item
		// stored with TTL 2 s lives between 1 and 2 s (see clientlib's TestFleetHerd).
		minGap = ttl - time.Second - 300*time.Millisecond
	)
	_, servers := startFleet(t, 3)
	opts := &clientlib.FillOptions{TTL: ttl, FillTimeout: time.Second}
	var mu sync.Mutex
	var fills []time.Time
	fill := func(ctx context.Context, key string) ([]byte, error) {
		mu.Lock()
		fills = append(fills, time.Now())
		mu.Unlock()
		time.Sleep(fillTime)
		return []byte("db:" + key), nil
	}
	var splits []*Client
	for i := 0; i < clients; i++ {
		c := newClient(t, clientlib.Config{Servers: servers, Distribution: clientlib.Ketama})
		splits = append(splits, newSplit(t, c, Config{Keys: []string{"hot"}}))
	}
	require.Len(t, splits[0].Copies("hot"), 3)

	ctx := context.Background()
	deadline := time.Now().Add(run)
	var wg sync.WaitGroup
	errs := make(chan error, clients*goroutines)
	for _, s := range splits {
		for g := 0; g < goroutines; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < maxCalls && time.Now().Before(deadline); i++ {
					cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
					v, err := s.GetOrFill(cctx, "hot", fill, opts)
					cancel()
					if err == nil && string(v.Data) != "db:hot" {
						err = fmt.Errorf("read %q", v.Data)
					}
					if err != nil {
						errs <- err
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	sort.Slice(fills, func(i, j int) bool { return fills[i].Before(fills[j]) })
	var replicaReads int64
	for _, s := range splits {
		replicaReads += s.Stats().ReplicaReads
	}
	t.Logf("%d source calls in %v with TTL %v; %d reads through replicas", len(fills), run, ttl, replicaReads)
	require.Positive(t, replicaReads)
	require.NotEmpty(t, fills)
	require.LessOrEqual(t, len(fills), int(run/(ttl-time.Second))+1, "more source calls than expiries of the key")
	for i := 1; i < len(fills); i++ {
		require.GreaterOrEqual(t, fills[i].Sub(fills[i-1]), minGap, "source calls %d and %d were one expiry's herd", i-1, i)
	}
}
