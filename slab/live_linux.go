//go:build linux

package slab

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A live copy (--data-live, doc/design/restart-live.md): the items file the server maps is on
// tmpfs, in a directory of its own under the live root, and each sync copies the 4 KiB blocks written
// since the last one into the data directory's file itself. The kernel then never writes back a page the
// server stores to, so no store faults on a write-protected page. The tmpfs file survives the process
// (kill -9, the OOM killer), not a machine reboot: a start that finds no live copy of its data directory
// copies the directory's file into a new one.
//
// Blocks are marked by the owner of the chunk after it wrote them (Wrote, Free), with the owner's
// lock held; a sync takes the marks (each word swapped to 0), waits for every owner to leave what it is
// doing (Backing.SetQuiesce), then copies the blocks, so a block marked after the marks were taken is
// copied again at the next sync. A copy may catch an item half-written: the seal
// rules that make a machine reboot safe (rule 1 and rule 9) make it whole or absent.
type live struct {
	dir    string   // this data directory's live directory, under the live root (--data-live)
	items  *os.File // the data directory's own items file, written by sync
	direct int      // items opened O_DIRECT (-1: the file system refuses it; sync writes through items)
	// owed is set while the live copy is being made from the directory's files (a start that found none):
	// each adopted page is read in by its owner (Allocator.LoadPages) before it reads it, and the origin,
	// which makes the copy usable by a later start, is written once all are in (LiveLoaded).
	owed     atomic.Bool
	instance uint64
	// inCopy lists, while owed, the shards whose adopted pages the copy holds already: a start after a kill
	// that found the copy half made (resume); loadPage leaves their pages alone. Read-only once open.
	inCopy map[uint8]bool
	loaded *os.File // liveLoaded while owed (openLoaded), for ShardLoaded

	// marks has one bit per 4 KiB block of the items file; anonymous memory the kernel backs as bits are
	// set.
	marks []uint64

	// meta is the live copy's meta file: the header and every page record, written through (setMeta),
	// where the directory's meta gets its records only from syncs (commitJournal: rule 12).
	meta *os.File
	// movedBits has a bit for each page a page move wrote since the last sync took them (the page moved,
	// and the pages it copied items into or rewrote links in), or that was punched: a sync writes those
	// into the directory whole, through the journal. Anonymous memory, like marks.
	movedBits []uint64
	// pending has the same bits until a sync committed them: the live directory's file movedFile, mapped,
	// so that a start after a kill knows them (anonymous memory where tmpfs had no room for it).
	pending []uint64
	// drainMu is held shared by each page move, from BeginDrain to EndDrain, and alone by a sync while it
	// reads the live file: whatever it copies is then on one side of every move.
	drainMu sync.RWMutex
	// dirRecs is each page's record as the directory's meta holds it. Under syncMu once open.
	dirRecs []uint64

	syncMu sync.Mutex // one sync at a time; guards check
	// check has a bit for each block of the items file (as large as it was at the start) that the
	// directory's file may lack, after a start that found the live copy of a server that did
	// not stop cleanly: a sync reads those blocks from the directory and writes the ones that differ
	// (copyChanged). nil when there are none left.
	check []uint64
	// written counts the bytes syncs wrote into the directory's files.
	written atomic.Int64
}

// DefaultLiveRoot is where a data directory's live copy is kept unless --data-live names another root.
const DefaultLiveRoot = "/dev/shm"

const (
	blockShift = 12
	pageBlocks = PageSize >> blockShift // the blocks of a page
	// copyBlocks bounds the blocks a sync writes out of the live file while no page move may run: a move
	// waits for at most that write. Fewer, larger writes cost less CPU (doc/design/restart-costs.md).
	copyBlocks = 4 * pageBlocks
	itemsMarks = MaxPages * PageSize >> blockShift // bits for the items file
	liveOrigin = "origin"                          // in a live directory: the data directory's path and its instance
	// While a live copy is being made: the origin it will have (liveLoading), and the shards whose pages
	// are in it, one decimal a line (liveLoaded), so that a start after a kill goes on making it (resume).
	liveLoading = "loading"
	liveLoaded  = "loaded"
	livePrefix  = "leasecached-"
	// In a live directory: a bit for each page moved since the last sync that committed it (live.pending).
	movedFile  = "moved"
	movedBytes = MaxPages / 8
	// In the data directory: the root its live copy was last kept under (no file: DefaultLiveRoot), where
	// a start that keeps it elsewhere, or maps the directory's files, looks for a copy newer than them.
	liveRootFile = "live-root"
)

// recordedLiveRoot is the root data directory dir's live copy was last kept under (liveRootFile); one
// that is not a clean absolute path was damaged, and is taken for DefaultLiveRoot.
func recordedLiveRoot(dir string) string {
	if b, err := readSmall(filepath.Join(dir, liveRootFile), smallTextMax); err == nil {
		if root := string(b); filepath.IsAbs(root) && filepath.Clean(root) == root {
			return root
		}
	}
	return DefaultLiveRoot
}

// sameRoot reports whether live roots a and b are one directory ("" is none: the directory's files mapped).
func sameRoot(a, b string) bool {
	if a == "" || b == "" {
		return a == b
	}
	sa, err := os.Stat(a)
	if err != nil {
		return false
	}
	sb, err := os.Stat(b)
	return err == nil && os.SameFile(sa, sb)
}

// recordLiveRoot names root in data directory dir as where its live copy is kept from now on, unless it
// is named there already: absolute, and with its symlinks resolved, since a link pointed elsewhere later
// would hide the copy from the next start.
func recordLiveRoot(dir, root string) error {
	root, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	if old, err := readSmall(filepath.Join(dir, liveRootFile), smallTextMax); err == nil && string(old) == root {
		return nil
	}
	return writeFileAtomic(filepath.Join(dir, liveRootFile), root)
}

// liveDirFor is where data directory dir (already made) keeps its live copy under root: named by the
// directory's device and inode, so that a copy or a new directory at the same path gets a copy of its own.
func liveDirFor(root, dir string) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return "", err
	}
	return filepath.Join(root, fmt.Sprintf("%s%x-%x", livePrefix, st.Dev, st.Ino)), nil
}

// LiveRoom says why root cannot hold the live copy of data directory dir for a memory limit of
// memoryLimit bytes (nil: it can): it is not a tmpfs, or it has less room than that many pages, counting
// what dir's live copy there already holds. The limit bounds the pages a store takes (-m counts items and
// more), so a tmpfs with this room is never what makes a page refused.
func LiveRoom(root, dir string, memoryLimit int64) error {
	have, sized, err := liveHave(root, dir)
	if err != nil || !sized {
		return err // a tmpfs mounted without a size limit has room
	}
	pages := (memoryLimit + PageSize - 1) / PageSize
	need := pages*PageSize + movedBytes + headerBytes + (pages*recordBytes+4095)/4096*4096 // items, moved, meta
	if have < need {
		return fmt.Errorf("%s has %d MiB free, -m needs %d MiB there", root, have>>20, (need+1<<20-1)>>20)
	}
	return nil
}

// LiveRoomPages is how many pages a live copy of data directory dir under root has room for, by LiveRoom's
// count; ok is false when root is no tmpfs, or one without a size limit.
func LiveRoomPages(root, dir string) (pages int, ok bool) {
	have, sized, err := liveHave(root, dir)
	if err != nil || !sized {
		return 0, false
	}
	return int(max(have-movedBytes-headerBytes, 0) / (PageSize + recordBytes)), true
}

// liveHave is the room root, a tmpfs, has for data directory dir's live copy: its free room (freeBytes;
// sized is false when it tells none) and what dir's copies there hold, which the start frees or reuses.
func liveHave(root, dir string) (have int64, sized bool, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil {
		return 0, false, err
	}
	if st.Type != unix.TMPFS_MAGIC {
		return 0, false, fmt.Errorf("%s is not a tmpfs", root)
	}
	if have, sized = freeBytes(&st); !sized {
		return 0, false, nil
	}
	// dir's copy there, and the one under the root it was last kept under when that is on this tmpfs
	// too, are freed or reused by the start.
	var rst unix.Stat_t
	if err := unix.Stat(root, &rst); err != nil {
		return 0, false, err
	}
	have += discardHeld(rst.Dev)
	here, _ := liveDirFor(root, dir)
	for i, r := range []string{root, recordedLiveRoot(dir)} {
		d, err := liveDirFor(r, dir)
		if err != nil || i > 0 && d == here {
			continue
		}
		for _, name := range []string{"items", "meta", movedFile} {
			var fst unix.Stat_t
			if unix.Stat(filepath.Join(d, name), &fst) == nil && fst.Dev == rst.Dev {
				have += fst.Blocks * 512
			}
		}
	}
	return have, true, nil
}

// freeBytes is the room st's file system has for this process's files: what it has free, less what is
// reserved for root unless the process is root; ok is false when the file system tells no size (a tmpfs
// mounted with size=0, some FUSE file systems): the room is unknown, not none.
func freeBytes(st *unix.Statfs_t) (free int64, ok bool) {
	if st.Blocks == 0 {
		return 0, false
	}
	if os.Geteuid() == 0 {
		return int64(st.Bfree) * st.Bsize, true
	}
	return int64(st.Bavail) * st.Bsize, true
}

// dropLive removes data directory dir's live copy under root, if any: a start without a live copy
// changes dir's files, after which that copy is stale and nothing would free its memory.
func dropLive(root, dir string) {
	if d, err := liveDirFor(root, dir); err == nil {
		removeAllSoon(d)
	}
}

// catchUpLive brings the directory's files up to data directory dir's live copy under root, for a
// start that maps the directory's own files (--data-live off) or keeps the copy under another root; hdr is
// the stored header, meta and items the directory's files. A copy that is the newest (its origin names dir
// and the header's instance, as openLive requires) and whose server did not stop cleanly is ahead of the
// directory by up to a sync's interval, anywhere: mapped as it is, the directory would bring back what
// the last seconds before the stop deleted or overwrote. So, as a sync does (rule 12), every block the
// copy holds of a page whose record is the directory's and differs from the directory's is written over it,
// every hole of it punched there, and the file synced; then the pages whose records differ (moved since) go
// in whole through the journal. A copy still being made holds only the pages of the shards it lists.
// caughtUp is the copy written in, "" when there was none to write; written is how many bytes of blocks
// were written in place.
func catchUpLive(root, dir string, hdr []byte, meta, items *os.File) (caughtUp string, written int64, err error) {
	ld, inCopy, resumed, ok := liveToCatchUp(root, dir, hdr)
	if !ok {
		return "", 0, nil
	}
	f, err := os.Open(filepath.Join(ld, "items"))
	if err != nil {
		return "", written, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", written, err
	}
	size := st.Size()
	if dst, err := items.Stat(); err != nil {
		return "", written, err
	} else if dst.Size() < size {
		if err := items.Truncate(size); err != nil {
			return "", written, err
		}
	}
	pages := size / PageSize
	dirRecs := readRecords(meta, pages)
	liveRecs := dirRecs // a copy made before rule 12 has no meta: the directory's records were written through
	if lm, err := os.Open(filepath.Join(ld, "meta")); err == nil {
		if fi, err := lm.Stat(); err == nil && fi.Size() > 0 {
			liveRecs = readRecords(lm, pages)
		}
		_ = lm.Close()
	}
	pending, _ := readSmall(filepath.Join(ld, movedFile), movedBytes) // the pages moved since its last sync
	wasMoved := func(id int64) bool { return id>>3 < int64(len(pending)) && pending[id>>3]&(1<<(id&7)) != 0 }
	src := &liveFile{f: f}
	src.scan((size + 1<<blockShift - 1) >> blockShift)
	buf, stored := make([]byte, PageSize), make([]byte, PageSize)
	var moved []movedPage
	for id := range pages {
		rec := liveRecs[id]
		_, owner, inUse := decodeRecord(rec)
		// A page moved goes in whole, through the journal, as a sync's would; one whose record changed
		// where the directory's names it in use may have been (openLiveMeta).
		if m := wasMoved(id) || rec != dirRecs[id] && recInUseOf(dirRecs[id]); m || rec != dirRecs[id] {
			moved = append(moved, movedPage{id: uint32(id), rec: rec, image: imageWanted(m, rec)})
			if m || !inUse {
				continue
			}
		}
		if resumed && (!inUse || !inCopy[owner]) {
			continue // a page the copy being made does not hold yet
		}
		n, err := catchUpRange(src, items, buf, stored, id*PageSize, (id+1)*PageSize)
		written += n
		if err != nil {
			return "", written, err
		}
	}
	if err := items.Sync(); err != nil {
		return "", written, err
	}
	if len(moved) == 0 {
		return ld, written, nil
	}
	w := openJournal(dir, binary.LittleEndian.Uint64(hdr[hdrSealKey:]), meta, items, moved)
	for _, p := range moved {
		if p.image {
			w.writePage(src, p.id)
		}
	}
	if _, err := commitJournal(dir, w, meta, items, moved, nil); err != nil {
		return "", written, err
	}
	return ld, written, nil
}

// liveToCatchUp finds the live copy of data directory dir under root that catchUpLive writes into dir's
// files (hdr is their stored header): ok when there is one, in live directory ld, resumed when it was still
// being made, with the shards whose pages it holds (inCopy).
func liveToCatchUp(root, dir string, hdr []byte) (ld string, inCopy map[uint8]bool, resumed, ok bool) {
	le := binary.LittleEndian
	instance := le.Uint64(hdr[hdrInstance:])
	if instance == 0 || le.Uint64(hdr[hdrClean:]) == instance {
		return "", nil, false, false // no live copy was made from these files since, or its server stopped cleanly
	}
	ld, err := liveDirFor(root, dir)
	if err != nil {
		return "", nil, false, false
	}
	inCopy, found, resumed, _ := liveState(ld, dir, instance) // readable: OpenBacking checked
	if !found && !resumed {
		return "", nil, false, false // none, or not the newest: the directory is
	}
	return ld, inCopy, resumed, true
}

// readRecords reads the first n page records of meta file f (zero where it has none).
func readRecords(f *os.File, n int64) []uint64 {
	b := make([]byte, n*recordBytes)
	_, _ = f.ReadAt(b, headerBytes) // records past the file's end are whole in no page
	out := make([]uint64, n)
	for i := range out {
		out[i] = binary.LittleEndian.Uint64(b[i*recordBytes:])
	}
	return out
}

// readRange fills p with the live file's bytes from off, zeros for its holes and past its end. It reads
// the file, not the mapping: a hole is then neither allocated (scan) nor taken on the scan's word, which
// before Linux 6.4 may call a region being collapsed onto a huge page a hole (restart-live.md rule 13).
func readRange(src *liveFile, p []byte, off int64) error {
	clear(p)
	return readInto(src.f, p, off)
}

// zeros says whether p is all zeros, as a hole reads.
func zeros(p []byte) bool {
	for len(p) > 0 {
		n := min(len(p), len(zeroBlock))
		if !bytes.Equal(p[:n], zeroBlock[:n]) {
			return false
		}
		p = p[n:]
	}
	return true
}

// catchUpRange makes the page at bytes [from, to) of the directory's items what the live file src holds
// there, and returns how many bytes it wrote: it reads both (into live and stored, a page each), writes
// the blocks that differ and punches those src has a hole for. After a kill the directory is behind the
// copy by what came after the last sync only, and reading it costs less than writing and syncing it all
// (restart-live.md).
func catchUpRange(src *liveFile, items *os.File, live, stored []byte, from, to int64) (written int64, err error) {
	n := to - from
	live, stored = live[:n], stored[:n]
	if err := readRange(src, live, from); err != nil {
		return 0, err
	}
	clear(stored) // the directory's file may end before to
	if err := readInto(items, stored, from); err != nil {
		return 0, err
	}
	var data [pageBlocks]bool // which blocks src holds: the others are holes, read as zeros
	blocks := n >> blockShift
	src.holds(from>>blockShift, data[:blocks])
	block := func(p []byte, i int64) []byte { return p[i<<blockShift : (i+1)<<blockShift] }
	for i := range blocks { // a block the scan passed over that reads as bytes is no hole (readRange)
		data[i] = data[i] || !zeros(block(live, i))
	}
	differs := func(i int64) bool { return !bytes.Equal(block(live, i), block(stored, i)) }
	for i := int64(0); i < blocks; {
		start, hole := i, !data[i]
		for i < blocks && differs(i) && !data[i] == hole { // a run of changed blocks, all holes or none
			i++
		}
		if i == start {
			i++
			continue
		}
		at, size := from+start<<blockShift, (i-start)<<blockShift
		if hole {
			err = punchFile(items, at, size)
		} else {
			_, err = items.WriteAt(live[start<<blockShift:i<<blockShift], at)
			written += size
		}
		if err != nil {
			return written, err
		}
	}
	return written, nil
}

// liveState reads live directory ld of data directory dir, whose header names instance: found when it is
// a whole copy of it (its origin), resumed when one was being made and its server was killed (liveLoading),
// with the shards whose pages it holds.
//
// A file that cannot be read for want of permission or by an I/O error is an error, not an absent or
// damaged file: the copy may be whole and newer than the directory, and a start that took it for absent
// would make its next start (once the file is readable again) lose what it holds beyond the last sync.
func liveState(ld, dir string, instance uint64) (inCopy map[uint8]bool, found, resumed bool, err error) {
	want := (*live)(nil).originText(dir, instance)
	if instance == 0 {
		return nil, false, false, nil
	}
	origin, err := readLiveFile(ld, liveOrigin, smallTextMax)
	if err != nil {
		return nil, false, false, err
	}
	if string(origin) != want {
		if loading, err := readLiveFile(ld, liveLoading, smallTextMax); err != nil || string(loading) != want {
			return nil, false, false, err
		}
		loaded, err := readLiveFile(ld, liveLoaded, loadedMax)
		if err != nil {
			return nil, false, false, err
		}
		inCopy = map[uint8]bool{}
		for _, line := range strings.Split(string(loaded), "\n") {
			if n, err := strconv.ParseUint(line, 10, 8); err == nil {
				inCopy[uint8(n)] = true
			}
		}
	}
	// Its items is read too (loadPage, catchUpLive): unreadable, no start.
	if err := readableFile(filepath.Join(ld, "items")); err != nil {
		return nil, false, false, err
	}
	return inCopy, inCopy == nil, inCopy != nil, nil
}

// readLiveFile is readSmall of live directory ld's file name: nil, nil for a file that is missing or
// damaged (not a regular file, too long), an error when it cannot be read (liveState).
func readLiveFile(ld, name string, limit int64) ([]byte, error) {
	b, err := readSmall(filepath.Join(ld, name), limit)
	if err != nil {
		return nil, unreadable(err)
	}
	return b, nil
}

// readableFile is nil when path can be opened for reading or is missing, else why not (unreadable). It
// opens without blocking, as readSmall does: a FIFO must not hold the start.
func readableFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return unreadable(err)
	}
	return f.Close()
}

// unreadable is an error when err says that a live copy's file is there but cannot be read now
// (permission, an I/O error, no file descriptors or memory left), else nil: the file is missing or
// damaged (liveState).
func unreadable(err error) error {
	for _, e := range []error{fs.ErrPermission, unix.EIO, unix.EMFILE, unix.ENFILE, unix.ENOMEM} {
		if errors.Is(err, e) {
			return fmt.Errorf("cannot read its live copy: %w", err)
		}
	}
	return nil
}

// OnTmpfs reports whether path is on a tmpfs, where --data-live is meant to be: elsewhere the kernel
// writes the live copy back as it would the data directory's files.
func OnTmpfs(path string) bool {
	var st unix.Statfs_t
	return unix.Statfs(path, &st) == nil && st.Type == unix.TMPFS_MAGIC
}

// sweepLive removes the live copies under root whose data directory is gone (removed, or replaced by
// another one at its path): nothing else would ever free their memory. A live directory naming no data
// directory yet (neither origin nor liveLoading) may be being made by a server starting now, and is left
// alone.
func sweepLive(root string) {
	ents, _ := os.ReadDir(root)
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), livePrefix) {
			continue
		}
		d := filepath.Join(root, e.Name())
		origin, err := readSmall(filepath.Join(d, liveOrigin), smallTextMax)
		if err != nil {
			if origin, err = readSmall(filepath.Join(d, liveLoading), smallTextMax); err != nil {
				continue
			}
		}
		path, _, _ := strings.Cut(strings.TrimSuffix(string(origin), "\n"), "\n")
		if now, err := liveDirFor(root, path); err != nil || now != d {
			// Not removeAllSoon: a server whose directory was renamed, or one in another mount
			// namespace sharing root, may still map the copy, which unlinking leaves it.
			_ = os.RemoveAll(d)
		}
	}
}

// newInstance names a data directory's contents, so that a live copy is used only with the files it
// was copied from.
func newInstance() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:]) | 1
}

// openLive makes b's items file the live copy's, under root. usable says whether the stored data in b's
// directory is used (OpenBacking's reason was ""). The directory's file is b.items when openLive is
// called; it keeps it for sync and opens the live one in its place. A new live copy is made as large as
// the directory's file and filled page by page later (owed), so that the listener need
// not wait for it.
func (b *Backing) openLive(root string, usable bool) error {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return err
	}
	sweepLive(root)
	dir, err := liveDirFor(root, b.dir)
	if err != nil {
		return err
	}
	instance := atomic.LoadUint64(b.counter(hdrInstance))
	inCopy, found, resumed, _ := liveState(dir, b.dir, instance) // readable: OpenBacking checked
	l := &live{dir: dir, items: b.items, direct: -1}
	b.items, b.live = nil, l
	if !usable {
		found, resumed = false, false
	}
	fresh := !found && !resumed
	if fresh {
		// What the directory holds is the newest there is: a new live copy is made of it.
		removeAllSoon(dir)
		instance = newInstance()
		b.setMeta(hdrInstance, instance)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := b.openLiveMeta(fresh); err != nil {
		return err
	}
	if b.items, err = os.OpenFile(filepath.Join(dir, "items"), os.O_RDWR|os.O_CREATE, 0o600); err != nil {
		return err
	}
	if fresh {
		if err := b.items.Truncate(0); err != nil {
			return err
		}
		noCow(b.items) // a root that is not a tmpfs may be btrfs (UnkeptReservations)
	}
	if !found { // as large as the directory's file: every page id it names is read in (a resumed copy too)
		have, err := fileSize(b.items)
		if err != nil {
			return err
		}
		want, err := fileSize(l.items)
		if err != nil {
			return err
		}
		if want > have {
			if err := b.items.Truncate(want); err != nil {
				return err
			}
		}
	}
	l.instance, l.inCopy = instance, inCopy
	if !found {
		// Named only once the copy is as large as the directory's file: a start that resumes it reads
		// every page id in, and its adopted pages are those of the files' sizes.
		if fresh {
			if err := writeFileAtomic(filepath.Join(dir, liveLoading), l.originText(b.dir, instance)); err != nil {
				return err
			}
		}
		if err := l.openLoaded(); err != nil {
			return err
		}
		l.owed.Store(true)
	}
	if fd, err := unix.Open(l.items.Name(), unix.O_RDWR|unix.O_DIRECT|unix.O_CLOEXEC, 0); err == nil {
		l.direct = fd
	}
	m, err := mapBytes(itemsMarks / 8)
	if err != nil {
		return err
	}
	l.marks = unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(m))), len(m)/8)
	if !fresh && atomic.LoadUint64(b.counter(hdrClean)) != instance {
		// The server that wrote the live copy did not stop cleanly: the directory's files may be behind
		// it anywhere, so the first sync once the copy is whole compares every block.
		b.checkAllLive()
	}
	b.setMeta(hdrClean, 0) // until a clean stop has copied everything again
	return nil
}

// openLiveMeta opens the live copy's meta. A fresh copy's is made of the directory's (in metaMem); a copy
// found or resumed has the newest page records, read into metaMem over the directory's. A copy made by a
// build before rule 12 has none: the directory's records are its, then, written through by that build.
// It also keeps the directory's records (dirRecs) and marks every page whose record differs as moved: a
// server killed since its last sync leaves them for the next.
func (b *Backing) openLiveMeta(fresh bool) error {
	l := b.live
	recs, err := mapBytes(MaxPages * recordBytes)
	if err != nil {
		return err
	}
	l.dirRecs = unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(recs))), MaxPages)
	moved, err := mapBytes(movedBytes)
	if err != nil {
		return err
	}
	l.movedBits = unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(moved))), MaxPages/64)
	if err := l.openPending(fresh); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(l.dir, "meta"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	b.metaMu.Lock()
	defer b.metaMu.Unlock()
	pages := (b.metaEnd - headerBytes + recordBytes - 1) / recordBytes
	for id := range max(pages, 0) {
		l.dirRecs[id] = atomic.LoadUint64(b.recordWord(uint32(id)))
	}
	st, err := f.Stat()
	write := max(b.metaEnd, headerBytes) // a fresh copy's meta is the directory's
	if err == nil && !fresh && st.Size() > 0 {
		clear(b.metaMem[headerBytes:max(b.metaEnd, headerBytes)])
		var end int
		end, err = readData(f, b.metaMem, headerBytes)
		b.metaEnd = max(b.metaEnd, end)
		pages = (b.metaEnd - headerBytes + recordBytes - 1) / recordBytes
		for id := range max(pages, 0) {
			// A page the directory's record names that changed since its last sync may have been moved:
			// it goes in whole. One the directory's record leaves unused is read by no start.
			if rec := atomic.LoadUint64(b.recordWord(uint32(id))); rec != l.dirRecs[id] && recInUseOf(l.dirRecs[id]) {
				l.moved(uint32(id))
			}
		}
		write = headerBytes // the directory's header is the newest
	} else if err == nil {
		err = f.Truncate(0)
	}
	if err == nil {
		err = reserve(f, 0, headerBytes)
	}
	if err == nil {
		_, err = f.WriteAt(b.metaMem[:write], 0)
	}
	if err != nil {
		_ = f.Close()
		return err
	}
	l.meta = f
	return nil
}

// openPending maps the live directory's movedFile as pending; fresh empties it, and otherwise its pages,
// moved before a kill and not committed since, are marked moved again. Its blocks are reserved first: a
// store into a hole of a full tmpfs gets SIGBUS. Where they cannot be, pending is anonymous memory, and a
// start after a kill has openLiveMeta's rule only.
func (l *live) openPending(fresh bool) error {
	path := filepath.Join(l.dir, movedFile)
	var old []byte // the marks of a kill, kept where the file cannot be mapped
	if !fresh {
		old, _ = readSmall(path, movedBytes)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err == nil && fresh {
		err = f.Truncate(0)
	}
	if err == nil {
		noCow(f) // a root that is not a tmpfs may be btrfs, as for items (UnkeptReservations)
		err = fallocate(f, 0, 0, movedBytes)
	}
	var mem []byte
	if err == nil {
		mem, err = unix.Mmap(int(f.Fd()), 0, movedBytes, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	}
	if f != nil {
		_ = f.Close() // the mapping keeps the file
	}
	if err != nil {
		_ = os.Remove(path) // not to be read by a later start: it would lack what this one moves
		if mem, err = mapBytes(movedBytes); err != nil {
			return err
		}
		copy(mem, old)
	}
	l.pending = unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(mem))), MaxPages/64)
	orBits(l.movedBits, l.pending)
	return nil
}

// loadPage reads page id of the directory's file into the live copy, while the copy is owed, unless
// the copy holds it already (inCopy).
func (b *Backing) loadPage(id uint32) error {
	l := b.live
	if l == nil || !l.owed.Load() {
		return nil
	}
	if _, owner, ok := decodeRecord(atomic.LoadUint64(b.recordWord(id))); ok && l.inCopy[owner] {
		return nil
	}
	return readInto(l.items, b.itemsMem[int64(id)*PageSize:int64(id+1)*PageSize], int64(id)*PageSize)
}

// storedOnce is page id as stored, to be read once (StoredChunks, for a page no allocator adopts): while
// a live copy is being made, a copy of the directory's page of its own rather than the live copy's,
// where the page is not wanted and a full tmpfs could not hold it; otherwise stored's. Nil when it cannot
// be read.
func (b *Backing) storedOnce(id uint32) []byte {
	l := b.live
	if l == nil || !l.owed.Load() {
		return b.stored(id)
	}
	p := make([]byte, PageSize)
	if readInto(l.items, p, int64(id)*PageSize) != nil {
		return nil
	}
	return p
}

// readInto fills p from f at off; past f's end p is left as it is (zeros).
func readInto(f *os.File, p []byte, off int64) error {
	if _, err := f.ReadAt(p, off); err != nil && err != io.EOF {
		return fmt.Errorf("slab: reading %s: %w", f.Name(), err)
	}
	return nil
}

// LiveLoaded ends the making of a live copy (every adopted page was loaded): it gets its origin, so
// that a later start uses it. Before that a start resumes the copy (liveState). Without a live copy
// being made it does nothing. The origin is liveLoading renamed, which holds its text: a rename needs no
// new room, so a full tmpfs, on which ShardLoaded may have failed, does not fail it too.
func (b *Backing) LiveLoaded() error {
	l := b.live
	if l == nil || !l.owed.Load() {
		return nil
	}
	l.owed.Store(false)
	if l.loaded != nil {
		_ = l.loaded.Close()
		l.loaded = nil
	}
	origin := filepath.Join(l.dir, liveOrigin)
	err := os.Rename(filepath.Join(l.dir, liveLoading), origin)
	if err != nil {
		err = writeFileAtomic(origin, l.originText(b.dir, l.instance))
	}
	if err == nil {
		_ = os.Remove(filepath.Join(l.dir, liveLoading))
		_ = os.Remove(filepath.Join(l.dir, liveLoaded))
	}
	return err
}

// ShardLoaded records, while a live copy is being made, that shard owner's pages are in it, before the
// shard changes any of them: a start after a kill keeps them (resume), where the directory lacks what
// the shard changed since. Without a live copy being made it does nothing. The file is open and its room
// reserved already (openLoaded), so this write does not fail on a full tmpfs or for want of a
// descriptor; if it fails all the same, the caller must not let the shard change its pages before
// LiveLoaded.
func (b *Backing) ShardLoaded(owner int) error {
	l := b.live
	if l == nil || !l.owed.Load() {
		return nil
	}
	_, err := l.loaded.WriteString(strconv.Itoa(owner) + "\n") // O_APPEND: one write a line, whole
	return err
}

// openLoaded opens liveLoaded for ShardLoaded, with room for a line per shard id reserved.
func (l *live) openLoaded() error {
	f, err := os.OpenFile(filepath.Join(l.dir, liveLoaded), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	// A line per shard (at most 64) for several resumed starts, each of which lists them all again. On a
	// tmpfs already full the file goes without: a shard ShardLoaded fails for stays locked instead.
	const room = 4 << 10
	err = fallocate(f, unix.FALLOC_FL_KEEP_SIZE, 0, room)
	if err != nil && !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOSPC) {
		_ = f.Close()
		return fmt.Errorf("slab: reserving %s: %w", f.Name(), err)
	}
	l.loaded = f
	return nil
}

// originText is what a live copy's origin file holds: the data directory and its instance (l may be nil).
func (l *live) originText(dir string, instance uint64) string {
	return dir + "\n" + strconv.FormatUint(instance, 16) + "\n"
}

// markAllLive marks every block of the live file (called before it is shared).
func (b *Backing) markAllLive() {
	if st, err := b.items.Stat(); err == nil {
		setBits(b.live.marks, 0, st.Size()>>blockShift)
	}
}

// checkAllLive lists every block of the live file for the next sync to compare with the directory's.
func (b *Backing) checkAllLive() {
	if st, err := b.items.Stat(); err == nil {
		n := st.Size() >> blockShift
		b.live.check = make([]uint64, (n+63)>>6)
		setBits(b.live.check, 0, n)
	}
}

func setBits(w []uint64, from, to int64) {
	for i := from; i < to; i++ {
		w[i>>6] |= 1 << (i & 63)
	}
}

// mark records that bytes [off, off+n) of the items file were written. Only a word whose bits are not all
// set yet is written, so that a block stored to again and again costs a load.
func (l *live) mark(off, n int) {
	first, last := off>>blockShift, (off+n-1)>>blockShift
	if first == last { // a chunk inside one block: most are
		bit := uint64(1) << (first & 63)
		if p := &l.marks[first>>6]; atomic.LoadUint64(p)&bit == 0 {
			atomic.OrUint64(p, bit)
		}
		return
	}
	for first <= last {
		w := first >> 6
		hi := min(last, w<<6|63)
		bits := ^uint64(0) >> (63 - (hi - first)) << (first & 63)
		if p := &l.marks[w]; atomic.LoadUint64(p)&bits != bits {
			atomic.OrUint64(p, bits)
		}
		first = hi + 1
	}
}

// moved records that a page move wrote page id, or that it was punched: in pending, then in movedBits.
func (l *live) moved(id uint32) {
	for _, w := range [][]uint64{l.pending, l.movedBits} {
		p, bit := &w[id>>6], uint64(1)<<(id&63)
		if atomic.LoadUint64(p)&bit == 0 {
			atomic.OrUint64(p, bit)
		}
	}
}

// movesOwed says whether a page moved is still to be written into the directory.
func (l *live) movesOwed() bool {
	for i := range l.movedBits {
		if atomic.LoadUint64(&l.movedBits[i]) != 0 {
			return true
		}
	}
	return false
}

// drainBegins holds off a live copy's sync from reading the live file until drainEnds (drainMu), and
// marks page p moved.
func (b *Backing) drainBegins(p uint32) {
	if b == nil || b.live == nil {
		return
	}
	b.live.drainMu.RLock()
	b.live.moved(p)
}

// drainEnds ends what drainBegins began.
func (b *Backing) drainEnds() {
	if b == nil || b.live == nil {
		return
	}
	b.live.drainMu.RUnlock()
}

// syncLive copies what was written to the live file since the last sync into the directory's files and
// syncs them, in two steps (restart-live.md rules 10 and 12). It takes the marks, lets every chunk owner
// finish what it is writing (quiesce: a block its owner marked before the marks were taken is then whole
// in memory), then takes the pages moved. First it copies the marked blocks of the other pages, and
// syncs: whatever a move copied out of a page, or rewrote in place, is then in the directory on the new
// side as well as the old. Then the pages moved, and the records that changed, go in through the journal
// (commitLive). A block that cannot be written is marked again, for the next sync, and the moves wait
// for it.
func (b *Backing) syncLive(size int64) error {
	l := b.live
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	n := b.syncsBegun.Add(1) // numbered before the marks are taken: what was marked until then is in it
	taken := l.take(size >> blockShift)
	if b.quiesce != nil {
		b.quiesce()
	}
	moved := l.takeMoved()
	// A page moved may have been taken since size was read (a rescue's): the file is read as large as it
	// is now. Pages taken from now on are a later move's, which commitLive takes in.
	size = b.itemsLen()
	if st, err := l.items.Stat(); err != nil || st.Size() < size {
		if err := l.items.Truncate(size); err != nil {
			l.putBack(taken)
			l.putBackMoved(moved)
			return errors.Join(err, b.syncMeta())
		}
	}
	src := liveFile{f: b.items, mem: b.itemsMem}
	src.scan(size >> blockShift)
	errs := []error{b.copyTaken(&src, taken, moved)}
	if l.check != nil && !l.owed.Load() { // pages not read in yet are holes: not to punch in DIR
		errs = append(errs, l.copyChanged(&src, taken, moved))
	}
	errs = append(errs, l.items.Sync())
	if err := errors.Join(errs...); err != nil {
		l.putBackMoved(moved) // the copies the moves made may be missing: their sources stay
		return errors.Join(err, b.syncMeta())
	}
	b.step("items")
	err := b.commitLive(&src, size, moved)
	if err == nil && b.adopted.Load() {
		b.setMeta(hdrSyncs, n) // as Sync's: for the versions kept until one (Keeps)
	}
	return errors.Join(err, b.syncMeta())
}

// step calls the test's SetSyncSteps function, if any.
func (b *Backing) step(name string) {
	if b.syncSteps != nil {
		b.syncSteps(name)
	}
}

// commitLive writes into the directory, through the journal (commitJournal), every page in moved whole
// and each page record that differs from the directory's; src holds the live file's first size bytes.
// The pages are written into the journal, a page at a time (journalWriter.writePage), and the records
// taken, while no page move runs (drainMu). The pages a move wrote since moved was taken go in whole too:
// the copy of the other pages' blocks left theirs for the next sync, and taken together here, under the
// lock, they hold every side of those moves as of now.
func (b *Backing) commitLive(src *liveFile, size int64, moved []uint64) error {
	l := b.live
	// A journal left by a commit whose writes in place failed is applied here, not under the lock, where
	// openJournal would: moves wait for the lock.
	if err := replayJournal(b.dir, b.SealKey(), b.meta, l.items); err != nil {
		l.putBackMoved(moved)
		return err
	}
	l.drainMu.Lock()
	if late := l.takeMoved(); late != nil {
		if moved == nil {
			moved = make([]uint64, len(late))
		}
		orBits(moved, late)
		size = max(size, b.itemsLen()) // a late move's rescue may have taken a page since
		src.scan(size >> blockShift)   // and punched pages since the first scan
	}
	b.metaMu.Lock()
	pages := uint32(max((b.metaEnd-headerBytes)/recordBytes, 0))
	b.metaMu.Unlock()
	var out []movedPage
	for id := range pages {
		rec := atomic.LoadUint64(b.recordWord(id))
		if m := pageSet(moved, id); m || rec != l.dirRecs[id] {
			out = append(out, movedPage{id: id, rec: rec, image: imageWanted(m && int64(id+1)*PageSize <= size, rec)})
		}
	}
	if len(out) == 0 {
		l.drainMu.Unlock()
		l.committed(moved)
		return nil
	}
	w := openJournal(b.dir, b.SealKey(), b.meta, l.items, out)
	for _, p := range out {
		if p.image {
			w.writePage(src, p.id)
		}
	}
	l.drainMu.Unlock()
	written, err := commitJournal(b.dir, w, b.meta, l.items, out, b.syncSteps)
	l.written.Add(written)
	if err != nil {
		l.putBackMoved(moved)
		return err
	}
	for _, p := range out {
		l.dirRecs[p.id] = p.rec
	}
	l.committed(moved)
	return nil
}

// imageWanted says whether a page moved (m) whose record rec is in use goes into the journal whole.
func imageWanted(m bool, rec uint64) bool { return m && recInUseOf(rec) }

// isMoved says whether page id was marked moved since the last takeMoved.
func (l *live) isMoved(id uint32) bool {
	return atomic.LoadUint64(&l.movedBits[id>>6])&(1<<(id&63)) != 0
}

// takeMoved takes the pages marked moved since it last did (the words holding them, swapped to 0): nil
// when there are none. They stay in pending until committed.
func (l *live) takeMoved() []uint64 {
	var taken []uint64
	for i := range l.movedBits {
		if p := &l.movedBits[i]; atomic.LoadUint64(p) != 0 {
			if taken == nil {
				taken = make([]uint64, len(l.movedBits))
			}
			taken[i] = atomic.SwapUint64(p, 0)
		}
	}
	return taken
}

// committed takes the pages of taken, now in the directory, out of pending, but those marked moved again
// since (in movedBits): pending is for a start after a kill, which would otherwise not know them.
func (l *live) committed(taken []uint64) {
	l.drainMu.Lock() // no move marks a page meanwhile (a punch outside one is a start's: openLiveMeta's rule)
	defer l.drainMu.Unlock()
	for i, w := range taken {
		if w != 0 {
			atomic.AndUint64(&l.pending[i], ^(w &^ atomic.LoadUint64(&l.movedBits[i])))
		}
	}
}

// putBackMoved marks the pages of taken moved again.
func (l *live) putBackMoved(taken []uint64) { orBits(l.movedBits, taken) }

// take takes the marks of blocks 0..n of the items file: the words holding them, swapped to 0. Bits past
// n (a file that grew since its size was read) are put back.
func (l *live) take(n int64) []uint64 {
	taken := make([]uint64, (n+63)>>6)
	for i := range taken {
		if p := &l.marks[i]; atomic.LoadUint64(p) != 0 {
			taken[i] = atomic.SwapUint64(p, 0)
		}
	}
	if rest := n & 63; rest != 0 {
		last := &taken[len(taken)-1]
		if over := *last &^ (1<<rest - 1); over != 0 {
			atomic.OrUint64(&l.marks[len(taken)-1], over)
			*last &^= over
		}
	}
	return taken
}

// putBack marks again the blocks of taken.
func (l *live) putBack(taken []uint64) { orBits(l.marks, taken) }

// orBits sets in dst, word by word and atomically, the bits set in src (no longer than dst).
func orBits(dst, src []uint64) {
	for i, v := range src {
		if v != 0 {
			atomic.OrUint64(&dst[i], v)
		}
	}
}

// liveFile is a live file, its mapping, and the runs of blocks it holds (scan).
type liveFile struct {
	f    *os.File
	mem  []byte
	data [][2]int64 // the runs [first, end) of blocks holding data, in order
}

// scan finds the runs of the first n blocks that the file holds, skipping its holes (pages punched out
// of the live copy), with SEEK_DATA and SEEK_HOLE: a syscall or two a hole, once a sync. A hole must
// not be read through the mapping, not even by a write(2) from it: on tmpfs the read allocates the page
// again, zeros held until it is punched once more, and on a full tmpfs it fails. A page punched after
// the scan is read all the same, once (the race the scan leaves open). Where the file system cannot
// tell, every block is data.
func (src *liveFile) scan(n int64) {
	fd := int(src.f.Fd())
	src.data = src.data[:0]
	for pos, stop := int64(0), n<<blockShift; pos < stop; {
		d, err := unix.Seek(fd, pos, unix.SEEK_DATA)
		switch {
		case err == unix.ENXIO: // holes from pos to the end of the file
			return
		case err != nil:
			src.data = append(src.data, [2]int64{pos >> blockShift, n})
			return
		case d >= stop:
			return
		}
		h, err := unix.Seek(fd, d, unix.SEEK_HOLE)
		if err != nil {
			h = stop
		}
		h = min(h, stop)
		src.data = append(src.data, [2]int64{d >> blockShift, (h + 1<<blockShift - 1) >> blockShift})
		pos = h
	}
}

// dataRuns calls fn for each run [s, e) of blocks within [start, end) that the file holds (scan).
func (src *liveFile) dataRuns(start, end int64, fn func(s, e int64)) {
	i, _ := slices.BinarySearchFunc(src.data, start, func(r [2]int64, t int64) int { return cmp.Compare(r[1], t+1) })
	for ; i < len(src.data) && src.data[i][0] < end; i++ {
		if s, e := max(src.data[i][0], start), min(src.data[i][1], end); s < e {
			fn(s, e)
		}
	}
}

// holds sets data[i] to whether the file holds block first+i (dataRuns), for each i of data.
func (src *liveFile) holds(first int64, data []bool) {
	clear(data)
	src.dataRuns(first, first+int64(len(data)), func(s, e int64) {
		for i := s; i < e; i++ {
			data[i-first] = true
		}
	})
}

// confirmHoles reads from the file the blocks from first that data says are holes (holds), a run of them
// at a time into *buf (made as large as data's blocks if it is not), and sets data for those that read as
// anything but zeros (readRange): the scan may show a hole where there is none.
func (src *liveFile) confirmHoles(data []bool, first int64, buf *[]byte) error {
	for i := 0; i < len(data); {
		if data[i] {
			i++
			continue
		}
		s := i
		for i < len(data) && !data[i] {
			i++
		}
		if len(*buf) < len(data)<<blockShift {
			*buf = make([]byte, len(data)<<blockShift)
		}
		p := (*buf)[:(i-s)<<blockShift]
		if err := readRange(src, p, (first+int64(s))<<blockShift); err != nil {
			return err
		}
		for j := s; j < i; j++ {
			data[j] = !zeros(p[(j-s)<<blockShift : (j-s+1)<<blockShift])
		}
	}
	return nil
}

// copyTaken writes every block taken marked from src to the directory's file, except those of the pages
// in moved (commitLive writes them whole), a run of consecutive blocks in one write (dataRuns: a block
// punched out of the live copy since it was marked is left to the punch that will be made in the
// directory, and one the scan found in a hole otherwise is marked again: remarkUnmoved). Up to
// copyBlocks of them are written at a time while no page move runs (drainMu), so that each is on one
// side of every move; those of a page that a move wrote since moved was taken are left for the next sync
// (marked again), as are the blocks of a write that fails.
func (b *Backing) copyTaken(src *liveFile, taken, moved []uint64) error {
	l := b.live
	type run struct{ s, e int64 } // blocks [s, e), in one page
	var (
		runs []run
		used int64 // blocks that runs hold
		errs []error
	)
	flush := func() {
		l.drainMu.Lock()
		for i := 0; i < len(runs); {
			if l.isMoved(uint32(runs[i].s / pageBlocks)) {
				l.remark(runs[i].s, runs[i].e)
				i++
				continue
			}
			s, e := runs[i].s, runs[i].e // and the runs that follow on, in one write
			for i++; i < len(runs) && runs[i].s == e && !l.isMoved(uint32(runs[i].s/pageBlocks)); i++ {
				e = runs[i].e
			}
			if err := l.write(src.mem[s<<blockShift:e<<blockShift], s<<blockShift); err != nil {
				errs = append(errs, err)
				l.remark(s, e)
			}
		}
		l.drainMu.Unlock()
		runs, used = runs[:0], 0
		b.step("copied")
	}
	n := int64(len(taken)) << 6
	for i := int64(0); i < n; {
		if taken[i>>6] == 0 {
			i = (i>>6 + 1) << 6
			continue
		}
		if taken[i>>6]&(1<<(i&63)) == 0 {
			i++
			continue
		}
		start := i
		for i < n && taken[i>>6]&(1<<(i&63)) != 0 {
			i++
		}
		hole := start // the blocks from hole to a run the scan found are in a hole (see above)
		src.dataRuns(start, i, func(s, e int64) {
			l.remarkUnmoved(hole, s, moved)
			hole = e
			for s < e {
				pe := min(e, (s/pageBlocks+1)*pageBlocks)
				if pageSet(moved, uint32(s/pageBlocks)) {
					s = pe
					continue
				}
				if used == copyBlocks {
					flush()
				}
				ce := min(pe, s+copyBlocks-used)
				runs = append(runs, run{s, ce})
				used += ce - s
				s = ce
			}
		})
		l.remarkUnmoved(hole, i, moved)
	}
	if len(runs) > 0 {
		flush()
	}
	return errors.Join(errs...)
}

// remarkUnmoved marks again the blocks [s, e) that the scan found in a hole, but for those of the pages
// in moved: a block punched out of the live copy is in a page marked moved (punch), whose punch the
// directory gets with the page; any other hole is one the kernel showed while collapsing the region onto
// a huge page (before Linux 6.4 collapse_file puts the huge page in the file before it is filled, and
// SEEK_DATA passes over it), and the block goes to the next sync rather than nowhere.
func (l *live) remarkUnmoved(s, e int64, moved []uint64) {
	for s < e {
		pe := min(e, (s/pageBlocks+1)*pageBlocks)
		if !pageSet(moved, uint32(s/pageBlocks)) {
			l.remark(s, pe)
		}
		s = pe
	}
}

// pageSet says whether page id's bit is set in w (nil: none is).
func pageSet(w []uint64, id uint32) bool {
	return int(id>>6) < len(w) && w[id>>6]&(1<<(id&63)) != 0
}

// zeroBlock is what a hole reads as.
var zeroBlock [1 << blockShift]byte

// remark marks blocks [s, e) again, for the next sync.
func (l *live) remark(s, e int64) {
	for j := s; j < e; j++ {
		atomic.OrUint64(&l.marks[j>>6], 1<<(j&63))
	}
}

// copyChanged writes the blocks that check lists and the directory's file holds otherwise,
// and takes them off the list: after a crash most of the directory is what the live copy holds, and
// reading it back writes nothing that did not change (it costs more CPU than writing it all:
// doc/design/restart-costs.md). It reads a run of blocks at a time, keeping none in the page cache.
// The blocks taken were written already; a block that cannot be read stays listed, one that cannot be
// written is marked for the next sync.
func (l *live) copyChanged(src *liveFile, taken, moved []uint64) error {
	const run = pageBlocks // blocks read at once, a page: 1 MiB
	check, mem, disk := l.check, src.mem, l.items
	set := func(w []uint64, i int64) bool { return i>>6 < int64(len(w)) && w[i>>6]&(1<<(i&63)) != 0 }
	var data [run]bool                      // which blocks of the run the live file holds (confirmHoles): the others read as zeros
	var held []byte                         // confirmHoles's buffer
	buf, err := mapBytes(run << blockShift) // aligned, for O_DIRECT
	if err != nil {
		return err
	}
	defer unmapBytes(buf)
	var errs []error
	n := int64(len(check)) << 6
	for first := int64(0); first < n; first += run {
		last := min(first+run, n)
		page := uint32(first / pageBlocks)
		if pageSet(moved, page) || !slices.ContainsFunc(check[first>>6:(last+63)>>6], func(w uint64) bool { return w != 0 }) {
			continue // a page moved is written whole (commitLive), and compared again at the next sync
		}
		if err := l.read(buf[:(last-first)<<blockShift], first<<blockShift); err != nil {
			errs = append(errs, err)
			continue
		}
		src.holds(first, data[:last-first])
		if err := src.confirmHoles(data[:last-first], first, &held); err != nil {
			errs = append(errs, err) // the page stays listed
			continue
		}
		// Compared and written while no page move runs, as copyTaken writes; a page a move wrote since waits.
		l.drainMu.Lock()
		if l.isMoved(page) {
			l.drainMu.Unlock()
			continue
		}
		stored := func(i int64) []byte { return buf[(i-first)<<blockShift : (i-first+1)<<blockShift] }
		changed := func(i int64) bool {
			if !set(check, i) || set(taken, i) {
				return false
			}
			if !data[i-first] {
				return !bytes.Equal(stored(i), zeroBlock[:])
			}
			return !bytes.Equal(mem[i<<blockShift:(i+1)<<blockShift], stored(i))
		}
		for i := first; i < last; {
			start, hole := i, !data[i-first]
			for i < last && changed(i) && !data[i-first] == hole { // a run of changed blocks, all holes or none
				i++
			}
			if i > start {
				var err error
				if hole { // DIR holds what the live copy punched before the crash
					err = punchFile(disk, start<<blockShift, (i-start)<<blockShift)
				} else {
					err = l.write(mem[start<<blockShift:i<<blockShift], start<<blockShift)
				}
				switch {
				case err != nil && hole:
					errs = append(errs, err)
					continue // still listed: a mark would not help, the copy skips holes
				case err != nil:
					errs = append(errs, err)
					l.remark(start, i)
				}
			} else {
				i++
			}
			for j := start; j < i; j++ {
				check[j>>6] &^= 1 << (j & 63)
			}
		}
		l.drainMu.Unlock()
	}
	if !slices.ContainsFunc(check, func(w uint64) bool { return w != 0 }) {
		l.check = nil
	}
	return errors.Join(errs...)
}

// read fills p from the directory's file at off, zeros past its end: O_DIRECT where the file system takes
// it, as write, else through the page cache, from which it is dropped again.
func (l *live) read(p []byte, off int64) error {
	disk := l.items
	if fd := l.direct; fd >= 0 {
		n := 0
		for n < len(p) {
			m, err := unix.Pread(fd, p[n:], off+int64(n))
			if err == unix.EINTR {
				continue
			}
			if err == unix.EINVAL && n == 0 { // the file system takes no O_DIRECT read here: as write
				break
			}
			if err != nil {
				return fmt.Errorf("slab: reading %s: %w", disk.Name(), err)
			}
			if m == 0 {
				clear(p[n:])
				return nil
			}
			n += m
		}
		if n == len(p) {
			return nil
		}
	}
	clear(p)
	err := readInto(disk, p, off)
	_ = unix.Fadvise(int(disk.Fd()), off, int64(len(p)), unix.FADV_DONTNEED)
	return err
}

// write writes p at off in the directory's file: O_DIRECT where the file system takes it (nothing is
// copied through the page cache, which would hold a second copy of every block), buffered where it does
// not.
func (l *live) write(p []byte, off int64) error {
	disk := l.items
	if fd := l.direct; fd >= 0 {
		for len(p) > 0 {
			n, err := unix.Pwrite(fd, p, off)
			if err == unix.EINTR {
				continue
			}
			if err == unix.EINVAL && n <= 0 {
				_ = unix.Close(fd)
				l.direct = -1
				break
			}
			if err != nil {
				return fmt.Errorf("slab: writing %s: %w", disk.Name(), err)
			}
			p, off = p[n:], off+int64(n)
			l.written.Add(int64(n))
		}
		if len(p) == 0 {
			return nil
		}
	}
	n, err := disk.WriteAt(p, off)
	l.written.Add(int64(n))
	return err
}

// close releases the live copy's own resources; the files stay, for the next start.
func (l *live) close() error {
	var errs []error
	if l.direct >= 0 {
		errs = append(errs, unix.Close(l.direct))
		l.direct = -1
	}
	if l.marks != nil {
		errs = append(errs, unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(l.marks)), uintptr(len(l.marks)*8)))
		l.marks = nil
	}
	for _, w := range []*[]uint64{&l.movedBits, &l.dirRecs, &l.pending} {
		if *w != nil {
			errs = append(errs, unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(*w)), uintptr(len(*w)*8)))
			*w = nil
		}
	}
	for _, f := range []**os.File{&l.loaded, &l.meta} {
		if *f != nil {
			errs = append(errs, (*f).Close())
			*f = nil
		}
	}
	errs = append(errs, l.items.Close())
	return errors.Join(errs...)
}

// punchFile gives bytes [off, off+n) of f back (they read as zeros), or writes zeros where the file
// system has no holes.
func punchFile(f *os.File, off, n int64) error {
	const mode = unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE
	if err := fallocate(f, mode, off, n); err == nil {
		return nil
	}
	st, err := f.Stat()
	if err != nil || off >= st.Size() {
		return err
	}
	_, err = f.WriteAt(make([]byte, min(n, st.Size()-off)), off)
	return err
}

// writeFileAtomic writes a small file whole or not at all.
func writeFileAtomic(path, text string) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(text)
	if err == nil {
		err = f.Sync() // a root that is not a tmpfs keeps its copy over a reboot: its name must be whole then
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}
