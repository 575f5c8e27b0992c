package shard

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"

	"github.com/leasecached/leasecached/slab"
)

// Versions kept until a sync (doc/design/restart.md rule 9). A sync writes the items to a disk; a power
// cut in the middle of the next one, or of the kernel's own writeback, may leave the disk with any subset
// of the blocks written since, and a disk that loses its volatile cache keeps them in any order. A change
// that frees or rewrites the chunk of a key's synced version could then reach the disk without the block
// that holds the new version, and the key would be lost altogether. So where syncs write to a disk
// (slab.Backing.Keeps), a change keeps the version it replaces, whole and sealed, in no index, until a
// sync begun after the change has finished, when the new version is on disk:
//   - A store or a move that writes a new chunk keeps the old one (retire). A change in place cannot keep
//     anything (a copy made then may reach the disk after the change), so an item whose chunk spans two
//     disk blocks, which a power cut may leave one old and one new, changes in a new chunk instead while
//     its key has no version kept (mayChangeInPlace); an item within one block reaches the disk whole or
//     not at all (disks with 4 KiB physical sectors write such a block whole), and changes in place.
//   - One version a key a sync interval: the one a change finds first after a sync begins is the one that
//     sync writes (or an older one); later changes before the next sync begins keep nothing more.
//   - A kept version's head chunk is kindUndo with metaKept (and flagChained if chained), its time field
//     the number of the last sync begun when it was kept (its tag); the rest is as the item was, seal
//     included. The three share an aligned 8-byte word, written with one store (storeStateWord), so
//     neither a kill nor the kernel's writeback of the page finds some changed and not the others.
//   - Deletes keep nothing (a delete may be undone by a reboot, rule 9), nor do ghosts, nor anything
//     where syncs do not write to a disk (--data-sync 0, DIR on tmpfs). A chained version keeps its parts
//     (kindPart, naming the kept head, which walkers of chunks take for no item: itemOf).
//   - A restart after a reboot that no sync begun after the tag had finished before takes a kept version
//     back as an item (of two versions of a key the larger CAS wins); after a kill (the page cache
//     whole) it keeps it kept until its own first sync; otherwise it frees it (recoverItems).
//
// What it costs: the kept chunks hold memory of their class, at most one version for each key changed in
// the last two sync intervals, and the Go heap 8-16 bytes for each (list and keys). While the cache has
// free pages they take them; once it is full they hold at most an eighth of their class's chunks
// (keptShare): past that the class frees its oldest kept version rather than evict an item, so a cache
// whose changes between two syncs outgrow that share may lose a key changed after the last sync at a power
// cut, as without them. A page move takes the kept versions in the page it drains along as it takes
// items, but frees a chained one (rescueKept). What is freed early is counted (data_kept_dropped).

// A kept version's marks share one aligned 8-byte word (see above): chunks start at multiples of 8, and
// the state byte, the meta byte and the time field lie in a chunk's second word.
var (
	_ [0]struct{} = [slab.ChunkAlign % 8]struct{}{}
	_ [0]struct{} = [offState % 8]struct{}{}
	_ [0]struct{} = [(offTime+3)/8 - offState/8]struct{}{}
)

// diskBlock is the unit a disk is taken to write whole: a 4 KiB block (the page cache's page, the
// file system's block, the physical sector of today's disks).
const diskBlock = 4096

// keptShare is the share of a class's chunks its kept versions may hold once the cache is full: past it,
// a chunk the class needs comes from its oldest kept version before an item is evicted (allocChunk).
const keptShare = 8 // an eighth

// keptVersion is a kept chunk and its tag (the number of the last sync begun when it was kept, low 32
// bits); ref is NilRef once a page move or memory pressure freed it early.
type keptVersion struct {
	ref slab.Ref
	tag uint32
}

// keptList is the kept versions of one class, in the order kept, so tags never decrease: those before
// first are released, and n of the others are kept still (not NilRef).
type keptList struct {
	list  []keptVersion
	first int
	n     int
}

// keeper is a shard's kept versions. Every field is guarded by the shard's mu.
type keeper struct {
	cls []keptList // by class of the kept (head) chunk
	// epoch is the tag keys is for: the hashes of the keys that have a version kept under it.
	epoch uint32
	keys  map[uint64]struct{}
}

// keepTag says whether the version of the key of hash h that a change is about to replace is to be kept
// (see above), and its tag.
func (sh *shard) keepTag(h uint64) (uint32, bool) {
	k := sh.kept
	if k == nil {
		return 0, false
	}
	tag := uint32(sh.st.persist.back.SyncsBegun())
	if tag != k.epoch {
		clear(k.keys)
		k.epoch = tag
	}
	_, done := k.keys[h]
	return tag, !done
}

// retire frees the version at r (head chunk b) that a change has just unlinked, or keeps it (see above).
func (sh *shard) retire(h uint64, r slab.Ref, b []byte) {
	if b[offState]&flagGhost == 0 {
		if tag, ok := sh.keepTag(h); ok {
			sh.keepVersion(h, r, b, tag)
			return
		}
	}
	sh.freeHead(r, b)
}

// mayChangeInPlace says whether item b at r (key hash h) may change in its own chunk (undo.go): always,
// unless its synced version is to be kept (see above) and its chunk spans two disk blocks, which a power
// cut could leave one old and one new, and no copy made now could be relied on either (it may not reach
// the disk before them). Such a change writes a new chunk instead, and keeps the old one.
func (sh *shard) mayChangeInPlace(h uint64, r slab.Ref, b []byte) bool {
	if sh.kept == nil {
		return true
	}
	if start := int(r.Offset()); start/diskBlock == (start+len(b)-1)/diskBlock {
		return true
	}
	_, keep := sh.keepTag(h)
	return !keep
}

// keepVersion makes chunk b at r, which holds a sealed version of the key of hash h in no index, a kept
// version of tag.
func (sh *shard) keepVersion(h uint64, r slab.Ref, b []byte, tag uint32) {
	storeStateWord(b, kindUndo|b[offState]&flagChained, b[offMeta]|metaKept, tag)
	sh.al.Wrote(r, len(b))
	k := sh.kept
	k.keys[h] = struct{}{}
	l := &k.cls[sh.al.ClassOf(r)]
	l.list = append(l.list, keptVersion{ref: r, tag: tag})
	l.n++
	sh.st.persist.kept.Add(1)
}

// storeStateWord stores chunk b's state byte, meta byte and time field with one aligned 8-byte store: they
// lie in the chunk's second word (asserted above), whose other bytes it stores as they are.
func storeStateWord(b []byte, state, meta byte, time uint32) {
	var w [8]byte
	copy(w[:], b[offState:])
	w[0], w[offMeta-offState] = state, meta
	binary.LittleEndian.PutUint32(w[offTime-offState:], time)
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&b[offState])), binary.NativeEndian.Uint64(w[:]))
}

// isKeptVersion says whether chunk b is a kept version.
func isKeptVersion(b []byte) bool {
	return b[offState]&kindMask == kindUndo && b[offMeta]&metaKept != 0
}

// releaseKept frees the kept versions that a finished sync has made safe: done is the number of the last
// sync finished (slab.Backing.SyncsDone), and a version kept under tag waits for sync tag+1.
func (sh *shard) releaseKept(done uint64) {
	n := 0
	for id := range sh.kept.cls {
		l := &sh.kept.cls[id]
		for ; l.first < len(l.list) && int32(uint32(done)-l.list[l.first].tag) > 0; l.first++ {
			if r := l.list[l.first].ref; r != slab.NilRef {
				sh.freeItem(r)
				l.n--
				n++
			}
		}
		if l.first == len(l.list) {
			l.list, l.first = l.list[:0], 0
		} else if l.first > len(l.list)/2 {
			l.list = l.list[:copy(l.list, l.list[l.first:])]
			l.first = 0
		}
	}
	sh.st.persist.kept.Add(int64(-n))
}

// dropKept frees before their time the kept versions of class id that drop says to (a page move's page,
// memory pressure), up to most of them, oldest first; it returns how many.
func (sh *shard) dropKept(id, most int, drop func(r slab.Ref) bool) int {
	l := &sh.kept.cls[id]
	n := 0
	for i := l.first; i < len(l.list) && n < most; i++ {
		if r := l.list[i].ref; r != slab.NilRef && drop(r) {
			sh.freeItem(r)
			l.list[i].ref = slab.NilRef
			l.n--
			n++
		}
	}
	sh.st.persist.kept.Add(int64(-n))
	sh.st.persist.keptDropped.Add(int64(n))
	return n
}

// dropKeptIn frees the kept versions with a chunk in page p of class id, which is being drained: heads of
// the class, and chained ones (heads of the largest class) with a part there.
func (sh *shard) dropKeptIn(p uint32, id int) {
	if sh.kept == nil {
		return
	}
	in := func(r slab.Ref) bool { return sh.hasChunkIn(r, p) }
	sh.dropKept(id, len(sh.kept.cls[id].list), in)
	if big := sh.st.classes.Largest(); big != id {
		sh.dropKept(big, len(sh.kept.cls[big].list), in)
	}
}

// keptOver says whether class id's kept versions hold more than their share of its chunks (keptShare).
func (sh *shard) keptOver(id int) bool {
	if sh.kept == nil {
		return false
	}
	n := sh.kept.cls[id].n
	return n > 0 && n*keptShare > sh.al.Stats(id).TotalChunks
}

// dropKeptOf frees the oldest kept version of class id, for a class that needs a chunk (allocChunk); false
// when it holds none.
func (sh *shard) dropKeptOf(id int) bool {
	return sh.kept != nil && sh.dropKept(id, 1, func(slab.Ref) bool { return true }) == 1
}

// hasChunkIn says whether the item or kept version with head r has a chunk in page p.
func (sh *shard) hasChunkIn(head slab.Ref, p uint32) bool {
	if head.Page() == p {
		return true
	}
	if b := sh.chunk(head); itemChained(b) {
		for r := readRef(b[chainOff(b):]); r != slab.NilRef; r = readRef(sh.chunk(r)[offPartNext:]) {
			if r.Page() == p {
				return true
			}
		}
	}
	return false
}

// adoptKept lists a kept version a restart after a kill found (recoverItems) as kept by this process:
// what replaced it may be in the page cache only, until this process's first sync.
func (sh *shard) adoptKept(h uint64, r slab.Ref, b []byte) {
	tag, _ := sh.keepTag(h) // kept whether or not the key has another version kept
	sh.keepVersion(h, r, b, tag)
}
