package shard

import (
	"fmt"

	"github.com/leasecached/leasecached/slab"
)

// Changing the memory limit at run time (memcached's cache_memlimit).
//
// The new limit is split as at start (splitMemory): the arena's page budget changes at once and every
// shard's share is recomputed from it with the rule New uses, under each shard's lock. Raising the limit
// lets shards take more pages from then on. Lowering it stops new pages beyond the new shares at once;
// pages already held over a share are given back gradually by the reclaimer (releasePagesPerTick per
// shard per tick, evicting their items first), the way memcached's slab rebalancer returns pages to the
// global pool and frees them once over the limit. The lease bookkeeping budget keeps its size from start.

// releasePagesPerTick bounds the pages one shard gives back per reclaimer tick after the limit is
// lowered: each release evicts up to a page of items under the shard lock, so a big cut is spread out.
const releasePagesPerTick = 8

// SetMemoryLimit changes the memory limit to limit bytes. It fails, changing nothing, when the limit is
// below the largest item (-I) or beyond the pages a Ref can address.
func (s *Store) SetMemoryLimit(limit int64) error {
	if limit < int64(s.maxItemSize) {
		return fmt.Errorf("shard: memory limit %d is below the max item size %d", limit, s.maxItemSize)
	}
	arenaBytes, _ := splitMemory(limit)
	pages, err := slab.LimitPages(arenaBytes)
	if err != nil {
		return fmt.Errorf("shard: %w", err)
	}
	s.limitMu.Lock()
	defer s.limitMu.Unlock()
	if err := s.arena.SetLimit(arenaBytes); err != nil {
		return fmt.Errorf("shard: %w", err)
	}
	s.limit.Store(limit)
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.al.SetMaxPages(pageShare(pages, len(s.shards), i))
		sh.mu.Unlock()
	}
	return nil
}

// MemoryLimit is the current memory limit in bytes.
func (s *Store) MemoryLimit() int64 { return s.limit.Load() }

// pageShare is shard i's share of pages among n shards: an equal split, the remainder spread over the
// first shards, and never less than one page so that every shard can store something (the arena's budget
// still bounds the total). Shards never lend pages to each other, so without shares one shard's early
// burst could starve another for good.
func pageShare(pages, n, i int) int {
	share := pages / n
	if i < pages%n {
		share++
	}
	return max(share, 1)
}

// releaseExcess gives back up to budget pages this shard holds over its share, each from the class with
// the most pages (memcached's automover also takes from the biggest), skipping pages with a pinned item.
func (sh *shard) releaseExcess(now int64, budget int) {
	for range budget {
		sh.mu.Lock()
		ok := sh.al.OwnedPages() > sh.al.MaxPages() && sh.releasePage(now)
		sh.mu.Unlock()
		if !ok {
			return
		}
	}
}

// releasePage evicts one page's items and returns the page to the arena; false if no page could go.
func (sh *shard) releasePage(now int64) bool {
	n := sh.st.classes.Count()
	var tried [slab.MaxClasses]bool
	for range n {
		victim, most := -1, 0
		for id := range n {
			if p := sh.al.Pages(id); !tried[id] && p > most {
				victim, most = id, p
			}
		}
		if victim < 0 {
			return false
		}
		tried[victim] = true
		for i := range most {
			p := sh.al.PageAt(victim, i)
			if sh.pagePinned(p) {
				continue
			}
			sh.evictPage(p, now)
			if err := sh.al.ReleasePage(p); err != nil {
				panic("shard: " + err.Error()) // evictPage left a used chunk: broken invariant
			}
			sh.stats.slabsMoved++
			return true
		}
	}
	return false
}
