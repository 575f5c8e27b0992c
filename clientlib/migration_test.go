package clientlib_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasecached/leasecached/clientlib"
	"github.com/stretchr/testify/require"
)

// Part 7 of issue 29 (migration): Ping, a server list that changes at run time and -Y authentication,
// against real leasecached and memcached 1.6.18 processes (Unix sockets and TLS: transport_test.go).

// readWriteFill checks that c serves key through Set, Get and GetOrFill.
func readWriteFill(t *testing.T, c *clientlib.Client, key string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, c.Set(ctx, &clientlib.Item{Key: key, Value: []byte("v1")}))
	it, err := c.Get(ctx, key)
	require.NoError(t, err)
	require.Equal(t, "v1", string(it.Value))
	v, err := c.GetOrFill(ctx, key+":fill", func(context.Context, string) ([]byte, error) { return []byte("filled"), nil }, nil)
	require.NoError(t, err)
	require.Equal(t, "filled", string(v.Data))
	v, err = c.GetOrFill(ctx, key+":fill", func(context.Context, string) ([]byte, error) { return nil, errors.New("not again") }, nil)
	require.NoError(t, err)
	require.Equal(t, clientlib.SourceCache, v.Source, "the filled value was cached")
	require.NoError(t, c.Ping(ctx))
	for _, h := range c.Stats().Servers {
		require.Zero(t, h.Errors, "errors on %s", h.Addr)
	}
}

// TestPing: nil while every server answers; with one killed, an error that names it and not the others.
func TestPing(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			a, b := be.start(t), be.start(t)
			c := newClient(t, clientlib.Config{}, a.Addr, b.Addr)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			require.NoError(t, c.Ping(ctx))
			b.Kill()
			err := c.Ping(ctx)
			require.Error(t, err)
			require.Contains(t, err.Error(), "ping "+b.Addr)
			require.NotContains(t, err.Error(), a.Addr)
		})
	}
}

// currConnections is a server's curr_connections, read on a connection of its own (which it counts).
func currConnections(t *testing.T, addr string) int {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, time.Second)
	require.NoError(t, err)
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(2 * time.Second))
	_, err = nc.Write([]byte("stats\r\n"))
	require.NoError(t, err)
	r := bufio.NewReader(nc)
	for {
		line, err := r.ReadString('\n')
		require.NoError(t, err)
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "STAT curr_connections "); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
		if strings.HasPrefix(line, "END") {
			t.Fatalf("no curr_connections in stats of %s", addr)
		}
	}
}

// TestSetServers: a client whose server list changes at run time places keys as a new client with that
// list would (Modulo and Ketama), keeps what a kept server holds, closes the connections to a removed
// server, and, with requests running in 16 goroutines while the list changes every few milliseconds,
// fails none (run with -race).
func TestSetServers(t *testing.T) {
	ps := []*proc{startLeasecached(t), startLeasecached(t), startLeasecached(t)}
	list := func(idx ...int) []clientlib.Server {
		var out []clientlib.Server
		for _, i := range idx {
			out = append(out, clientlib.Server{Addr: ps[i].Addr})
		}
		return out
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, dist := range []clientlib.Distribution{clientlib.Modulo, clientlib.Ketama} {
		t.Run(fmt.Sprintf("placement %d", dist), func(t *testing.T) {
			c, err := clientlib.New(clientlib.Config{Servers: list(0, 1), Distribution: dist})
			require.NoError(t, err)
			defer c.Close()
			for _, next := range [][]int{{0, 1, 2}, {2, 0}, {1}, {0, 1}} {
				require.NoError(t, c.SetServers(list(next...)...))
				fresh, err := clientlib.New(clientlib.Config{Servers: list(next...), Distribution: dist})
				require.NoError(t, err)
				for i := range 500 {
					k := "key:" + strconv.Itoa(i)
					got, err := c.ServerFor(k)
					require.NoError(t, err)
					want, _ := fresh.ServerFor(k)
					require.Equal(t, want, got, "key %s after SetServers(%v)", k, next)
				}
				require.NoError(t, fresh.Close())
				var addrs []string
				for _, h := range c.Stats().Servers {
					addrs = append(addrs, h.Addr)
				}
				var want []string
				for _, s := range list(next...) {
					want = append(want, s.Addr)
				}
				require.Equal(t, want, addrs, "Stats lists the new servers in order")
			}
		})
	}

	t.Run("errors change nothing", func(t *testing.T) {
		c := newClient(t, clientlib.Config{}, ps[0].Addr)
		require.ErrorIs(t, c.SetServers(), clientlib.ErrNoServers)
		require.Error(t, c.SetServers(clientlib.Server{Addr: ps[1].Addr}, clientlib.Server{Addr: ps[1].Addr}))
		require.Error(t, c.SetServers(clientlib.Server{}))
		got, _ := c.ServerFor("k")
		require.Equal(t, ps[0].Addr, got)
		require.NoError(t, c.Close())
		require.ErrorIs(t, c.SetServers(list(1)...), clientlib.ErrClosed)
	})

	t.Run("kept values, removed connections", func(t *testing.T) {
		base := currConnections(t, ps[2].Addr) // our own stats connection included
		c := newClient(t, clientlib.Config{}, ps[0].Addr, ps[2].Addr)
		var onTwo []string
		for i := 0; len(onTwo) < 20; i++ {
			k := "conn:" + strconv.Itoa(i)
			require.NoError(t, c.Set(ctx, &clientlib.Item{Key: k, Value: []byte(k)}))
			if s, _ := c.ServerFor(k); s == ps[2].Addr {
				onTwo = append(onTwo, k)
			}
		}
		// Several connections to ps[2], idle in the pool.
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, k := range onTwo {
					_, _ = c.Get(ctx, k)
				}
			}()
		}
		wg.Wait()
		require.Greater(t, currConnections(t, ps[2].Addr), base, "the client holds connections to the server")
		require.NoError(t, c.SetServers(list(2, 1)...)) // ps[2] stays: its connections and values too
		for _, k := range onTwo {
			if s, _ := c.ServerFor(k); s == ps[2].Addr {
				it, err := c.Get(ctx, k)
				require.NoError(t, err)
				require.Equal(t, k, string(it.Value))
			}
		}
		before := currConnections(t, ps[2].Addr)
		require.NoError(t, c.SetServers(list(1)...)) // ps[2] removed
		require.Eventually(t, func() bool { return currConnections(t, ps[2].Addr) == base }, 3*time.Second, 20*time.Millisecond,
			"connections to the removed server are closed (%d before)", before)
		readWriteFill(t, c, "after-removal")
	})

	t.Run("concurrent requests", func(t *testing.T) {
		c := newClient(t, clientlib.Config{}, ps[0].Addr)
		lists := [][]int{{0, 1}, {0, 1, 2}, {2}, {1, 0}, {0}}
		stop := make(chan struct{})
		var calls, failures atomic.Int64
		var firstErr atomic.Value
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				fill := func(context.Context, string) ([]byte, error) { return []byte("f"), nil }
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					k := "cc:" + strconv.Itoa(rand.IntN(200))
					var err error
					switch i % 3 {
					case 0:
						err = c.Set(ctx, &clientlib.Item{Key: k, Value: []byte("x"), TTL: time.Minute})
					case 1:
						_, err = c.Get(ctx, k)
						if errors.Is(err, clientlib.ErrCacheMiss) {
							err = nil
						}
					default:
						_, err = c.GetOrFill(ctx, k+":"+strconv.Itoa(g), fill, nil)
					}
					if i%50 == 0 {
						_ = c.Stats() // reads the server list too
					}
					calls.Add(1)
					if err != nil {
						failures.Add(1)
						firstErr.CompareAndSwap(nil, err)
					}
				}
			}()
		}
		for i := range 300 {
			require.NoError(t, c.SetServers(list(lists[i%len(lists)]...)...))
			time.Sleep(3 * time.Millisecond)
		}
		close(stop)
		wg.Wait()
		t.Logf("%d calls during 300 list changes, %d failed", calls.Load(), failures.Load())
		require.Zero(t, failures.Load(), "first error: %v", firstErr.Load())
		for _, h := range c.Stats().Servers {
			require.Zero(t, h.Errors, "errors counted against %s", h.Addr)
		}
	})
}

// TestAuthentication: against leasecached and memcached started with -Y, the right user and password
// serve requests (and GetOrFill, whose probes authenticate too), a wrong password or none fails each
// request with an error that says so and names the server, and ejects nothing.
func TestAuthentication(t *testing.T) {
	file := filepath.Join(t.TempDir(), "users")
	require.NoError(t, os.WriteFile(file, []byte("alice:s3cret\n"), 0o600))
	tests := []struct {
		name, user, password string
		wantErr              string // "": requests are served
	}{
		{"right password", "alice", "s3cret", ""},
		{"wrong password", "alice", "guess", `refused authentication as "alice": "CLIENT_ERROR authentication failure"`},
		{"unknown user", "bob", "s3cret", `refused authentication as "bob"`},
		{"no credentials", "", "", "CLIENT_ERROR unauthenticated"},
	}
	for _, be := range transportBackends {
		t.Run(be.name, func(t *testing.T) {
			p := be.start(t, nil, "-Y", file)
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					c := newClient(t, clientlib.Config{Username: tt.user, Password: tt.password}, p.Addr)
					if tt.wantErr == "" {
						readWriteFill(t, c, "auth:"+strings.ReplaceAll(tt.name, " ", "-"))
						return
					}
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					defer cancel()
					for range 4 { // more than FailureLimit: a refusal must not eject the server
						_, err := c.Get(ctx, "k")
						require.Error(t, err)
						require.ErrorIs(t, err, clientlib.ErrClientError)
						require.Contains(t, err.Error(), tt.wantErr)
						require.Contains(t, err.Error(), p.Addr)
					}
					require.False(t, c.Stats().Servers[0].Ejected, "server ejected for refusing credentials")
				})
			}
		})
	}
	t.Run("bad credentials", func(t *testing.T) {
		_, err := clientlib.New(clientlib.Config{Servers: []clientlib.Server{{Addr: "127.0.0.1:1"}}, Username: "a b"})
		require.Error(t, err)
	})
}
