package clientlib_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/leasecached/leasecached/clientlib"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// defaultOpenPerAddr is Config.MaxOpenPerAddr's default: connections a client opens to one server.
const defaultOpenPerAddr = 4

// TestPipelinedRepliesMatchTheirCallers: 256 concurrent callers share the default pool's few
// connections to one server, and each gets its own key's value, also while some of them give up
// mid-pipeline at every stage (their deadlines range from before the request is written to after the
// reply began): the replies they abandon are read and dropped, never handed to another caller, and
// never counted against the server.
func TestPipelinedRepliesMatchTheirCallers(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			p := be.start(t)
			c := newClient(t, clientlib.Config{}, p.Addr)
			ctx := context.Background()
			const keys, callers, rounds = 64, 256, 40
			for k := range keys {
				require.NoError(t, c.Set(ctx, &clientlib.Item{Key: "pl:" + strconv.Itoa(k), Value: []byte("value of " + strconv.Itoa(k))}))
			}
			before := serverStat(t, c, p.Addr, "curr_connections") // with the one connection the writes used
			var wg sync.WaitGroup
			var mu sync.Mutex
			var wrong []string
			abandoned := 0
			for g := range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(g), 1))
					buf := make([]byte, 0, 32)
					for range rounds {
						k := rng.IntN(keys)
						cctx, cancel := ctx, context.CancelFunc(func() {})
						if g%4 == 0 { // a quarter of the callers are impatient
							cctx, cancel = context.WithTimeout(ctx, time.Duration(rng.IntN(2000))*time.Microsecond)
						}
						v, _, err := c.GetInto(cctx, "pl:"+strconv.Itoa(k), buf)
						cancel()
						mu.Lock()
						switch {
						case errors.Is(err, context.DeadlineExceeded):
							abandoned++
						case err != nil:
							wrong = append(wrong, err.Error())
						case string(v) != "value of "+strconv.Itoa(k):
							wrong = append(wrong, "key "+strconv.Itoa(k)+" got "+string(v))
						}
						mu.Unlock()
						buf = v
					}
				}()
			}
			wg.Wait()
			require.Empty(t, wrong, "callers that got another's reply or an error")
			opened := serverStat(t, c, p.Addr, "curr_connections") - before + 1
			t.Logf("%d callers x %d gets: %d abandoned, %d connections open", callers, rounds, abandoned, opened)
			require.LessOrEqual(t, opened, defaultOpenPerAddr, "connections open for %d callers", callers)
			h := c.Stats().Servers[0]
			require.Zero(t, h.Errors, "abandoned requests counted against a server that answered: %+v", h)
			require.False(t, h.Ejected)
		})
	}
}

// TestPipelinedGetIntoAllocatesNothing: GetInto allocates nothing in steady state when 16 callers share
// one connection (replies queued, the writer goroutine batching their requests), not only alone.
func TestPipelinedGetIntoAllocatesNothing(t *testing.T) {
	p := startMemcached(t)
	c := newClient(t, clientlib.Config{MaxOpenPerAddr: 1}, p.Addr)
	ctx := context.Background()
	require.NoError(t, c.Set(ctx, &clientlib.Item{Key: "alloc:pl", Value: make([]byte, 100)}))
	const callers, rounds = 16, 500
	run := func() {
		var wg sync.WaitGroup
		for range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, 0, 128)
				for range rounds {
					v, _, err := c.GetInto(ctx, "alloc:pl", buf)
					assert.NoError(t, err)
					buf = v
				}
			}()
		}
		wg.Wait()
	}
	run() // warm up: connection, tickets, buffers
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	run()
	runtime.ReadMemStats(&after)
	perCall := float64(after.Mallocs-before.Mallocs) / (callers * rounds)
	t.Logf("%.4f allocations per GetInto with %d callers on one connection", perCall, callers)
	// The goroutines, their buffers and the WaitGroup are 2 allocations per caller (0.004 per call).
	require.Less(t, perCall, 0.01)
}
