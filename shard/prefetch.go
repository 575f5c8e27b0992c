package shard

import (
	"math"
	"unsafe"

	"github.com/leasecached/leasecached/slab"
)

// PrefetchMax is how many keys one Prefetch call works on; the rest of a longer list is ignored.
const PrefetchMax = 32

// Prefetch starts loading the index slots and items that lookups of keys will touch, so a server that
// has several requests in hand pays for their cache misses about once instead of once per key. It
// changes nothing; keys may be invalid or absent, and are read only during the call. It leaves the Hashed of
// each of the first PrefetchMax keys in hs (which must hold that many), so the lookups that follow need
// neither hash them nor probe for them again.
//
// Why two passes: a lookup misses twice, on its index slot and then on the item the slot names, and
// the second address is only known once the first line has arrived. The first pass asks for every
// key's slot without waiting; the second reads each slot (mostly arrived by then) and asks for the item.
//
// Neither pass takes a shard lock. Taking one per key (a try-lock, skipping busy shards) cost two atomic
// writes per key on a cache line the other event loop also writes, and made 10-key gets at pipeline 16
// about 10% slower than reading without it. What a lock-free read may see is a slot being rewritten
// (a wrong or torn entry, hence a useless prefetch) or a page released since (ChunkHint's address then
// names nothing, and a prefetch never faults). What it must never see is a table unmapped under it:
// tables are read through shard.view and retired, not freed, when the index outgrows them
// (retireTable), and the prefetching count says when the last reader that could hold one is gone.
func (s *Store) Prefetch(keys [][]byte, hs []Hashed) {
	n := min(len(keys), PrefetchMax)
	hs = hs[:n]
	// The second pass reuses the tables the first loaded: finding them again cost about 15 instructions
	// a key.
	var views [PrefetchMax]*index
	s.prefetching.Add(1)
	for i, k := range keys[:n] {
		h := Hash(k)
		hs[i] = Hashed{Sum: h}
		x := s.shardOf(h).view.Load()
		views[i] = x
		x.prefetchHome(h)
	}
	for i := range hs {
		h, x := hs[i].Sum, views[i]
		p := x.probe(h)
		if slot, ref, ok := x.next(&p); ok {
			prefetchChunk(s.arena.ChunkHint(ref))
			if slot < math.MaxUint32 {
				hs[i].slot = uint32(slot) + 1
			}
		}
	}
	s.prefetching.Add(-1)
}

// prefetchHome asks for the cache line of h's home slot.
func (x *index) prefetchHome(h uint64) {
	prefetch(uintptr(unsafe.Pointer(unsafe.SliceData(x.slots))) + uintptr(x.home(h))*8)
}

// prefetchChunk asks for the first lines of a chunk starting at addr (none when addr is 0): enough for
// the header, the key and a 100-byte value even when the chunk starts late in its first line. The
// chunk's real length is not known without owning its page; lines past a shorter chunk are a wasted
// hint (a longer value is streamed by the hardware prefetcher once the copy starts).
func prefetchChunk(addr uintptr) {
	if addr != 0 {
		prefetchItemSpan(addr)
	}
}

// publishIndex makes the main index's current table the one Prefetch probes. The caller holds sh.mu
// (or has not shared the shard yet).
func (sh *shard) publishIndex() {
	v := sh.idx
	v.retire = nil
	sh.view.Store(&v)
}

// retireTable is the main index's retire hook: the index has just moved to a new table, and old is the
// one it left. Prefetch calls that loaded the old view may still be probing old, so its memory goes back
// to the system at once but its addresses stay mapped until freeRetired finds no Prefetch running. The
// caller holds sh.mu.
func (sh *shard) retireTable(old *slab.WordBuf) {
	sh.publishIndex()
	old.Discard()
	sh.retired = append(sh.retired, old)
	sh.freeRetired()
}

// freeRetired unmaps the retired tables once no Prefetch is running. That is enough: a Prefetch that
// starts later counts itself before it loads a view, so it loads one published after the tables were
// retired (sync/atomic's operations are sequentially consistent). The caller holds sh.mu; the reclaimer
// calls it every tick, so a table retired while the event loops were prefetching does not wait long.
func (sh *shard) freeRetired() {
	if len(sh.retired) == 0 || sh.st.prefetching.Load() != 0 {
		return
	}
	for i, b := range sh.retired {
		b.Free()
		sh.retired[i] = nil
	}
	sh.retired = sh.retired[:0]
}
