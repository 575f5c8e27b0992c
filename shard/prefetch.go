package shard

import "unsafe"

// PrefetchMax is how many keys one Prefetch call works on; the rest of a longer list is ignored.
const PrefetchMax = 32

// prefetchItemLines is how many cache lines of an item's chunk Prefetch asks for, counted from the line
// the chunk starts in: the header, the key and a 100-byte value even when the chunk starts late in its
// first line (a longer value is streamed by the hardware prefetcher once the copy starts).
const prefetchItemLines = 4

// cacheLine is the cache line size of the CPUs we build the prefetch instruction for.
const cacheLine = 64

// Prefetch starts loading the index slots and items that lookups of keys will touch, so a server that
// has several requests in hand pays for their cache misses about once instead of once per key. It
// changes nothing and returns nothing; keys may be invalid or absent. The keys are read only during the
// call.
//
// Why two passes: a lookup misses twice, on its index slot and then on the item the slot names, and
// the second address is only known once the first line has arrived. The first pass asks for every
// key's slot without waiting; the second reads each slot (mostly arrived by then) under the shard's
// lock and asks for the item, skipping keys whose shard is locked at that moment rather than wait.
func (s *Store) Prefetch(keys [][]byte) {
	if len(keys) < 2 {
		return // nothing to overlap: the lookup itself will take its misses just as soon
	}
	var hs [PrefetchMax]uint64
	n := min(len(keys), PrefetchMax)
	for i, k := range keys[:n] {
		h := hashKey(k)
		hs[i] = h
		s.shardOf(h).idx.prefetchHome(h)
	}
	for _, h := range hs[:n] {
		sh := s.shardOf(h)
		if !sh.mu.TryLock() {
			continue // the other event loop is in this shard: a hint is not worth waiting for
		}
		sh.prefetchItem(h)
		sh.mu.Unlock()
	}
}

// prefetchHome asks for the cache line of h's home slot without taking the shard's lock.
//
// It reads the table's base and size while another event loop may be resizing the table, which is
// why the race detector is told to look away: the worst a stale or torn read does is compute an
// address outside any table (possibly one already unmapped), and prefetch never faults. go:norace only
// covers code compiled into this function, so the home slot is computed here rather than by calling
// home, which the race detector would instrument whenever it is not inlined (a -l build).
//
//go:norace
func (x *index) prefetchHome(h uint64) {
	base := uintptr(unsafe.Pointer(unsafe.SliceData(x.slots)))
	if base == 0 {
		return
	}
	prefetch(base + uintptr(uint64(uint32(h))*x.n>>32)*8) // x.home(h)
}

// prefetchItem asks for the first lines of the item in h's first candidate slot (the first entry whose
// distance and tag match; another key's item on a tag collision, one in 32768). The caller holds sh.mu,
// which keeps the slot's chunk mapped while its address is taken.
func (sh *shard) prefetchItem(h uint64) {
	p := sh.idx.probe(h)
	_, ref, ok := sh.idx.next(&p)
	if !ok {
		return
	}
	b := sh.chunk(ref)
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	end := min(start+uintptr(len(b)), start&^(cacheLine-1)+prefetchItemLines*cacheLine)
	for line := start &^ (cacheLine - 1); line < end; line += cacheLine {
		prefetch(line)
	}
}
