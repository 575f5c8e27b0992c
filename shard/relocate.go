package shard

import "github.com/leasecached/leasecached/slab"

// Relocation: an item's header has an exptime field only when it was stored with one (item.go), so an
// exptime set in place on an item without the field moves the item into a chunk that has it. This is the
// same item, not a new one: its CAS, flags, times, bits and value are kept, leases are untouched, and only
// the index entry and the class occupancy change. It happens at most once per item (the field stays).

// setExp sets the exptime of the live item ref (b its head chunk, key hash h) and returns where the item
// now is. ref is NilRef when the item needed to move and no memory could be found for it: the item was
// then dropped as an eviction would drop it. With a data directory a change in place keeps an undo copy
// (undo.go).
func (sh *shard) setExp(h uint64, ref slab.Ref, b []byte, exp uint32, now int64) (slab.Ref, []byte) {
	return sh.changeExp(h, ref, b, exp, now, nil)
}

// changeExp applies edit (if any), which keeps the item's layout, and sets exptime exp, as one change (a
// kill leaves the item as it was or with both): in place when the header has room for exp
// (changeInPlace), else in a chunk that has. It returns what setExp does.
func (sh *shard) changeExp(h uint64, ref slab.Ref, b []byte, exp uint32, now int64, edit func(b []byte)) (slab.Ref, []byte) {
	if !canSetExp(b, exp) {
		return sh.moveItem(h, ref, b, exp, now, edit)
	}
	return sh.changeInPlace(h, ref, b, exp, now, func(b []byte) {
		if edit != nil {
			edit(b)
		}
		setItemExp(b, exp)
	})
}

// moveItem moves the live item ref (b its head chunk, key hash h) into a new chunk with exptime exp, and
// applies edit (if any) to the copy before sealing it: the same item, as relocation describes, unless
// edit changes it. It returns where the item now is, or NilRef when no memory could be found for it: the
// item was then dropped as an eviction would drop it.
func (sh *shard) moveItem(h uint64, ref slab.Ref, b []byte, exp uint32, now int64, edit func(nb []byte)) (slab.Ref, []byte) {
	klen, vlen, flags := itemKlen(b), itemVlen(b), itemFlags(b)
	pinned := b[offState] & flagPinned
	b[offState] |= flagPinned // eviction must not take it while we allocate
	nu, nb, ok := sh.allocItem(klen, vlen, layoutOf(flags, exp, vlen), now)
	b[offState] = b[offState]&^flagPinned | pinned
	if !ok {
		sh.release(ref, causeEvict, now)
		return slab.NilRef, nil
	}
	// The CAS goes last (allocItem left it 0, which no item has): the chunk may hold an earlier version of
	// this very item, whose CAS a move keeps, with its seal; with the CAS in place first, a kill before the
	// exptime was rewritten would leave that version whole (doc/design/restart.md rule 1).
	writeHeader(nb, 0, exp, itemTime(b), flags, itemKey(b), vlen, itemMeta(b))
	w := newValueWriter(sh.al, nb)
	copyValue(&w, sh.al, b)
	const carried = flagVisited | flagFetched | flagActive | flagGhost
	nb[offState] = nb[offState]&^(flagPinned|carried) | b[offState]&carried | pinned
	if edit != nil {
		edit(nb) // one that changes the item gives it a new CAS (incr, md I); a touch's keeps it
	}
	sh.crashStep(movedButCas)
	if itemCas(nb) == 0 {
		setItemCas(nb, itemCas(b))
	}
	sh.seal(nu, nb)

	slot, found := sh.idx.slotOf(h, ref)
	if !found {
		panic("shard: item to relocate is not indexed") // broken invariant: memory would be corrupted
	}
	sh.idx.replace(slot, nu)
	sh.accountReplace(ref, nu, b, nb)
	sh.retire(h, ref, b)
	return nu, nb
}
