package shard

import (
	"github.com/leasecached/leasecached/lease"
	"github.com/leasecached/leasecached/slab"
)

// shardStats are one shard's counters (guarded by the shard lock).
type shardStats struct {
	currItems        int64
	bytes            int64
	evictions        uint64
	reclaimed        uint64
	expiredUnfetched uint64
	evictedUnfetched uint64
	crawlerReclaimed uint64
	slabsMoved       uint64
	getExpired       uint64
	getFlushed       uint64
	staleItems       int64 // ghosts held for lease-get
	crawlerChecked   uint64
	crawlerStarts    uint64
	directReclaims   uint64
}

// classStats are one size class's item counters within a shard.
type classStats struct {
	number           int64
	memRequested     int64
	evicted          uint64
	evictedNonzero   uint64
	evictedUnfetched uint64
	evictedTime      int64
	reclaimed        uint64
	expiredUnfetched uint64
	crawlerReclaimed uint64
	outOfMemory      uint64
	oldest           uint32 // oldest store time seen by the last reclaimer pass
	evictsSinceCheck uint32 // live items evicted since the last rebalance check (rebalance.go)
	pagesGained      uint64 // pages the rebalancer moved into this class
	emptyLook        int64  // when this class last looked for an empty page and found none (emptypage.go)
	emptyScan        int64  // when this class's pages were last read through for an empty one, finding none
	rescued          uint64 // items page moves kept by moving them to another chunk (drain.go)
}

// Stats is a snapshot of the store, summed over shards, with the fields
// memcached's "stats", "stats slabs" and "stats items" need.
type Stats struct {
	CurrItems        int64
	TotalItems       uint64
	Bytes            int64 // header+key+value of the items stored
	Evictions        uint64
	Reclaimed        uint64 // dead items whose memory was reused by a store
	ExpiredUnfetched uint64
	EvictedUnfetched uint64
	CrawlerReclaimed uint64 // dead items freed by the background reclaimer
	SlabsMoved       uint64
	SlabRescues      uint64 // items page moves kept by moving them within their class (memcached's slab_reassign_rescues)
	GetExpired       uint64 // fetches that found the key expired
	GetFlushed       uint64 // fetches that found the key flushed by flush_all
	StaleItems       int64  // deleted/expired values kept for lease-get (not in CurrItems)
	Leases           lease.Counters
	LeasesHeld       int // lease table entries, lapsed ones not yet swept included
	LimitMaxbytes    int64
	HashBytes        int64
	TotalMalloced    int64  // pages taken * page size
	HugePageBytes    int64  // item memory moved onto huge pages by the reclaimer (slab's Collapse)
	PagePool         int    // pages not yet given to any class (memcached's slab_global_page_pool)
	CrawlerChecked   uint64 // items the background reclaimer looked at
	CrawlerStarts    uint64 // background reclaimer passes started
	DirectReclaims   uint64 // stores that had to reclaim or evict an item to get memory
	Shards           int
	Classes          []ClassStats // one per size class, ascending; callers skip empty ones
}

// ClassStats is one size class summed over shards.
type ClassStats struct {
	ID               int // memcached-style class number, starting at 1
	ChunkSize        int
	ChunksPerPage    int
	TotalPages       int
	TotalChunks      int
	UsedChunks       int
	FreeChunks       int
	FreeChunksEnd    int
	MemRequested     int64
	Number           int64 // items whose first chunk is in this class
	Age              int64 // seconds since the oldest item's store (as of the last reclaimer pass)
	Evicted          uint64
	EvictedNonzero   uint64
	EvictedUnfetched uint64
	EvictedTime      int64 // seconds since the last evicted item was stored
	Reclaimed        uint64
	ExpiredUnfetched uint64
	CrawlerReclaimed uint64
	OutOfMemory      uint64
}

// Stats takes each shard's lock in turn: a consistent snapshot per shard.
func (s *Store) Stats() Stats {
	now := s.now()
	out := Stats{
		LimitMaxbytes: s.limit.Load(),
		TotalMalloced: int64(s.arena.PagesTaken()) * slab.PageSize,
		HugePageBytes: s.arena.HugeBytes(),
		PagePool:      max(s.arena.MaxPages()-s.arena.PagesTaken(), 0),
		Shards:        len(s.shards),
		Classes:       make([]ClassStats, s.classes.Count()),
	}
	for id := range out.Classes {
		out.Classes[id] = ClassStats{ID: id + 1, ChunkSize: s.classes.Size(id), ChunksPerPage: s.classes.PerPage(id)}
	}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		st := &sh.stats
		out.CurrItems += st.currItems
		out.TotalItems += sh.totalItems
		out.Bytes += st.bytes
		out.Evictions += st.evictions
		out.Reclaimed += st.reclaimed
		out.ExpiredUnfetched += st.expiredUnfetched
		out.EvictedUnfetched += st.evictedUnfetched
		out.CrawlerReclaimed += st.crawlerReclaimed
		out.SlabsMoved += st.slabsMoved
		out.GetExpired += st.getExpired
		out.GetFlushed += st.getFlushed
		out.StaleItems += st.staleItems
		out.CrawlerChecked += st.crawlerChecked
		out.CrawlerStarts += st.crawlerStarts
		out.DirectReclaims += st.directReclaims
		out.Leases.Add(sh.leases.Counters)
		out.LeasesHeld += sh.leases.Len()
		out.HashBytes += sh.idx.bytes()
		for id := range out.Classes {
			c, a, o := &sh.cls[id], sh.al.Stats(id), &out.Classes[id]
			o.TotalPages += a.Pages
			o.TotalChunks += a.TotalChunks
			o.UsedChunks += a.UsedChunks
			o.FreeChunks += a.FreeChunks
			o.FreeChunksEnd += a.FreeChunksEnd
			o.MemRequested += c.memRequested
			o.Number += c.number
			if c.number > 0 && c.oldest != 0 {
				o.Age = max(o.Age, now-int64(c.oldest))
			}
			o.Evicted += c.evicted
			o.EvictedNonzero += c.evictedNonzero
			o.EvictedUnfetched += c.evictedUnfetched
			o.EvictedTime = max(o.EvictedTime, c.evictedTime)
			o.Reclaimed += c.reclaimed
			o.ExpiredUnfetched += c.expiredUnfetched
			o.CrawlerReclaimed += c.crawlerReclaimed
			o.OutOfMemory += c.outOfMemory
			out.SlabRescues += c.rescued
		}
		sh.mu.Unlock()
	}
	return out
}

// ResetStats zeroes the event counters (memcached "stats reset"); gauges
// such as curr_items and bytes are kept.
func (s *Store) ResetStats() {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.stats = shardStats{currItems: sh.stats.currItems, bytes: sh.stats.bytes, staleItems: sh.stats.staleItems}
		sh.totalItems = 0
		sh.leases.Counters = lease.Counters{}
		for id := range sh.cls {
			c := &sh.cls[id]
			*c = classStats{number: c.number, memRequested: c.memRequested, oldest: c.oldest}
		}
		sh.mu.Unlock()
	}
}
