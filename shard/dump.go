package shard

// Listing the items of one size class (memcached's `stats cachedump <class> <limit>`).
//
// memcached 1.6 dumps only the COLD segment of a class's segmented LRU. Its LRU maintainer keeps the
// newest items in HOT (at most hot_lru_pct of the class's bytes, and only while they are young), items
// read at least twice (ITEM_ACTIVE) in WARM (at most warm_lru_pct of the bytes), and moves everything
// else to COLD within a second or so. So a client sees: an item alone in its class is listed almost at
// once; among many items, the ones read repeatedly are missing, and so are the very newest.
//
// leasecached evicts with CLOCK and has no segments (stats settings says lru_segmented no), but what a
// client can observe of cachedump is that listing, so ColdItems reproduces it from each item's access
// history: an item is "warm" when it has been read twice since it was stored (flagActive, set where
// memcached sets ITEM_ACTIVE) and its time (moved by that read, and by the first read after the CLOCK hand
// passed it: see bump) is among the most recent warmLRUPct of the class's bytes of such items; it is "hot"
// when it was stored in the current second and those items make up at most hotLRUPct of the class's bytes
// (if more, memcached's maintainer would already have pushed the excess to COLD; we then count them all
// cold rather than track store order). Everything else live is cold and listed. memcached's age limits
// (hot_max_factor, warm_max_factor) are not modelled: they act on the scale of the oldest item's age, not
// within the seconds a client looks.
//
// The listing is computed in two bounded passes over the class's pages (the model, then the items),
// dumpBatch chunks per lock hold, so a dump never stalls a shard for long. Items changing between
// batches may be missed or listed in the state of either pass; the order is page order, not LRU order.

import (
	"github.com/leasecached/leasecached/slab"

	"github.com/leasecached/leasecached/protocol"
)

const (
	// dumpBatch is how many chunks a dump inspects per lock hold.
	dumpBatch = 1024
	// hotLRUPct and warmLRUPct are memcached's defaults for the shares of a class's bytes that HOT and
	// WARM may hold (hot_lru_pct, warm_lru_pct).
	hotLRUPct  = 20
	warmLRUPct = 40
	// dumpAgeBuckets is the resolution of the warm model: last-read ages up to this many seconds are
	// told apart, older ones are treated as equally old.
	dumpAgeBuckets = 1024
)

// DumpItem is one listed item. Key aliases item memory: it is valid only during the callback.
type DumpItem struct {
	Key     []byte
	Bytes   int   // value length
	Exptime int64 // absolute unix seconds, 0 = never
}

// coldModel is the outcome of the first pass: which items of the class are not cold.
type coldModel struct {
	warmBuckets int  // active items whose last-read age bucket is below this are warm
	hotAll      bool // unread-twice items stored this second are hot
}

// ColdItems calls fn for each live item of size class id (0-based) that memcached's COLD segment would
// hold (see above), until fn returns false. fn runs under a shard lock: it must be quick and must not
// call the Store.
func (s *Store) ColdItems(id int, fn func(DumpItem) bool) {
	if id < 0 || id >= s.classes.Count() {
		return
	}
	now := s.now()
	var (
		total, hotBytes int64
		warm            [dumpAgeBuckets]int64
	)
	s.visitClass(id, now, func(b []byte) bool {
		n := itemBytes(b)
		total += n
		switch age := now - int64(itemTime(b)); {
		case b[offState]&flagActive != 0:
			warm[min(max(age, 0), dumpAgeBuckets-1)] += n
		case age <= 0:
			hotBytes += n
		}
		return true
	})
	m := coldModel{hotAll: hotBytes*100 <= total*hotLRUPct}
	for cum := int64(0); m.warmBuckets < dumpAgeBuckets; m.warmBuckets++ {
		if cum += warm[m.warmBuckets]; cum*100 > total*warmLRUPct {
			break
		}
	}
	s.visitClass(id, now, func(b []byte) bool {
		if m.notCold(b, now) {
			return true
		}
		return fn(DumpItem{Key: itemKey(b), Bytes: itemVlen(b), Exptime: int64(itemExp(b))})
	})
}

func (m coldModel) notCold(b []byte, now int64) bool {
	age := now - int64(itemTime(b))
	if b[offState]&flagActive != 0 {
		return min(max(age, 0), dumpAgeBuckets-1) < int64(m.warmBuckets)
	}
	return m.hotAll && age <= 0
}

// visitClass calls fn with the head chunk of every live, indexed item of class id in every shard, until
// fn returns false, holding each shard's lock for at most dumpBatch chunks at a time.
func (s *Store) visitClass(id int, now int64, fn func(b []byte) bool) {
	var cur DumpCursor
	s.visitClassFrom(id, now, &cur, fn)
}

// visitClassFrom is visitClass from cur's shard, page and chunk on. It reports whether fn stopped it;
// cur then points just past the chunk fn stopped at, and otherwise past the class's last shard.
func (s *Store) visitClassFrom(id int, now int64, cur *DumpCursor, fn func(b []byte) bool) (stopped bool) {
	for ; cur.shard < len(s.shards); cur.shard, cur.page, cur.off = cur.shard+1, 0, 0 {
		sh := &s.shards[cur.shard]
		for {
			sh.mu.Lock()
			done, stop := sh.visitClassBatch(id, now, &cur.page, &cur.off, fn)
			sh.mu.Unlock()
			if stop {
				return true
			}
			if done {
				break
			}
		}
	}
	return false
}

// visitClassBatch goes on from (page, off) in class id's page list for up to dumpBatch chunks. done: the
// class is exhausted; stop: fn asked to stop. Pages moved or released between batches shift the page
// list: some chunks may then be skipped or seen twice, never touched outside the class.
func (sh *shard) visitClassBatch(id int, now int64, page, off *int, fn func(b []byte) bool) (done, stop bool) {
	for budget := dumpBatch; budget > 0; {
		if *page >= sh.al.Pages(id) {
			return true, false
		}
		first, size, n := sh.al.PageChunks(sh.al.PageAt(id, *page))
		for ; *off < n && budget > 0; *off, budget = *off+1, budget-1 {
			b := sh.chunk(first + slab.Ref(*off*size))
			if b[offState]&kindMask != kindHead || b[offState]&(flagGhost|flagPinned) != 0 || sh.st.dead(b, now) != causeNone {
				continue
			}
			if !fn(b) {
				*off++ // past b: a dump that goes on from here (visitClassFrom) does not repeat it
				return false, true
			}
		}
		if *off >= n {
			*page, *off = *page+1, 0
		}
	}
	return false, false
}

// MetadumpItem is one item of memcached's `lru_crawler metadump`, in memcached's terms (its slab class and
// item size, as `me` reports them). Key aliases item memory: it is valid only during the callback.
type MetadumpItem struct {
	Key        []byte
	Exptime    int64 // absolute unix seconds, 0 = never
	LastAccess int64 // absolute unix seconds
	Cas        uint64
	Fetched    bool
	Class      int // memcached's class id for this item
	Size       int // memcached's total item size
	KeyBinary  bool
}

// AllItems calls fn for every live item, class by class in page order, until fn returns false: memcached's
// `lru_crawler metadump all` (which walks every LRU). Locking is ColdItems': each shard lock is held for
// at most dumpBatch chunks, fn runs under it and must be quick and must not call the Store.
func (s *Store) AllItems(fn func(MetadumpItem) bool) {
	var cur DumpCursor
	s.AllItemsFrom(&cur, fn)
}

// DumpCursor is where AllItemsFrom stopped, to go on from there in a later call; the zero value is the
// start. Items stored, moved or removed between calls may be missed or seen twice, as between AllItems'
// batches.
type DumpCursor struct{ class, shard, page, off int }

// AllItemsFrom is AllItems from cur on. It reports whether every item has been visited; when fn stops
// it, cur points just past the item fn stopped at.
func (s *Store) AllItemsFrom(cur *DumpCursor, fn func(MetadumpItem) bool) (done bool) {
	now := s.now()
	for ; cur.class < s.classes.Count(); cur.class, cur.shard, cur.page, cur.off = cur.class+1, 0, 0, 0 {
		stopped := s.visitClassFrom(cur.class, now, cur, func(b []byte) bool {
			size := protocol.ItemSize(itemKlen(b), itemVlen(b), itemFlags(b))
			return fn(MetadumpItem{
				Key:        itemKey(b),
				Exptime:    int64(itemExp(b)),
				LastAccess: int64(itemTime(b)),
				Cas:        itemCas(b),
				Fetched:    b[offState]&flagFetched != 0,
				Class:      mcClassOf(size),
				Size:       size,
				KeyBinary:  itemMeta(b)&metaKeyBinary != 0,
			})
		})
		if stopped {
			return false
		}
	}
	return true
}

// ReclaimExpired runs one background-reclaimer pass over every shard now: memcached's `lru_crawler crawl`.
func (s *Store) ReclaimExpired() {
	for i := range s.shards {
		s.shards[i].reclaim(s.now(), reclaimChunksPerTick)
	}
}
