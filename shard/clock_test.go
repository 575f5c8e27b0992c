package shard

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// waitFor polls cond every millisecond for up to limit.
func waitFor(limit time.Duration, cond func() bool) bool {
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// Unread, the clock parks; parked, it goes stale; the next read still gets the current time and starts
// the ticker again.
func TestCoarseClockParksAndWakes(t *testing.T) {
	c := startCoarseClockParking(5)
	defer c.close()
	if !waitFor(5*time.Second, c.parked.Load) {
		t.Fatal("the clock did not park after 5 unread ticks")
	}
	time.Sleep(100 * time.Millisecond)
	if stale := time.Now().UnixNano() - c.nano.Load(); stale < int64(50*time.Millisecond) {
		t.Fatalf("parked clock still ticking: %v old", time.Duration(stale))
	}
	before := time.Now().UnixNano()
	if got := c.nanos(); got < before {
		t.Fatalf("read of a parked clock returned a time %v old", time.Duration(before-got))
	}
	if !waitFor(5*time.Second, func() bool { return !c.parked.Load() }) {
		t.Fatal("a read did not wake the parked clock")
	}
	c.nanos() // keep it in use for a tick
	first := c.nano.Load()
	if !waitFor(5*time.Second, func() bool { c.nanos(); return c.nano.Load() > first }) {
		t.Fatal("the woken clock does not tick")
	}
}

// The reclaimer's quiet reads get the current time from a parked clock without waking it.
func TestCoarseClockQuietReadsLeaveItParked(t *testing.T) {
	c := startCoarseClockParking(3)
	defer c.close()
	if !waitFor(5*time.Second, c.parked.Load) {
		t.Fatal("the clock did not park")
	}
	for range 5 {
		time.Sleep(20 * time.Millisecond)
		before := time.Now().Unix()
		if got := c.quietSeconds(); got < before {
			t.Fatalf("quiet read returned %d, before it was %d", got, before)
		}
	}
	if !c.parked.Load() {
		t.Fatal("quiet reads woke the clock")
	}
}

// Readers racing with the ticker's parking never see a stale time and never lose a wake-up (run with
// -race). Each reader reads in short bursts with long pauses, so the ticker parks and wakes again and again.
func TestCoarseClockReadersRaceParking(t *testing.T) {
	c := startCoarseClockParking(1) // park after every unread tick: as many park/wake races as possible
	defer c.close()
	// A read may see the last tick's value, late by the ticker's scheduling delay on a loaded machine; a
	// lost wake-up or a missed refresh would show as the whole pause before the read (300 ms or more).
	const slack = 200 * time.Millisecond
	deadline := time.Now().Add(1500 * time.Millisecond)
	var wg sync.WaitGroup
	errs := make(chan time.Duration, 4)
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				time.Sleep(time.Duration(300+r*37) * time.Millisecond)
				for range 100 {
					before := time.Now().UnixNano()
					if got := c.nanos(); before-got > int64(slack) {
						errs <- time.Duration(before - got)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for d := range errs {
		t.Errorf("a read returned a time %v old", d)
	}
}

// Two event loops read a parked clock at the same moment: neither may get the time from before the park
// (the second reader skips touch once the first has set used, so the first must refresh the time before).
// The window is a few instructions wide, so the two readers (this goroutine and one other, on two Ps)
// start together and it takes many rounds to hit. A read may still be up to a tick old (the contract): a
// tick being stored as the readers start.
func TestCoarseClockSimultaneousWake(t *testing.T) {
	c := startCoarseClockParking(1)
	defer c.close()
	read := func() int64 {
		m := int64(math.MaxInt64)
		for range 1000 {
			m = min(m, c.nanos())
		}
		return m
	}
	deadline := time.Now().Add(10 * time.Second)
	for cycle := 0; cycle < 200 && time.Now().Before(deadline); cycle++ {
		if !waitFor(5*time.Second, c.parked.Load) {
			t.Fatal("the clock did not park")
		}
		time.Sleep(2 * clockTick) // the parked time is now at least two ticks old
		var ready, start atomic.Bool
		other := make(chan int64)
		go func() {
			ready.Store(true)
			for !start.Load() { // spin, no yield: both readers must leave at the same instant
			}
			other <- read()
		}()
		for !ready.Load() {
			runtime.Gosched()
		}
		release := time.Now().UnixNano()
		start.Store(true)
		for _, m := range []int64{read(), <-other} {
			if release-m >= int64(clockTick) {
				t.Fatalf("cycle %d: a reader got a time %v older than the wake-up", cycle, time.Duration(release-m))
			}
		}
	}
}
