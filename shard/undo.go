package shard

import "github.com/leasecached/leasecached/slab"

// Changes in place in a data directory (doc/design/restart.md rule 2): a store whose new item fits the old
// one's chunk (overwrite), an incr or decr whose digits fit, a touch, an md I. Without a data directory
// they rewrite the item's chunk. With one, the item's chunk is first copied whole, state byte last, into
// the shard's undo chunk, then rewritten and sealed, then the undo chunk is emptied (its state byte set to
// kindUndo again).
// A process killed at any instruction in between leaves one sealed item with the key, or two (the copy
// and the rewritten item), never none: the restart keeps the one with the larger CAS, or either when the
// CAS is the same (a touch keeps it; a kill before the new one was written), since the change was not
// answered yet, and frees the undo chunk.
//
// Why not a new chunk, as a store of another size does: a new chunk is a free-list pop and push, an index
// write and the occupancy counters, on lines that nothing has fetched, where the rewrite writes lines the
// lookup just brought in; the copy is one short memmove into a chunk the shard's last change wrote. The
// undo chunk takes items whose chunk is at most undoRoom bytes (it is a chunk of the class that fits
// undoRoom); a larger or chained one moves to a new chunk, as does any change when no undo chunk can be
// had.
//
// The undo chunk is allocated from the shard's classes like an item's, on the first change that wants it.
// Between changes it holds no item: CLOCK, the reclaimer and dumps pass over it as they pass over a free
// chunk (they look for kindHead), a page move of its page frees it (drainPage), and it counts as a used
// chunk in stats slabs.
const undoRoom = 1024

// saveUndo prepares live item b (a head, sealed) to change in place: it copies b's chunk into the shard's
// undo chunk, allocating that first when there is none. The copy's state byte is written last: until then
// the undo chunk is not a head (kindUndo), so a restart never takes a half-made copy for an item. False
// when b is chained or its chunk is over undoRoom, or no undo chunk can be had: the caller moves the item
// to a new chunk instead.
func (sh *shard) saveUndo(b []byte, now int64) bool {
	if len(b) > undoRoom || itemChained(b) || sh.undo == slab.NilRef && !sh.newUndo(b, now) {
		return false
	}
	u := sh.chunk(sh.undo)[:len(b)]
	copy(u[:offState], b[:offState])
	copy(u[offState+1:], b[offState+1:])
	u[offState] = b[offState]
	return true
}

// newUndo allocates the shard's undo chunk. Making room may evict, but never b, the item about to change.
func (sh *shard) newUndo(b []byte, now int64) bool {
	id, _ := sh.st.classes.For(undoRoom)
	pinned := b[offState] & flagPinned
	b[offState] |= flagPinned
	r, ok := sh.allocChunk(id, now)
	b[offState] = b[offState]&^flagPinned | pinned
	if !ok {
		return false
	}
	sh.chunk(r)[offState] = kindUndo
	sh.undo = r
	return true
}

// sealInPlace seals item b at r, changed in place after saveUndo, then empties the undo chunk: the seal
// goes first, so that the copy is there until the changed item is whole.
func (sh *shard) sealInPlace(r slab.Ref, b []byte) {
	sh.seal(r, b)
	sh.chunk(sh.undo)[offState] = kindUndo
	sh.al.Wrote(sh.undo)
}

// changeInPlace applies edit, which keeps the item's layout, to live item ref (head chunk b, key hash h):
// in place, behind an undo copy in a data directory (see above), or in a new chunk when no copy can be
// kept (moveItem). It returns where the item now is: NilRef when it had to move and no memory could be
// found, and was dropped as an eviction would drop it.
func (sh *shard) changeInPlace(h uint64, ref slab.Ref, b []byte, now int64, edit func(b []byte)) (slab.Ref, []byte) {
	switch {
	case sh.sums == nil:
		edit(b)
	case sh.saveUndo(b, now):
		edit(b)
		sh.sealInPlace(ref, b)
	default:
		return sh.moveItem(h, ref, b, itemExp(b), now, edit)
	}
	return ref, b
}

// dropUndo frees the undo chunk when it is in page p, which is being drained: it holds no item between
// changes, and the next change allocates another.
func (sh *shard) dropUndo(p uint32) {
	if sh.undo != slab.NilRef && sh.undo.Page() == p {
		sh.al.Free(sh.undo)
		sh.undo = slab.NilRef
	}
}
