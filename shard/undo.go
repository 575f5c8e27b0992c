package shard

import "github.com/leasecached/leasecached/slab"

// Changes in place in a data directory (doc/design/restart.md rule 2): a store whose new item fits the old
// one's chunk (overwrite), an incr or decr whose digits fit, a touch, an md I. Without a data directory
// they rewrite the item's chunk. With one, the item's chunk is first copied whole, state byte last, into
// the shard's undo chunk of its class, then rewritten and sealed, then the undo chunk is emptied (its state
// byte set to kindUndo again). A process killed at any instruction in between leaves one sealed item with
// the key, or two (the copy and the rewritten item), never none: the restart keeps the one with the larger
// CAS, or either when the CAS is the same (a touch keeps it; a kill before the new one was written), since
// the change was not answered yet, and frees the undo chunk. crashStep marks each step for the tests that
// take a crash image there (build tag crashsteps).
//
// Why not a new chunk, as a store of another size does: a new chunk is a free-list pop and push, an index
// write and the occupancy counters, on lines that nothing has fetched, where the rewrite writes lines the
// lookup just brought in; the copy is one short memmove into a chunk the shard's last change in that class
// wrote. An item whose chunk is over undoRoom, or chained, moves to a new chunk instead, as does any change
// when no undo chunk can be had, and one that must keep the version it replaces (keep.go:
// mayChangeInPlace).
//
// A shard has an undo chunk for each class it changes an item of in place, allocated like an item's chunk
// on the first such change (which may evict an item of the class, never the one changing): in the item's
// own class, so that the copy fits exactly, a copy that a restart keeps is an item like any other, and no
// page is taken for a class the shard holds no item of. Between changes an undo chunk holds no item:
// CLOCK, the reclaimer and dumps pass over it as over a free chunk (they look for kindHead), a page move of
// its page frees it (drainPage), and it counts as a used chunk in stats slabs.
const undoRoom = 1024

// undoChunk is a shard's undo chunk of one class: its ref, and its bytes, which stay where they are while
// the chunk is the shard's (a page move of its page frees it first, dropUndo), so that a change does not
// look the chunk up twice (a chain of dependent loads each time, slab.Allocator.Chunk).
type undoChunk struct {
	ref slab.Ref
	b   []byte
}

// Steps of a change in place, then of a new item's chunk, for crashStep.
const (
	undoCopied    = iota + 1 // the copy is whole (its state byte written); nothing rewritten yet
	undoRewritten            // the item rewritten, not yet sealed
	undoSealed               // the item sealed; the copy not yet emptied
	undoDone                 // the copy emptied
	newChunkTaken            // allocItem: a free chunk taken, not yet changed
	newHeadTaken             // allocItem: the chunk made a head, its header not written yet
	movedButCas              // moveItem, rescue: the item's new chunk written but for its CAS (still 0)
)

// saveUndo prepares live item b (a head of class id, sealed) to change in place: it copies b's chunk into
// the shard's undo chunk of class id, allocating that first when there is none. The copy's state byte is
// written last: until then the undo chunk is not a head (kindUndo), so a restart never takes a half-made
// copy for an item. False when b is chained or its chunk is over undoRoom, or no undo chunk can be had:
// the caller moves the item to a new chunk instead.
func (sh *shard) saveUndo(b []byte, id int, now int64) bool {
	if len(b) > undoRoom || itemChained(b) || sh.undo[id].ref == slab.NilRef && !sh.newUndo(b, id, now) {
		return false
	}
	u := sh.undo[id].b[:len(b)]
	copy(u[:offState], b[:offState])
	copy(u[offState+1:], b[offState+1:])
	u[offState] = b[offState]
	sh.crashStep(undoCopied)
	return true
}

// newUndo allocates the shard's undo chunk of class id. Making room may evict, but never b, the item about
// to change.
func (sh *shard) newUndo(b []byte, id int, now int64) bool {
	pinned := b[offState] & flagPinned
	b[offState] |= flagPinned
	r, ok := sh.allocChunk(id, now)
	b[offState] = b[offState]&^flagPinned | pinned
	if !ok {
		return false
	}
	c := sh.chunk(r)
	c[offState] = kindUndo
	sh.undo[id] = undoChunk{ref: r, b: c}
	return true
}

// sealInPlace seals item b at r (of class id), changed in place after saveUndo, then empties the undo
// chunk: the seal goes first, so that the copy is there until the changed item is whole.
func (sh *shard) sealInPlace(r slab.Ref, b []byte, id int) {
	sh.crashStep(undoRewritten)
	sh.seal(r, b)
	sh.crashStep(undoSealed)
	u := &sh.undo[id]
	u.b[offState] = kindUndo
	sh.al.Wrote(u.ref, len(u.b))
	sh.crashStep(undoDone)
}

// changeInPlace applies edit, which keeps the item's layout, to live item ref (head chunk b, key hash h):
// in place, behind an undo copy in a data directory (see above), or in a new chunk when no copy can be
// kept (moveItem), made for exptime exp, the item's once edited (a chunk for exptime 0 may have no
// exptime field). It returns where the item now is: NilRef when it had to move and no memory could be
// found, and was dropped as an eviction would drop it.
func (sh *shard) changeInPlace(h uint64, ref slab.Ref, b []byte, exp uint32, now int64, edit func(b []byte)) (slab.Ref, []byte) {
	if sh.sums == nil {
		edit(b)
		return ref, b
	}
	if id := sh.al.ClassOf(ref); sh.mayChangeInPlace(h, ref, b) && sh.saveUndo(b, id, now) {
		edit(b)
		sh.sealInPlace(ref, b, id)
		return ref, b
	}
	return sh.moveItem(h, ref, b, exp, now, edit)
}

// dropUndo frees the undo chunk of class id when it is in page p, which is being drained: it holds no item
// between changes, and the next change allocates another.
func (sh *shard) dropUndo(p uint32, id int) {
	if sh.undo != nil && sh.undo[id].ref != slab.NilRef && sh.undo[id].ref.Page() == p {
		sh.al.Free(sh.undo[id].ref)
		sh.undo[id] = undoChunk{ref: slab.NilRef}
	}
}
