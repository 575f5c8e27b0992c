package shard

import "github.com/leasecached/leasecached/slab"

// Access bookkeeping: memcached's it->time ("last access", offTime) and ITEM_FETCHED, which the meta
// protocol exposes (mg l and h, me la= and fetch=) and flush_all compares.

// itemUpdateInterval is memcached's ITEM_UPDATE_INTERVAL: do_item_update only moves an item's time
// forward once it is this many seconds old, so hot items do not take the LRU lock on every hit.
const itemUpdateInterval = 60

// bump records a read the way memcached 1.6's segmented LRU does (do_item_bump): the first read only
// marks the item fetched; a read of an already fetched item moves its last-access time to now and marks
// it active.
// It also sets the CLOCK bit, our stand-in for memcached's LRU position.
//
// Bytes that already hold the value are not written again: a hot item is read from both event loops'
// CPUs, and a store to its header, even of the same value, takes the cache line away from the other CPU,
// whose next read of the item then misses. Item times are in seconds, so a hot item is written about
// once a second (and when the CLOCK hand clears its bit), not on every read.
func bump(b []byte, now int64) {
	st := b[offState]
	if st&flagFetched != 0 {
		if t := uint32(now); le.Uint32(b[offTime:]) != t {
			le.PutUint32(b[offTime:], t)
		}
		st |= flagActive
	}
	if st |= flagVisited | flagFetched; st != b[offState] {
		b[offState] = st
	}
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
