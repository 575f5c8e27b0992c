package clientlib_test

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasecached/leasecached/clientlib"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countingConn counts the writes on a connection: the client writes each request (a round trip, however
// many commands it holds) with one flush, and each probe with one write.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// TestObserveSeesEveryRequest: Config.Observe sees every request the client writes (counted on the
// wire, under a DialContext that counts writes), each with its command, server and duration, and every
// fill; a failed request reaches it with its error.
func TestObserveSeesEveryRequest(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			p := be.start(t)
			var writes atomic.Int64
			var mu sync.Mutex
			var events []clientlib.Event
			var d net.Dialer
			c := newClient(t, clientlib.Config{
				DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
					nc, err := d.DialContext(ctx, network, addr)
					if err != nil {
						return nil, err
					}
					return countingConn{nc, &writes}, nil
				},
				Observe: func(_ context.Context, ev clientlib.Event) {
					mu.Lock()
					events = append(events, ev)
					mu.Unlock()
				},
			}, p.Addr)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			fill := func(context.Context, string) ([]byte, error) { return []byte("v"), nil }
			multi := func(_ context.Context, keys []string) (map[string][]byte, error) {
				out := map[string][]byte{}
				for _, k := range keys {
					out[k] = []byte("v")
				}
				return out, nil
			}
			require.NoError(t, c.Set(ctx, &clientlib.Item{Key: "a", Value: []byte("1")}))
			_, err := c.Get(ctx, "a")
			require.NoError(t, err)
			_, err = c.Get(ctx, "missing")
			require.ErrorIs(t, err, clientlib.ErrCacheMiss)
			_, err = c.GetMulti(ctx, []string{"a", "missing"})
			require.NoError(t, err)
			require.ErrorIs(t, c.Add(ctx, &clientlib.Item{Key: "a", Value: []byte("2")}), clientlib.ErrNotStored)
			_, err = c.Increment(ctx, "missing", 1)
			require.ErrorIs(t, err, clientlib.ErrCacheMiss)
			require.NoError(t, c.Touch(ctx, "a", time.Minute))
			_, err = c.GetOrFill(ctx, "filled", fill, nil) // a probe, the lookup, the fill, the write
			require.NoError(t, err)
			_, err = c.GetOrFill(ctx, "filled", fill, nil)
			require.NoError(t, err)
			_, err = c.GetMultiOrFill(ctx, []string{"a", "m1", "m2"}, multi, nil)
			require.NoError(t, err)
			_, err = c.MetaGet(ctx, "a", clientlib.MetaFlags{}.ReturnValue())
			require.NoError(t, err)
			require.NoError(t, c.Delete(ctx, "a"))
			_, err = c.Version(ctx)
			require.NoError(t, err)
			require.NoError(t, c.FlushAll(ctx))

			mu.Lock()
			seen := append([]clientlib.Event(nil), events...)
			mu.Unlock()
			ops := map[string]int{}
			requests := 0
			for _, ev := range seen {
				ops[ev.Op]++
				assert.False(t, ev.Start.IsZero(), "%s: start", ev.Op)
				assert.Positive(t, ev.Duration, "%s: duration", ev.Op)
				assert.NoError(t, ev.Err, "%s: a miss or NOT_STORED is an answer", ev.Op)
				if ev.Op == "fill" {
					assert.Empty(t, ev.Addr)
					continue
				}
				requests++
				assert.Equal(t, p.Addr, ev.Addr, ev.Op)
			}
			t.Logf("%s: %d requests on the wire, %d seen: %v", be.name, writes.Load(), requests, ops)
			require.Equal(t, int(writes.Load()), requests, "every request written was observed, once")
			assert.Equal(t, 2, ops["fill"], "GetOrFill's fill and GetMultiOrFill's batch fill")
			for _, op := range []string{"set", "gets", "add", "incr", "touch", "mg", "delete", "version", "flush_all", "probe"} {
				assert.Positive(t, ops[op], op)
			}

			p.Kill()
			_, err = c.Get(ctx, "a")
			require.Error(t, err)
			mu.Lock()
			last := events[len(events)-1]
			mu.Unlock()
			assert.Equal(t, "gets", last.Op)
			assert.Error(t, last.Err, "a failed request is observed with its error")
		})
	}
}
