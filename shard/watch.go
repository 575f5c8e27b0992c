package shard

import (
	"github.com/leasecached/leasecached/protocol"
	"github.com/leasecached/leasecached/slab"
)

// What `watch` (server/watch.go) learns from the store: a key's state without changing it, and each
// eviction as it happens. See doc/design/watch.md.

// LookupStatus is memcached's was_found code of an item_get line.
type LookupStatus uint8

const (
	LookupNotFound LookupStatus = iota
	LookupFound
	LookupFlushed
	LookupExpired
)

// Lookup is what a watcher's line says of a key's item: memcached's slab class of it and its value size.
type Lookup struct {
	Status LookupStatus
	Class  int    // 0 unless found
	Size   int    // value bytes; 0 unless found
	TTL    uint32 // StoreTTL of the item's exptime; 0 unless found
}

// Peek is key's Lookup, without the side effects of a read: nothing is bumped, unlinked or counted.
func (s *Store) Peek(key []byte) Lookup {
	if !validKey(key) {
		return Lookup{}
	}
	sh, h, now := s.lockKey(key)
	defer sh.mu.Unlock()
	_, ref, b := sh.probeFor(h, key)
	if ref == slab.NilRef || isGhost(b) {
		return Lookup{}
	}
	switch s.dead(b, now) {
	case causeExpire:
		return Lookup{Status: LookupExpired}
	case causeFlush:
		return Lookup{Status: LookupFlushed}
	}
	lk := Lookup{Status: LookupFound, Class: mcClassOfItem(b), Size: itemVlen(b)}
	if exp := itemExp(b); exp != 0 {
		lk.TTL = uint32(int64(s.rel(int64(exp))) - int64(s.rel(now)))
	}
	return lk
}

// ItemClass is memcached's slab class of an item of the given key and value lengths and flags.
func ItemClass(klen, vlen int, flags uint32) int {
	return mcClassOf(protocol.ItemSize(klen, vlen, flags))
}

func mcClassOfItem(b []byte) int { return ItemClass(itemKlen(b), itemVlen(b), itemFlags(b)) }

// Eviction is one item evicted, as memcached's eviction line shows it.
type Eviction struct {
	Key        []byte // valid during the call only
	Fetched    bool
	TTL        int64 // seconds left, -1 without an exptime
	LastAccess int64 // seconds since the last access
	Class      int
	Size       int
}

// EvictionLog is told of evictions while Watching says so. It is called with a shard's lock held.
type EvictionLog interface {
	Watching() bool
	Evicted(e Eviction)
}

type evictionLogBox struct{ l EvictionLog }

// SetEvictionLog has the store tell l of every eviction from now on.
func (s *Store) SetEvictionLog(l EvictionLog) { s.evictLog.Store(&evictionLogBox{l}) }

// logEviction tells the eviction log, if any is watching, of the item b about to be evicted.
func (sh *shard) logEviction(b []byte, now int64) {
	box := sh.st.evictLog.Load()
	if box == nil || !box.l.Watching() {
		return
	}
	s := sh.st
	e := Eviction{Key: itemKey(b), Fetched: b[offState]&flagFetched != 0, TTL: -1,
		LastAccess: int64(s.rel(now)) - int64(s.rel(int64(itemTime(b)))), Class: mcClassOfItem(b), Size: itemVlen(b)}
	if exp := itemExp(b); exp != 0 {
		e.TTL = int64(s.rel(int64(exp))) - int64(s.rel(now))
	}
	box.l.Evicted(e)
}

// StoreTTL is an item_store line's ttl for a command's exptime, as memcached computes it: the item's
// exptime minus the clock, both relative to the process's start, printed unsigned (so a time in the past
// wraps); 0 without an exptime.
func (s *Store) StoreTTL(exptime int64) uint32 {
	if exptime == 0 {
		return 0
	}
	now := s.now()
	return uint32(int64(s.rel(int64(absExptime(exptime, now)))) - int64(s.rel(now)))
}
