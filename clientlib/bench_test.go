package clientlib_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/leasecached/leasecached/clientlib"
)

// BenchmarkVsGomemcache compares this client with gomemcache in the same run, against the same server
// processes (memcached 1.6 and leasecached, started here): Get hits and Sets of 100-byte values from 1,
// 16 and 256 concurrent callers. Besides ns/op and allocations it reports conns, the connections the
// client held open to the server at the end of the run (memcached's curr_connections, less those open
// before the client was made). gomemcache runs with MaxIdleConns equal to the callers, its best case: with
// its default (2) it dials and closes a connection for most requests under concurrency.
//
//	go test -run x -bench VsGomemcache -benchmem -benchtime 20000x ./clientlib
//
// doc/design/client-pipelining.md has the numbers and how to read them.
func BenchmarkVsGomemcache(b *testing.B) {
	servers := []struct {
		name  string
		start func(testing.TB) *proc
	}{{"memcached", startMemcached}, {"leasecached", startLeasecached}}
	for _, srv := range servers {
		b.Run(srv.name, func(b *testing.B) {
			p := srv.start(b)
			stats := newClient(b, clientlib.Config{}, p.Addr) // reads curr_connections; its own connection is counted in the baseline
			value := make([]byte, 100)
			ctx := context.Background()
			for _, op := range []string{"get", "set"} {
				for _, callers := range []int{1, 16, 256} {
					name := op + "/callers=" + strconv.Itoa(callers)
					b.Run("clientlib/"+name, func(b *testing.B) {
						c, err := clientlib.New(clientlib.Config{Servers: []clientlib.Server{{Addr: p.Addr}}})
						if err != nil {
							b.Fatal(err)
						}
						defer c.Close()
						it := &clientlib.Item{Key: "bench:0", Value: value}
						if err := c.Set(ctx, it); err != nil {
							b.Fatal(err)
						}
						base := serverStat(b, stats, p.Addr, "curr_connections") - 1
						runCallers(b, callers, func() func() error {
							buf := make([]byte, 0, 128)
							mine := &clientlib.Item{Key: "bench:0", Value: value}
							if op == "get" {
								return func() (err error) { buf, _, err = c.GetInto(ctx, "bench:0", buf); return err }
							}
							return func() error { return c.Set(ctx, mine) }
						})
						b.ReportMetric(float64(serverStat(b, stats, p.Addr, "curr_connections")-base), "conns")
					})
					b.Run("gomemcache/"+name, func(b *testing.B) {
						c := memcache.New(p.Addr)
						c.MaxIdleConns = callers
						defer c.Close()
						if err := c.Set(&memcache.Item{Key: "bench:0", Value: value}); err != nil {
							b.Fatal(err)
						}
						base := serverStat(b, stats, p.Addr, "curr_connections") - 1
						runCallers(b, callers, func() func() error {
							mine := &memcache.Item{Key: "bench:0", Value: value}
							if op == "get" {
								return func() error { _, err := c.Get("bench:0"); return err }
							}
							return func() error { return c.Set(mine) }
						})
						b.ReportMetric(float64(serverStat(b, stats, p.Addr, "curr_connections")-base), "conns")
					})
				}
			}
		})
	}
}

// runCallers runs b.N calls spread over n goroutines, each with its own call from mk.
func runCallers(b *testing.B, n int, mk func() func() error) {
	calls := make([]func() error, n)
	for i := range calls {
		calls[i] = mk()
	}
	var left atomic.Int64
	left.Store(int64(b.N))
	var failed atomic.Value
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	for _, call := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 {
				if err := call(); err != nil {
					failed.CompareAndSwap(nil, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
}
