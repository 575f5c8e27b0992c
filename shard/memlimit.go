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
	if _, err := slab.LimitPages(arenaBytes); err != nil {
		return fmt.Errorf("shard: %w", err)
	}
	s.waitOpened() // the arena's pages are still being adopted
	s.limitMu.Lock()
	defer s.limitMu.Unlock()
	if err := s.arena.SetLimit(arenaBytes); err != nil {
		return fmt.Errorf("shard: %w", err)
	}
	s.limit.Store(limit)
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.share = byteShare(arenaBytes, len(s.shards), i)
		sh.fitShare()
		sh.mu.Unlock()
	}
	return nil
}

// MemoryLimit is the current memory limit in bytes.
func (s *Store) MemoryLimit() int64 { return s.limit.Load() }

// byteShare is shard i's share of the arena's bytes among n shards: its pageShare of the whole pages plus
// an equal part of the bytes beyond them (room for its hash tables before they cost it a page).
func byteShare(arenaBytes int64, n, i int) int64 {
	pages := arenaBytes / slab.PageSize
	return int64(pageShare(int(pages), n, i))*slab.PageSize + (arenaBytes-pages*slab.PageSize)/int64(n)
}

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

// Hash tables count against the memory limit. A shard's pages and its two hash tables (items and stale
// values) share its byteShare: when a table grows, the shard may own fewer pages, and gives back the
// pages it then holds over (evicting their items: evictions are counted as any other) right away for the
// item index, within a reclaimer tick for the small stale-value index. While a table is rebuilt the old
// one is still mapped: the transient peak is one shard's old table (under 1% of its share at -m 1024).

// fitShare recomputes how many pages the shard may own: its share less its hash tables, at most its
// roomShare when it has one, at least one.
func (sh *shard) fitShare() {
	tables := sh.idx.bytes() + sh.ghosts.bytes()
	pages := int((sh.share - tables) / slab.PageSize)
	if sh.roomShare > 0 {
		pages = min(pages, sh.roomShare)
	}
	sh.al.SetMaxPages(max(pages, 1))
}

// roomSlack is the pages of a data directory's free room that fitRoom leaves out: the page records and
// moved bits new pages need, and rounding.
const roomSlack = 2

// fitRoom keeps the shards' page allowances within the room of the file system that holds the mapped
// items file (the live copy's tmpfs, or the data directory's own): a page taken beyond that room is
// refused (slab.ErrPageRefused), and a shard whose pages went to others as the room ran out answered
// stores with out of memory instead of evicting (doc/design/restart-costs.md, "File systems"). The room
// is the pages in use plus what the file system has free, split among the shards as the memory limit
// is (pageShare, which leaves every shard a page even when the room has fewer); the shards over their part
// give pages back through the reclaimer, as after cache_memlimit. A file system that tells no size
// (slab.Backing.RoomPages) is not kept within. It runs once the restart has indexed everything, then
// every reclaimer tick.
func (s *Store) fitRoom() {
	if s.persist == nil {
		return
	}
	select {
	case <-s.persist.opened:
	default:
		return // the items file may not be the one mapped yet
	}
	free := s.arena.RoomPages()
	if free < 0 {
		return
	}
	pages := max(s.arena.PagesTaken()+free-roomSlack, 1)
	s.limitMu.Lock()
	defer s.limitMu.Unlock()
	if pages >= s.arena.MaxPages() {
		pages = 0 // room for the memory limit: its shares alone
	}
	if pages == s.roomPages || pages > 0 && s.roomPages > 0 && max(pages-s.roomPages, s.roomPages-pages) <= roomSlack {
		return // a page taken between the two reads above, not a change of room
	}
	s.shareRoom(pages, true)
}

// shareRoom splits pages, the room fitRoom found (0: none short of the memory limit), among the shards,
// each under its lock when lock is set. The caller holds limitMu, or has the store to itself (New).
func (s *Store) shareRoom(pages int, lock bool) {
	s.roomPages = pages
	for i := range s.shards {
		sh := &s.shards[i]
		if lock {
			sh.mu.Lock()
		}
		sh.roomShare = 0
		if pages > 0 {
			sh.roomShare = pageShare(pages, len(s.shards), i)
		}
		sh.fitShare()
		if lock {
			sh.mu.Unlock()
		}
	}
}

// indexGrew pays for a bigger item index: the shard's page allowance shrinks and the pages over it are
// released now, never the one holding keep (the item just indexed, which the caller still uses).
func (sh *shard) indexGrew(keep slab.Ref, now int64) {
	sh.fitShare()
	if sh.al.HeldPages() <= sh.al.MaxPages() {
		return
	}
	b := sh.chunk(keep)
	pinned := b[offState] & flagPinned
	b[offState] |= flagPinned
	for sh.al.HeldPages() > sh.al.MaxPages() && sh.releasePage(now) {
	}
	b[offState] = b[offState]&^flagPinned | pinned
}

// Index shrinking: after a workload moves to bigger items, far fewer items fit and most of the table is
// empty slots; the reclaimer rebuilds a table below indexShrinkBelow of load at indexShrinkTo, and the
// bytes saved go back to pages.
const (
	indexShrinkBelowPct = 25
	indexShrinkToPct    = 75
)

// shrinkIndexes rebuilds underused hash tables smaller (under the shard lock).
func (sh *shard) shrinkIndexes() {
	shrunk := false
	for _, x := range []*index{&sh.idx, &sh.ghosts} {
		floor := uint64(indexInitialSlots)
		if x == &sh.ghosts {
			floor = ghostIndexInitialSlots
		}
		if x.n > floor && uint64(x.count)*100 < x.n*indexShrinkBelowPct {
			x.resize(max(uint64(x.count)*100/indexShrinkToPct, floor), sh.hashOf)
			shrunk = true
		}
	}
	if shrunk {
		sh.fitShare()
	}
}

// releaseExcess gives back up to budget pages this shard holds over its share, each from the class with
// the most pages (memcached's automover also takes from the biggest), skipping pages with a pinned item.
// It also shrinks underused tables and unmaps retired ones (freeRetired).
func (sh *shard) releaseExcess(now int64, budget int) {
	sh.mu.Lock()
	sh.shrinkIndexes()
	sh.freeRetired()
	sh.mu.Unlock()
	for range budget {
		sh.mu.Lock()
		ok := sh.al.HeldPages() > sh.al.MaxPages() && sh.releasePage(now)
		sh.mu.Unlock()
		if !ok {
			return
		}
	}
}

// releasePage drains one page (drain.go: its hot items move to the class's other pages, the rest are
// evicted) and returns it to the arena; false if no page could go.
func (sh *shard) releasePage(now int64) bool {
	// A page that holds no item goes first: giving it back costs no item (emptypage.go).
	if p, ok := sh.emptyPage(-1, now); ok && sh.al.ReleasePage(p) == nil {
		sh.stats.slabsMoved++
		return true
	}
	moved, ok := sh.drainVictimPage(-1, now, true)
	if !ok {
		return false
	}
	sh.endDrain(-1, moved) // parked, it goes back at the next sync (drain.go)
	sh.stats.slabsMoved++
	return true
}
