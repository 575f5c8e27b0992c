package clientlib_test

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/leasecached/leasecached/clientlib"
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
		dials, clientlib.DefaultMaxOpenPerAddr)
	require.LessOrEqual(t, dials, clientlib.DefaultMaxOpenPerAddr, "connections dialled under load")
}
