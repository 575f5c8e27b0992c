package shard

import "github.com/leasecached/leasecached/slab"

// Access bookkeeping: memcached's it->time ("last access", offTime) and ITEM_FETCHED, which the meta
// protocol exposes (mg l and h, me la= and fetch=) and flush_all compares.

// itemUpdateInterval is memcached's ITEM_UPDATE_INTERVAL: do_item_update only moves an item's time
// forward once it is this many seconds old, so hot items do not take the LRU lock on every hit.
const itemUpdateInterval = 60

// bump records a read the way memcached 1.6's segmented LRU does (do_item_bump): the first read only
// marks the item fetched; the next marks it active and moves its last-access time to now. After that a
// read changes nothing until the CLOCK hand (our stand-in for memcached's LRU maintainer moving the item)
// clears the item's CLOCK bit; the read that sets it again moves the time again.
//
// So a read of an item already fetched, active and visited writes nothing, not even a time a second
// newer: its header is on a page of the data directory's file (--data-dir), and a store would dirty the
// page, which the next sync writes back and write-protects, so a read-only load would rewrite everything
// it reads at every sync (see doc/design/restart-costs.md). Without a data directory the same rule keeps
// a hot item's cache line shared between the event loops' CPUs.
func bump(b []byte, now int64) {
	st := b[offState]
	want := st | flagVisited | flagFetched
	if st&flagFetched != 0 {
		want |= flagActive
	}
	if want == st {
		return
	}
	if st&flagFetched != 0 {
		le.PutUint32(b[offTime:], uint32(now))
	}
	b[offState] = want
}

// bumpRead is bump for the item at ref, and notes the read in its page (slab.Allocator.NoteRead): the page's
// last read bounds the last read of an item whose time bump no longer moves (handAge).
func (sh *shard) bumpRead(ref slab.Ref, b []byte, now int64) {
	bump(b, now)
	sh.al.NoteRead(ref, uint32(now))
}

// bumpIdle is memcached's do_item_update, used by writes in place (ma): the last-access time moves
// only when it is older than itemUpdateInterval, and the item is not marked fetched.
func bumpIdle(b []byte, now int64) {
	if int64(itemTime(b)) < now-itemUpdateInterval {
		le.PutUint32(b[offTime:], uint32(now))
	}
	b[offState] |= flagVisited
}

// findForRead is find for the fetch commands: a key found expired or flushed counts in memcached's
// get_expired / get_flushed, as its do_item_get counts them.
func (sh *shard) findForRead(k Hashed, key []byte, now int64) (slab.Ref, []byte) {
	ref, b := sh.findHinted(k, key, now)
	if ref == slab.NilRef {
		sh.countMissCause()
	}
	return ref, b
}
