package shard

import (
	"math"

	"github.com/leasecached/leasecached/slab"
)

const (
	// maxRelativeExptime is memcached's REALTIME_MAXDELTA: exptimes up to 30
	// days are relative seconds, larger ones absolute unix times.
	maxRelativeExptime = 60 * 60 * 24 * 30
	// processStartSkew: memcached pretends it started this many seconds
	// before it did (ITEM_UPDATE_INTERVAL + 2); only flush_all's handling of
	// absolute times before the start can observe it.
	processStartSkew = 62
	// expiredExptime is what an already-expired exptime is stored as: a time
	// always in the past but not 0 (which means never).
	expiredExptime = 1
)

// absExptime converts a protocol exptime to absolute unix seconds (0 never).
func absExptime(exptime, now int64) uint32 {
	var abs int64
	switch {
	case exptime == 0:
		return 0
	case exptime < 0:
		return expiredExptime
	case exptime <= maxRelativeExptime:
		abs = now + exptime
	default:
		abs = exptime
	}
	return uint32(min(abs, math.MaxUint32))
}

// dead says whether an item is expired or flushed at now (causeNone if live).
// memcached's rules: exptime reached; or a flush_all in effect (oldest_live
// reached) and the item stored at or before it, or carrying a CAS older than
// the flush.
func (s *Store) dead(b []byte, now int64) cause {
	if b[offState]&flagGhost != 0 {
		return s.ghostDead(b, now)
	}
	if e := itemExp(b); e != 0 && int64(e) <= now {
		return causeExpire
	}
	if ol := s.oldestLive.Load(); ol != 0 && ol <= now {
		if int64(itemTime(b)) <= ol {
			return causeFlush
		}
		if oc := s.oldestCas.Load(); oc != 0 && itemCas(b) < oc {
			return causeFlush
		}
	}
	return causeNone
}

// ghostDead is dead for a stale value (ghost.go): its window ends at its time field; a flush_all takes it
// if it became stale (its window start) at or before the flush, or holds a CAS older than the flush.
func (s *Store) ghostDead(b []byte, now int64) cause {
	until := int64(itemTime(b))
	if until <= now {
		return causeExpire
	}
	if ol := s.oldestLive.Load(); ol != 0 && ol <= now {
		if s.ghostStart(b) <= ol {
			return causeFlush
		}
		if oc := s.oldestCas.Load(); oc != 0 && itemCas(b) < oc {
			return causeFlush
		}
	}
	return causeNone
}

// FlushAll is flush_all [delay]: every item existing when it takes effect
// becomes invisible (now if delay <= 0, else at delay, relative or absolute
// as an exptime); items stored after it takes effect survive.
func (s *Store) FlushAll(delay int64) {
	s.waitOpened() // its marks are the directory's, and the CAS counter starts at the stored mark
	now := s.now()
	var at int64
	switch {
	case delay <= 0:
		at = now
	case delay <= maxRelativeExptime:
		at = now + delay
	case delay <= s.started:
		at = 1 // memcached's realtime(): "before the process started"; this disables flushing
	default:
		at = delay
	}
	// Like memcached with CAS enabled: everything stored up to the second
	// before counts as old, and for an immediate flush every CAS handed out
	// so far too, so items stored later in this same second survive.
	// The CAS mark goes first so no reader sees the new time mark without it.
	if at-1 <= now {
		s.oldestCas.Store(s.cas.Add(1))
	}
	s.oldestLive.Store(at - 1)
	s.flushed()
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.mutate(0, slab.NilRef, slab.NilRef, causeFlush, now)
		sh.mu.Unlock()
	}
}

// OldestLive is memcached's settings.oldest_live (`stats settings` oldest): the last flush_all's
// cut-off in seconds since the (skewed) process start, 0 when no flush_all has cut anything off.
func (s *Store) OldestLive() int64 {
	if ol := s.oldestLive.Load(); ol > s.started {
		return ol - s.started
	}
	return 0
}
