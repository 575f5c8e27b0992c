package shard

import (
	"time"

	"github.com/leasecached/leasecached/slab"
)

const (
	// reclaimChunksPerTick bounds the chunks one reclaimer tick inspects per
	// shard: a full pass over a shard of N chunks takes N/this ticks.
	reclaimChunksPerTick = 1 << 16
	// reclaimBatch is how many chunks are inspected per lock hold, so the reclaimer never stalls requests
	// for long: each chunk can be a cache miss (about 0.1 us on the benchmark VM), so 64 of them stay well
	// inside the time an event loop spins on a taken shard lock before it parks (lockSpin).
	reclaimBatch = 64
	// maxReclaimWait bounds the background reclaimer's back-off, in ticks (seconds by default): a shard whose
	// passes find almost nothing dead is walked at least this often. memcached's LRU crawler backs off the
	// same way when its crawls reclaim little.
	maxReclaimWait = 64
	// reclaimWorthPercent is the share of dead items a pass must find for the next pass to follow at once.
	reclaimWorthPercent = 1
)

// passCount is what one reclaimer pass over a shard saw.
type passCount struct{ checked, reclaimed uint64 }

// passWait is how many ticks to wait after a pass that saw c, given the wait before it. A pass that frees
// little doubles the wait: walking every chunk each second costs a cache miss per item (about 1.5% of the
// server's CPU under load in profiles) for nothing when items rarely expire. Expired items are still freed
// on access and by eviction in between.
func passWait(c passCount, prev int) int {
	if c.checked > 0 && c.reclaimed*100 >= c.checked*reclaimWorthPercent {
		return 1
	}
	return min(max(prev, 1)*2, maxReclaimWait)
}

// reclaimLoop runs a tick every period. While regions of item memory wait to move onto huge pages, it also
// moves one more every period/slab.CollapseCallsPerTick, so that the event loops meet one collapse at a
// time rather than a burst of them at the start of each tick; an idle store is woken only by the ticks.
func (s *Store) reclaimLoop(every time.Duration) {
	defer close(s.done)
	t := time.NewTicker(every)
	defer t.Stop()
	spread := time.NewTimer(every)
	spread.Stop()
	defer spread.Stop()
	for {
		var moved int
		select {
		case <-s.stop:
			return
		case <-t.C:
			moved = s.tick(true)
		case <-spread.C:
			moved = s.arena.Collapse()
		}
		if moved > 0 {
			spread.Reset(every / slab.CollapseCallsPerTick)
		}
	}
}

// reclaimTick walks a bounded slice of every shard, freeing dead items, gives back pages a shard holds
// over its share after the memory limit was lowered, and moves full regions onto huge pages.
func (s *Store) reclaimTick() { s.tick(false) }

// tick is one reclaimer tick over every shard. With backoff (the background loop), a shard's pass only
// starts once its wait is over; the wait state belongs to the background goroutine alone.
func (s *Store) tick(backoff bool) (collapsed int) {
	now := s.reclaimNow()
	s.fitRoom()
	for i := range s.shards {
		select {
		case <-s.stop:
			return 0
		default:
		}
		sh := &s.shards[i]
		switch {
		case !backoff:
			sh.reclaim(now, reclaimChunksPerTick)
		case sh.reclaimMid || sh.reclaimIdle+1 >= sh.reclaimWait:
			pass, ended := sh.reclaim(now, reclaimChunksPerTick)
			if ended {
				sh.reclaimWait = passWait(pass, sh.reclaimWait)
			}
			sh.reclaimMid, sh.reclaimIdle = !ended, 0
		default:
			sh.reclaimIdle++
		}
		sh.releaseExcess(now, releasePagesPerTick)
	}
	// Regions of item memory that filled since the last tick move onto huge pages (slab/collapse.go): here,
	// off the event loops, because each takes the kernel a few milliseconds.
	return s.arena.Collapse()
}

// reclaim drops lapsed leases and inspects up to budget chunks from the
// shard's reclaim cursor, unlinking expired or flushed items. It also measures each class's oldest
// live item over a full pass (stats "age"). When a pass ends it returns
// what the pass saw.
func (sh *shard) reclaim(now int64, budget int) (pass passCount, ended bool) {
	// Lapsed leases go too, a bounded number per tick, so their bookkeeping is given back when their
	// window passes (doc/leases.md rule 5), not only when the table needs room.
	sh.mu.Lock()
	sh.leases.Sweep(sh.st.nowNano())
	sh.mu.Unlock()
	for budget > 0 {
		sh.mu.Lock()
		for n := 0; n < reclaimBatch && budget > 0; n++ {
			budget--
			r := sh.al.Next(&sh.reclaimCur)
			if r == slab.NilRef {
				pass = sh.endReclaimPass()
				sh.mu.Unlock()
				return pass, true // one pass per tick at most
			}
			b := sh.chunk(r)
			if b[offState]&kindMask != kindHead || b[offState]&flagPinned != 0 {
				continue
			}
			sh.stats.crawlerChecked++
			sh.reclaimPass.checked++
			if why := sh.st.dead(b, now); why != causeNone {
				sh.stats.crawlerReclaimed++
				sh.reclaimPass.reclaimed++
				sh.cls[sh.al.ClassOf(r)].crawlerReclaimed++
				sh.unlink(r, why, now)
				continue
			}
			id := sh.al.ClassOf(r)
			if t := itemTime(b); sh.reclaimOldest[id] == 0 || t < sh.reclaimOldest[id] {
				sh.reclaimOldest[id] = t
			}
		}
		sh.mu.Unlock()
	}
	return passCount{}, false
}

func (sh *shard) endReclaimPass() passCount {
	pass := sh.reclaimPass
	sh.reclaimPass = passCount{}
	sh.stats.crawlerStarts++
	for id, t := range sh.reclaimOldest {
		sh.cls[id].oldest = t
		sh.reclaimOldest[id] = 0
	}
	return pass
}
