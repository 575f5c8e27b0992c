package shard

import (
	"sync/atomic"
	"time"
)

// clockTick is the resolution of the store's default clock. Item times are whole seconds (memcached's own
// clock ticks once a second) and lease windows are seconds long, so 10 ms is far finer than any rule needs,
// while reading the clock becomes an atomic load instead of a vDSO call on every operation (about 4% of
// the server's CPU at pipeline 16).
const clockTick = 10 * time.Millisecond

// clockParkAfter is how many ticks without a single read of the clock make its goroutine stop ticking.
// A ticking clock wakes an idle daemon 100 times a second, and each wake-up costs the Go scheduler
// several context switches (about 400 a second in all, against memcached's handful); a parked one costs
// nothing until the next read.
const clockParkAfter = 100

// coarseClock is a wall clock refreshed every clockTick by one goroutine while anyone reads it.
//
// Readers pay one extra atomic load for the parking: used. The ticker clears it on every tick; the first
// read after that sets it again (one write per tick, not per read, so the cache line stays shared between
// event loops). clockParkAfter ticks in a row with used still clear park the ticker. A read that finds
// used clear refreshes the time itself, and wakes the ticker if it is parked, so no read ever sees a time
// older than about one tick.
type coarseClock struct {
	parkAfter int // clockParkAfter; shorter in tests
	nano      atomic.Int64
	sec       atomic.Int64 // nano in whole seconds, kept beside it so that a read divides nothing
	used      atomic.Bool
	parked    atomic.Bool
	wake      chan struct{} // capacity 1: a wake-up sent before the ticker waits is not lost
	stop      chan struct{}
	done      chan struct{}
}

func startCoarseClock() *coarseClock { return startCoarseClockParking(clockParkAfter) }

func startCoarseClockParking(after int) *coarseClock {
	c := &coarseClock{parkAfter: after, wake: make(chan struct{}, 1), stop: make(chan struct{}),
		done: make(chan struct{})}
	c.set(time.Now().UnixNano())
	c.used.Store(true)
	go c.run()
	return c
}

func (c *coarseClock) run() {
	defer close(c.done)
	t := time.NewTicker(clockTick)
	defer t.Stop()
	idle := 0
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			// The time now, not the tick's scheduled time: a late tick must not move the clock back past
			// what a reader's touch stored meanwhile.
			c.set(time.Now().UnixNano())
			if c.used.Swap(false) {
				idle = 0
				continue
			}
			if idle++; idle < c.parkAfter {
				continue
			}
		}
		// Park. Setting parked before the last look at used pairs with touch, which sets used before it
		// looks at parked: whichever runs second sees the other's write, so a read cannot slip between
		// them unnoticed.
		t.Stop()
		c.parked.Store(true)
		if c.used.Load() {
			select {
			case <-c.wake: // the reader that set used may have sent one already; drop it
			default: // or it sends later: the next park then ends at once and ticks one more round, harmless
			}
		} else {
			select {
			case <-c.stop:
				return
			case <-c.wake:
			}
		}
		c.parked.Store(false)
		c.set(time.Now().UnixNano())
		t.Reset(clockTick)
		idle = 0
	}
}

// touch is the slow path of a read: the first read since the last tick. It refreshes the time before it
// sets used: another reader that sees used set skips touch and reads nano at once, so nano must already be
// current then, or that reader could get the time from before a long park.
func (c *coarseClock) touch() {
	c.set(time.Now().UnixNano())
	c.used.Store(true)
	if c.parked.Load() {
		select {
		case c.wake <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
}

func (c *coarseClock) nanos() int64 {
	if !c.used.Load() {
		c.touch()
	}
	return c.nano.Load()
}

func (c *coarseClock) seconds() int64 {
	if !c.used.Load() {
		c.touch()
	}
	return c.sec.Load()
}

// set moves the clock to t (unix nanoseconds).
func (c *coarseClock) set(t int64) {
	c.nano.Store(t)
	c.sec.Store(t / int64(time.Second))
}

// quietSeconds is seconds for a periodic background reader (the reclaimer): it does not count as a use, so
// a reader that wakes once a second does not keep the ticker running 100 times a second. While the
// ticker is parked it reads the time itself.
func (c *coarseClock) quietSeconds() int64 {
	if c.parked.Load() {
		c.set(time.Now().UnixNano())
	}
	return c.sec.Load()
}

func (c *coarseClock) close() {
	close(c.stop)
	<-c.done
}

// Now is the store's clock in unix seconds: what item times are measured against. The server uses it for
// its own per-request timestamps so that the hot path reads the clock as cheaply as the store does.
func (s *Store) Now() int64 { return s.now() }

// NowNano is the store's clock in unix nanoseconds (as coarse as its ticks): the lease clock, which the
// server's hot-key windows read too, on sampled requests only.
func (s *Store) NowNano() int64 { return s.nowNano() }

func (s *Store) now() int64 {
	if c := s.clock; c != nil {
		return c.seconds()
	}
	return s.nowFn()
}
