package shard

import (
	"time"

	"github.com/leasecached/leasecached/slab"
)

const (
	// reclaimChunksPerTick bounds the chunks one reclaimer tick inspects per
	// shard: a full pass over a shard of N chunks takes N/this ticks.
	reclaimChunksPerTick = 1 << 16
	// reclaimBatch is how many chunks are inspected per lock hold, so the
	// reclaimer never stalls requests for long.
	reclaimBatch = 512
)

func (s *Store) reclaimLoop(every time.Duration) {
	defer close(s.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.reclaimTick()
		}
	}
}

// reclaimTick walks a bounded slice of every shard, freeing dead items, and gives back pages a shard
// holds over its share after the memory limit was lowered.
func (s *Store) reclaimTick() {
	for i := range s.shards {
		select {
		case <-s.stop:
			return
		default:
		}
		s.shards[i].reclaim(s.now(), reclaimChunksPerTick)
		s.shards[i].releaseExcess(s.now(), releasePagesPerTick)
	}
}

// reclaim inspects up to budget chunks from the shard's reclaim cursor,
// unlinking expired or flushed items. It also measures each class's oldest
// live item over a full pass (stats "age").
func (sh *shard) reclaim(now int64, budget int) {
	for budget > 0 {
		sh.mu.Lock()
		for n := 0; n < reclaimBatch && budget > 0; n++ {
			budget--
			r := sh.al.Next(&sh.reclaimCur)
			if r == slab.NilRef {
				sh.endReclaimPass()
				sh.mu.Unlock()
				return // one pass per tick at most
			}
			b := sh.chunk(r)
			if b[offState]&kindMask != kindHead || b[offState]&flagPinned != 0 {
				continue
			}
			sh.stats.crawlerChecked++
			if why := sh.st.dead(b, now); why != causeNone {
				sh.stats.crawlerReclaimed++
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
}

func (sh *shard) endReclaimPass() {
	sh.stats.crawlerStarts++
	for id, t := range sh.reclaimOldest {
		sh.cls[id].oldest = t
		sh.reclaimOldest[id] = 0
	}
}
