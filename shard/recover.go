package shard

import (
	"bytes"

	"github.com/leasecached/leasecached/slab"
)

// recoverItems rebuilds shard self's index from the pages it adopted (persist.go), and returns how many
// items it indexed and dropped, how many of those indexed are kept versions taken back (restoreKept), and
// the largest CAS among those it kept. The caller holds sh.mu.
//
// Two passes over the shard's pages. The first checks every head chunk (recoverHead) and indexes the items
// that are whole, live and this shard's, marking their chunks kept; of two items with one key the larger
// CAS wins. The second frees every chunk not kept, which puts free chunks on the free lists and drops torn
// items, stale values and orphaned parts.
func (sh *shard) recoverItems(self int, now int64) (loaded, dropped, rolledBack int64, maxCas uint64) {
	// kept has a bit per chunk of each page the shard holds, indexed by page id and by offset/MinChunk
	// (distinct for chunks of any class, which are at least MinChunk apart).
	kept := make([][]uint64, sh.maxPageID()+1)
	const words = slab.PageSize/slab.MinChunk/64 + 1
	mark := func(r slab.Ref, on bool) {
		bits := kept[r.Page()]
		if bits == nil {
			bits = make([]uint64, words)
			kept[r.Page()] = bits
		}
		i := r.Offset() / slab.MinChunk
		if on {
			bits[i/64] |= 1 << (i % 64)
		} else {
			bits[i/64] &^= 1 << (i % 64)
		}
	}
	isKept := func(r slab.Ref) bool {
		bits := kept[r.Page()]
		i := r.Offset() / slab.MinChunk
		return bits != nil && bits[i/64]&(1<<(i%64)) != 0
	}
	markItem := func(head slab.Ref, on bool) {
		mark(head, on)
		b := sh.chunk(head)
		if itemChained(b) {
			for r := readRef(b[chainOff(b):]); r != slab.NilRef; r = readRef(sh.chunk(r)[offPartNext:]) {
				mark(r, on)
			}
		}
	}
	// Size the index for every head first: growing it as items come in rehashed each one several times,
	// a cache miss each (60% of a rebuild's time at 1M items).
	heads := 0
	sh.eachAdopted(func(_ slab.Ref, b []byte) {
		if b[offState]&(kindMask|flagGhost) == kindHead || isKeptVersion(b) {
			heads++
		}
	})
	sh.idx.resize(uint64(heads)*indexLoadDen/indexLoadNum+1, sh.hashOf)
	back := sh.st.persist.back
	var restored map[slab.Ref]bool // kept versions made items again: not counted as dropped when they lose
	sh.eachAdopted(func(r slab.Ref, b []byte) {
		if isKeptVersion(b) {
			if !sh.restoreKept(self, r, b, back, now, isKept, markItem) {
				return
			}
			if restored == nil {
				restored = make(map[slab.Ref]bool)
			}
			restored[r] = true
		} else if b[offState]&kindMask != kindHead {
			return
		}
		h, ok := sh.recoverHead(self, r, b, now, isKept)
		if !ok {
			if !restored[r] {
				dropped++
			}
			return
		}
		key := itemKey(b)
		if slot, old, ob := sh.probeFor(h, key); old != slab.NilRef {
			if itemCas(ob) >= itemCas(b) {
				if !restored[r] {
					dropped++
				}
				return
			}
			if !restored[old] {
				dropped++
			}
			sh.idx.replace(slot, r)
			sh.account(old, -1)
			markItem(old, false)
			loaded--
		} else {
			sh.indexInsert(h, r) // sized above: grows only when probes get too long
		}
		if b[offState]&flagPinned != 0 { // written only when set: a write dirties a page the next sync writes
			b[offState] &^= flagPinned
		}
		sh.ownParts(r, b)
		markItem(r, true)
		sh.account(r, +1)
		loaded++
		maxCas = max(maxCas, itemCas(b))
	})
	sh.eachAdopted(func(r slab.Ref, b []byte) {
		if !isKept(r) {
			sh.al.Free(r)
		}
	})
	for r := range restored {
		if isKept(r) { // indexed, and not replaced by a version with a larger CAS since
			rolledBack++
		}
	}
	sh.publishIndex()
	sh.fitShare() // pages over the allowance the rebuilt index leaves go back within a reclaimer tick
	return loaded, dropped, rolledBack, maxCas
}

// restoreKept handles kept version b at r (keep.go) for recoverItems: after a reboot that no sync begun
// after it was kept had finished before, it makes it an item again (true: the caller checks it as any
// other head); after a kill, with what replaced it maybe in the page cache only, a whole one stays kept
// until this process's first sync (marked with its parts, so that the caller does not free them);
// otherwise the caller frees it.
func (sh *shard) restoreKept(self int, r slab.Ref, b []byte, back *slab.Backing, now int64,
	claimed func(slab.Ref) bool, mark func(slab.Ref, bool)) bool {
	synced := back.SyncedAfter(itemTime(b))
	switch {
	case !back.Rebooted():
		if sh.kept != nil && !synced {
			setItemTime(b, uint32(now)) // the tag is no store time: flush_all's oldest_live would take it for one
			if h, ok := sh.recoverHead(self, r, b, now, claimed); ok {
				mark(r, true)
				sh.adoptKept(h, r, b)
			}
		}
		return false
	case synced:
		return false
	}
	storeStateWord(b, kindHead|b[offState]&flagChained, b[offMeta]&^metaKept, uint32(now)) // one store: keep.go
	return true
}

// maxPageID is the largest id of the pages the shard holds.
func (sh *shard) maxPageID() uint32 {
	var m uint32
	for id := range sh.st.classes.Count() {
		for i := range sh.al.Pages(id) {
			m = max(m, sh.al.PageAt(id, i))
		}
	}
	return m
}

// eachAdopted calls fn for every chunk of every page the shard holds.
func (sh *shard) eachAdopted(fn func(r slab.Ref, b []byte)) {
	for id := range sh.st.classes.Count() {
		for i := range sh.al.Pages(id) {
			first, size, n := sh.al.PageChunks(sh.al.PageAt(id, i))
			for k := range n {
				r := first + slab.Ref(k*size)
				fn(r, sh.chunk(r))
			}
		}
	}
}

// recoverHead says whether head chunk b at r holds an item to keep after a restart, and its key's hash: its
// fields fit its chunk, its chain (if any) is the shard's and whole, its seal matches, it is live, it is
// not a stale value, its key is this shard's and it fits -I. Nothing in b is trusted before it is checked:
// the files may have been damaged.
func (sh *shard) recoverHead(self int, r slab.Ref, b []byte, now int64, claimed func(slab.Ref) bool) (uint64, bool) {
	st := b[offState]
	if st&flagGhost != 0 || b[offKlen] == 0 {
		return 0, false
	}
	chained := st&flagChained != 0
	if headerLen(b[offMeta], chained)+itemKlen(b) > valueEnd(b) {
		return 0, false
	}
	vlen := itemVlen(b)
	if vlen < 0 || sh.st.tooLarge(itemKlen(b), vlen, itemFlags(b)) {
		return 0, false
	}
	if !chained {
		if sealedLen(dataOff(b)+vlen) > len(b) {
			return 0, false
		}
	} else if !sh.chainWhole(r, b, vlen, claimed) {
		return 0, false
	}
	h := Hash(itemKey(b))
	if sh.st.shardOf(h) != &sh.st.shards[self] {
		return 0, false
	}
	if at, seal := sh.sealFor(b); *sealPtr(b, at) != seal {
		return 0, false
	}
	return h, sh.st.dead(b, now) == causeNone
}

// chainWhole checks a chained head's parts as valueReader will read them: each link names a part chunk of
// this shard that points back at the head (or its twin, twinOf) and is no other item's, and the parts hold
// exactly the value.
func (sh *shard) chainWhole(head slab.Ref, b []byte, vlen int, claimed func(slab.Ref) bool) bool {
	if sh.al.ClassOf(head) != sh.st.classes.Largest() {
		return false
	}
	rem := vlen - (valueEnd(b) - dataOff(b))
	if rem <= 0 {
		return false
	}
	r := readRef(b[chainOff(b):])
	for rem > 0 {
		if !sh.al.Holds(r) || claimed(r) {
			return false
		}
		c := sh.chunk(r)
		if c[offState] != kindPart || len(c) <= partData {
			return false
		}
		if back := readRef(c[offPartHead:]); back != head && !sh.twinOf(head, back, b) {
			return false
		}
		rem -= len(c) - partData
		r = readRef(c[offPartNext:])
	}
	return r == slab.NilRef
}

// twinOf says whether other, the head a part of head's chain points back at, is a copy of head (b): a page
// move copies a chained head to a new chunk, then points its parts at the copy one at a time (drain.go
// rescue), so a process killed in between leaves two sealed heads with the parts split between them
// (restart.md rule 2). A head of the same class with b's CAS, layout, fields, key, chain and seal is the
// same item; the seal, checked over the whole chain, says the value is whole.
func (sh *shard) twinOf(head, other slab.Ref, b []byte) bool {
	if other == head || !sh.al.Holds(other) || sh.al.ClassOf(other) != sh.al.ClassOf(head) {
		return false
	}
	o := sh.chunk(other)
	const kind = kindMask | flagChained | flagGhost
	if o[offState]&kind != b[offState]&kind || o[offMeta]&metaLayout != b[offMeta]&metaLayout ||
		itemCas(o) != itemCas(b) || o[offKlen] != b[offKlen] {
		return false
	}
	end := dataOff(b) // within both chunks: recoverHead checked b's, and o has b's layout, key length and size
	return bytes.Equal(o[offExp:end], b[offExp:end]) && *itemSeal(o) == *itemSeal(b)
}

// ownParts points every part of kept head r (b) back at r: a part that named r's twin (twinOf) would lead
// a page move or eviction of the part to the twin, which the second pass frees.
func (sh *shard) ownParts(r slab.Ref, b []byte) {
	if !itemChained(b) {
		return
	}
	for p := readRef(b[chainOff(b):]); p != slab.NilRef; {
		c := sh.chunk(p)
		if readRef(c[offPartHead:]) != r {
			writeRef(c[offPartHead:], r)
			sh.al.Wrote(p, len(c))
		}
		p = readRef(c[offPartNext:])
	}
}
