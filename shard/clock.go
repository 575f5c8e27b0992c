package shard

import (
	"sync/atomic"
	"time"
)

// clockTick is the resolution of the store's default clock. Item times are whole seconds (memcached's own
// clock ticks once a second) and lease windows are seconds long, so 10 ms is far finer than any rule needs,
// while reading the clock becomes an atomic load instead of a vDSO call on every operation (about 4% of
// the server's CPU at pipeline 16) and an idle daemon wakes 100 times a second, not 1000.
const clockTick = 10 * time.Millisecond

// coarseClock is a wall clock refreshed every clockTick by one goroutine.
type coarseClock struct {
	nano atomic.Int64
	stop chan struct{}
	done chan struct{}
}

func startCoarseClock() *coarseClock {
	c := &coarseClock{stop: make(chan struct{}), done: make(chan struct{})}
	c.nano.Store(time.Now().UnixNano())
	go func() {
		defer close(c.done)
		t := time.NewTicker(clockTick)
		defer t.Stop()
		for {
			select {
			case <-c.stop:
				return
			case now := <-t.C:
				c.nano.Store(now.UnixNano())
			}
		}
	}()
	return c
}

func (c *coarseClock) seconds() int64 { return c.nano.Load() / int64(time.Second) }
func (c *coarseClock) nanos() int64   { return c.nano.Load() }

func (c *coarseClock) close() {
	close(c.stop)
	<-c.done
}

// Now is the store's clock in unix seconds: what item times are measured against. The server uses it for
// its own per-request timestamps so that the hot path reads the clock as cheaply as the store does.
func (s *Store) Now() int64 { return s.now() }
