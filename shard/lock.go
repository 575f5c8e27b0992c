package shard

import (
	"sync"
	"time"
)

// lockSpin is how long a contended shard lock is retried before its caller parks.
//
// The rule: spin (retrying TryLock) for up to 50 us, then park. Shard critical sections last well under a
// microsecond, so an event loop that finds a shard locked by the other loop nearly always gets it within a
// few retries, and sync.Mutex's own spin (a few hundred cycles) gives up too soon when the holder was
// descheduled for a moment. Parking is what costs: event loops are locked to their OS threads (server.Run),
// so a parked loop is woken by two thread hand-offs, and every connection it serves waits meanwhile.
// Spinning longer would burn a core behind a holder the kernel has preempted. The measurements are in
// doc/design/event-loop.md, rule 6.
const lockSpin = 50 * time.Microsecond

// spinChecks is how many failed attempts pass between two reads of the clock while spinning.
const spinChecks = 64

// shardLock is a sync.Mutex whose contended Lock retries for up to lockSpin before it parks.
type shardLock struct{ m sync.Mutex }

// Lock takes the lock.
func (l *shardLock) Lock() {
	if !l.m.TryLock() {
		l.lockSlow()
	}
}

func (l *shardLock) lockSlow() {
	var deadline time.Time
	for i := 1; ; i++ {
		if l.m.TryLock() {
			return
		}
		if i%spinChecks == 0 {
			now := time.Now()
			if deadline.IsZero() {
				deadline = now.Add(lockSpin)
			} else if now.After(deadline) {
				break
			}
		}
	}
	l.m.Lock()
}

// Unlock releases the lock.
func (l *shardLock) Unlock() { l.m.Unlock() }
