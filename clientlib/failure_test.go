package clientlib_test

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/leasecached/leasecached/clientlib"
	"github.com/stretchr/testify/require"
)

// Loaded-client shape of TestLoadedClientKeepsConnections: more goroutines than the pool's open
// count, each doing a bounded number of requests.
const (
	loadGoroutines = 128
	loadRequests   = 100 // per goroutine
)

// serverStat reads one counter of addr's "stats" through c.
func serverStat(t *testing.T, c *clientlib.Client, addr, name string) int {
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
	var wg sync.WaitGroup
	for g := range loadGoroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := "load:" + strconv.Itoa(g%16)
			for range loadRequests {
				_ = c.Set(ctx, &clientlib.Item{Key: key, Value: []byte("v")})
				_, _ = c.Get(ctx, key)
			}
		}()
	}
	wg.Wait()
	dials := serverStat(t, c, p.Addr, "total_connections") - before
	t.Logf("%d goroutines x %d set+get: %d connections dialled (open count %d)", loadGoroutines, loadRequests, dials,
		clientlib.DefaultMaxOpenPerAddr)
	require.LessOrEqual(t, dials, clientlib.DefaultMaxOpenPerAddr, "connections dialled under load")
}
