//go:build linux

package slab

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Backing is a data directory's files (backing.go has the layout). items is mapped whole, for every page
// id a Ref can name, once: the mapping reserves address space only, the file grows (ftruncate) as page
// ids are taken, and a page that is released is punched out of it, so it costs neither disk nor page
// cache and reads back as zeros. A mapping past a file's end is never touched. meta is read into memory
// at start and written with pwrite, never mapped: a write that a full file system refuses fails with an
// error instead of killing the server with SIGBUS (doc/design/restart-costs.md, "File systems").
type Backing struct {
	dir         string
	lock        *os.File // flock'ed for the Backing's life: one server per directory
	meta, items *os.File
	itemsMem    []byte
	// metaMem is meta's contents, in anonymous memory, read with atomic loads; each change is written
	// through to meta (setMeta).
	metaMem []byte
	metaMu  sync.Mutex // guards changing metaMem, writing meta, metaEnd and metaErr
	metaEnd int        // meta's bytes past which nothing was ever read or written
	// metaErr is the first write into meta that failed since the last syncMeta, which writes all of meta
	// again and reports it.
	metaErr   error
	mu        sync.Mutex // guards growing the files
	itemsSize int64
	grow      int64 // the files grow to whole multiples of it: 1, or a huge page (huge in OpenBacking)
	// live is the live copy (live_linux.go), nil when items is the directory's own file.
	live *live
	// quiesce returns once every chunk owner has finished what it was doing when it was called (SetQuiesce).
	quiesce func()
	// caughtUp is the live copy whose blocks OpenBacking wrote into the directory's items first (catchUpLive),
	// "" when none was; caughtUpBytes how many bytes of blocks that wrote in place.
	caughtUp      string
	caughtUpBytes int64
	// syncSteps, when set, is called at each step of a Sync (SetSyncSteps).
	syncSteps func(step string)
	// pending is the rest of an opening left to FinishOpen (BackingOptions.Defer), nil when none is.
	pending *openRest
	// liveWanted says that items is (or, while pending, will be) a live copy.
	liveWanted bool
	// shards is the shard count the pages are kept for (Shards).
	shards int
	// parks says that a page move parks the page it rescued items from until the next Sync (Parks).
	parks bool
	// rebooted says that the machine rebooted since the directory was last opened, and opened is the
	// number of the last Sync that had finished then (hdrSyncs): Records reads a parked page by them.
	// boot is this boot (bootID), stored by Adopted.
	rebooted bool
	opened   uint64
	boot     uint64
	// syncFirst says that items is to be synced before the adoption empties the stored pages it did
	// not take (open, emptyingStored).
	syncFirst bool
	// adopted is set by Adopted: until then the parked pages may not have been taken (Records,
	// ParkedRecords), and neither this boot nor a Sync's number is stored, which would change what the
	// next start makes of them.
	adopted atomic.Bool
	// syncsBegun is the number of the last Sync begun.
	syncsBegun atomic.Uint64
	// keeps says that a change keeps the version it replaces until a Sync (Keeps).
	keeps bool
	// parked counts the pages parked now, by every allocator (Parked).
	parked atomic.Int64
}

// RoomPages is how many more pages the file system of the mapped items file (the live copy's, or the
// directory's own) has free room for (freeBytes), -1 when it cannot tell. A page taken beyond it is
// refused (page), so the store keeps its pages within it. Only once the opening is finished.
func (b *Backing) RoomPages() int {
	var st unix.Statfs_t
	var fst unix.Stat_t
	if unix.Fstatfs(int(b.items.Fd()), &st) != nil || unix.Fstat(int(b.items.Fd()), &fst) != nil {
		return -1
	}
	free, ok := freeBytes(&st)
	if !ok {
		return -1 // no size told: nothing to keep within
	}
	free += discardHeld(fst.Dev) // a start's old data, being freed (discard_linux.go)
	return int(min(free/PageSize, MaxPages))
}

// Shards is the shard count the directory's pages are kept for, from OpenBacking on: Identity.Shards, or
// the stored count Identity.OtherShards accepted.
func (b *Backing) Shards() int { return b.shards }

// holdSyncs keeps a live copy's Sync from starting until letSyncs, and says false instead when one is
// running (Arena.Collapse); true without a live copy.
func (b *Backing) holdSyncs() bool { return b == nil || b.live == nil || b.live.syncMu.TryLock() }

// letSyncs ends what holdSyncs began.
func (b *Backing) letSyncs() {
	if b != nil && b.live != nil {
		b.live.syncMu.Unlock()
	}
}

// SetSyncSteps has fn called at each step of a live copy's Sync, with the files as that step left them:
// a test's view of what a reboot in between could keep (nil: none). The steps are "copied" (after each
// write of blocks, before the fsync: no move runs from then until the next write), "items" (the blocks
// synced), "journal" (the journal synced) and "applied" (the pages in place, synced). A Sync of the
// directory's own files has one, "begun": numbered, before its fsync.
func (b *Backing) SetSyncSteps(fn func(step string)) { b.syncSteps = fn }

// CaughtUp is the live copy a start that maps the directory's files, or keeps the copy under another root,
// found newer than them and wrote into them before anything else: "" when none was.
func (b *Backing) CaughtUp() string { return b.caughtUp }

var errBackingClosed = errors.New("slab: data directory closed")

// OpenBacking locks dir (creating it) and maps its files. When the stored data can be used with id, reason
// is ""; otherwise the files are emptied and reason says why (a fresh directory: "no stored data").
//
// With opt.Huge, the items mapping is advised onto transparent huge pages (-L), and the files grow
// by whole huge pages, since the kernel maps a huge page of a file only where all of it is inside the
// file; without, they are advised against them. A huge page is written back whole once any byte of it
// changes (doc/design/restart-costs.md).
//
// With opt.Defer, a start that must first write a newer live copy into the directory's files (catchUpLive:
// another root, or none, after a server with a live copy was killed) returns at once with the Backing
// pending, so that the server can open its listener and hold requests meanwhile (restart-live.md): until
// FinishOpen has returned, only Pending, FinishOpen and Close may be called, and NewBackedArena.
func OpenBacking(dir string, id Identity, opt BackingOptions) (b *Backing, reason string, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, "", err
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, "", err
	}
	b = &Backing{dir: dir, grow: 1, liveWanted: opt.Live != "", parks: opt.Syncs && opt.Live == "" && !OnTmpfs(dir),
		keeps: opt.Syncs && !OnTmpfs(dir)}
	advice := unix.MADV_NOHUGEPAGE
	if opt.Huge {
		b.grow, advice = hugePageSize, unix.MADV_HUGEPAGE
	}
	locked := false
	defer func() {
		if err != nil {
			if locked {
				_ = b.lock.Truncate(0) // the pid of a server that did not start names none
			}
			b.Close()
			b = nil
		}
	}()
	if b.lock, err = os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600); err != nil {
		return b, "", err
	}
	if err := lockDir(b.lock, dir, opt.Waiting); err != nil {
		return b, "", err
	}
	locked = true
	for _, f := range []struct {
		name string
		file **os.File
	}{{"meta", &b.meta}, {"items", &b.items}} {
		if *f.file, err = os.OpenFile(filepath.Join(dir, f.name), os.O_RDWR|os.O_CREATE, 0o600); err != nil {
			return b, "", err
		}
	}
	_ = os.Remove(filepath.Join(dir, oldSums)) // a format 4 directory's: its data starts empty (identityMismatch)
	hdr := make([]byte, headerBytes)
	n, _ := b.meta.ReadAt(hdr, 0)
	if n == headerBytes {
		// A live copy of the directory that cannot be read may hold what its files lack: the start
		// refuses before anything changes, whatever it would do next (liveState). Checked here only: the
		// copies read later (liveToCatchUp, openLive) are these.
		instance := binary.LittleEndian.Uint64(hdr[hdrInstance:])
		for _, root := range []string{recordedLiveRoot(dir), opt.Live} {
			if ld, err := liveDirFor(root, dir); root != "" && err == nil {
				if _, _, _, err := liveState(ld, dir, instance); err != nil {
					return b, "", fmt.Errorf("--data-dir %s: %w (in %s)", dir, err, root)
				}
			}
		}
	}
	reason = identityMismatch(hdr[:n], id)
	if reason == "" {
		id.Shards = storedShards(hdr) // what a start that empties the directory later writes too
	}
	b.shards = id.Shards
	if reason == "" {
		// A sync cut short while it changed pages in place left its journal: replayed first, the files
		// hold what that sync wrote (doc/design/restart-live.md rule 12).
		if err := replayJournal(dir, binary.LittleEndian.Uint64(hdr[hdrSealKey:]), b.meta, b.items); err != nil {
			reason = err.Error()
		}
	}
	if opt.Live != "" {
		if err := os.MkdirAll(opt.Live, 0o700); err != nil { // made first, so that its path resolves
			return b, "", fmt.Errorf("--data-live %s: %w", opt.Live, err)
		}
	}
	prevRoot := recordedLiveRoot(dir)
	st := &openRest{id: id, opt: opt, hdr: hdr, reason: reason, prevRoot: prevRoot, moved: !sameRoot(prevRoot, opt.Live),
		advice: advice}
	if opt.Defer && reason == "" && st.moved {
		if _, _, _, due := liveToCatchUp(prevRoot, dir, hdr); due {
			b.pending = st
			return b, "", nil
		}
	}
	reason, err = b.open(st)
	return b, reason, err
}

// openRest is what OpenBacking found before the live copy's catch-up, for the rest of the opening (open).
type openRest struct {
	id       Identity
	opt      BackingOptions
	hdr      []byte // the stored header
	reason   string // why the stored data cannot be used, so far
	prevRoot string // the root the live copy was last kept under
	moved    bool   // the copy is not to be kept there: written into the files first when newer
	advice   int    // the items mapping's madvise
}

// Pending says whether the opening waits for FinishOpen (BackingOptions.Defer).
func (b *Backing) Pending() bool { return b.pending != nil }

// FinishOpen ends an opening that BackingOptions.Defer left pending: it writes the newer live copy into
// the directory's files and opens the rest, as OpenBacking would have before returning. reason is
// OpenBacking's. On an error the Backing can only be closed.
func (b *Backing) FinishOpen() (reason string, err error) {
	st := b.pending
	b.pending = nil
	return b.open(st)
}

// open is OpenBacking from the live copy's catch-up on.
func (b *Backing) open(st *openRest) (reason string, err error) {
	dir, hdr, opt, reason := b.dir, st.hdr, st.opt, st.reason
	prevRoot, moved := st.prevRoot, st.moved
	metaLen := int64(headerBytes + recordBytes*MaxPages)
	// A live copy newer than the files is where the last server with one kept it; a start that keeps
	// the copy elsewhere, or maps the files, writes that one into them first (doc/design/restart-live.md).
	if reason == "" && moved {
		if ld, written, err := catchUpLive(prevRoot, dir, hdr, b.meta, b.items); err != nil {
			reason = fmt.Sprintf("its live copy in %s is newer and could not be written into it: %v", prevRoot, err)
		} else {
			b.caughtUp, b.caughtUpBytes = ld, written
		}
	}
	if reason != "" && reason != NoStoredData && opt.Emptying != nil {
		opt.Emptying(reason)
	}
	if reason != "" {
		dropJournal(dir) // it describes pages no longer there
		if err := b.meta.Truncate(0); err != nil {
			return "", err
		}
		noCow(b.meta)
		if b.items, err = emptied(b.items); err != nil { // not mapped yet
			return "", err
		}
		noCow(b.items)
	}
	if err := b.meta.Truncate(metaLen); err != nil {
		return "", err
	}
	// The header is rewritten in place from here on: reserved, so that the rewrite needs no new space
	// where the file system keeps reservations (UnkeptReservations).
	if err := reserve(b.meta, 0, headerBytes); err != nil {
		return "", err
	}
	if err := b.loadMeta(metaLen); err != nil {
		return "", err
	}
	if reason != "" || binary.LittleEndian.Uint32(b.metaMem[hdrVersion:]) != backingVersion {
		b.metaMu.Lock()
		if reason != "" {
			writeIdentity(b.metaMem, st.id)
		} else {
			upgradeIdentity(b.metaMem)
		}
		b.writeMetaLocked(0, headerBytes)
		b.metaMu.Unlock()
	}
	if moved {
		// The files are as new as the copy there (or it was not to be used): it is freed, as nothing else
		// would free it.
		dropLive(prevRoot, dir)
	}
	if opt.Live != "" {
		if err := recordLiveRoot(dir, opt.Live); err != nil {
			return "", err
		}
		if err := b.openLive(opt.Live, reason == ""); err != nil {
			return "", fmt.Errorf("--data-live %s: %w", opt.Live, err)
		}
	} else {
		// The directory's files change from now on: a live copy of them left by an earlier server is
		// not to be used again (live_linux.go).
		b.setMeta(hdrInstance, 0)
	}
	if b.itemsMem, err = mapShared(b.items, MaxPages*PageSize); err != nil {
		return "", err
	}
	_ = unix.Madvise(b.itemsMem, st.advice) // advice only: without it the pages are ordinary ones
	if b.itemsSize, err = fileSize(b.items); err != nil {
		return "", err
	}
	// A parked page is read after a reboot only (Records): the boot the last server ran in decides.
	b.boot = bootID()
	stored := atomic.LoadUint64(b.counter(hdrBoot))
	b.rebooted = b.boot != 0 && stored != 0 && stored != b.boot
	b.opened = atomic.LoadUint64(b.counter(hdrSyncs))
	// This process's Syncs are numbered after every one the last server began, finished or not: a
	// parked record names the last one begun, and a Sync of this process with the same number would
	// pass for one begun after the page was parked.
	last, anyParked := b.lastParked()
	b.syncsBegun.Store(max(b.opened, last))
	// After a kill, what the moves that parked pages copied may be in the page cache only: on disk
	// before the pages are emptied and used again, by the adoption (emptyingStored), after the listener
	// opened (a start that parks keeps them parked instead, ParkedRecords; with a live copy, a sync
	// writes them before any page it moved).
	b.syncFirst = anyParked && !b.rebooted && !b.parks && opt.Live == ""
	return reason, nil
}

// loadMeta reads meta, n bytes long, into anonymous memory, skipping its holes (records never written).
func (b *Backing) loadMeta(n int64) error {
	var err error
	if b.metaMem, err = mapBytes(int(n)); err != nil {
		return fmt.Errorf("slab: memory for %s: %w", b.meta.Name(), err)
	}
	end, err := readData(b.meta, b.metaMem, 0)
	b.metaEnd = max(b.metaEnd, end)
	return err
}

// readData reads f's bytes from off on into mem[off:], skipping f's holes (mem keeps its bytes there);
// end is where the last data read ended.
func readData(f *os.File, mem []byte, off int) (end int, err error) {
	n := int64(len(mem))
	src := liveFile{f: f}
	src.scan((n + 1<<blockShift - 1) >> blockShift)
	for _, r := range src.data {
		from, to := max(r[0]<<blockShift, int64(off)), min(r[1]<<blockShift, n)
		if from >= to {
			continue
		}
		if err := readInto(f, mem[from:to], from); err != nil {
			return end, err
		}
		end = max(end, int(to))
	}
	return end, nil
}

// setMeta stores v at offset off of meta (a header counter or a page record, 8 bytes), in metaMem and in
// the file (writeMetaLocked says which).
func (b *Backing) setMeta(off int, v uint64) {
	b.metaMu.Lock()
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&b.metaMem[off])), v)
	b.writeMetaLocked(off, 8)
	b.metaMu.Unlock()
}

// writeMetaLocked writes bytes [off, off+n) of metaMem into meta. With a live copy they go to the live
// copy's meta, and only the header's to the directory's, whose page records change with the pages they
// describe, at a sync (commitJournal: restart-live.md rule 12). A failure is kept for syncMeta, which
// writes everything again: until then the file may lack the change. The caller holds metaMu.
func (b *Backing) writeMetaLocked(off, n int) {
	b.metaEnd = max(b.metaEnd, off+n)
	keep := func(err error) {
		if err != nil && b.metaErr == nil {
			b.metaErr = err
		}
	}
	if l := b.live; l != nil && l.meta != nil {
		_, err := l.meta.WriteAt(b.metaMem[off:off+n], int64(off))
		keep(err)
	}
	if b.live != nil {
		n = min(off+n, headerBytes) - off
	}
	if n > 0 {
		_, err := b.meta.WriteAt(b.metaMem[off:off+n], int64(off))
		keep(err)
	}
}

// syncMeta makes meta durable: after a write into it failed, it first writes all of it again (the
// failure is reported all the same: the file lacked a change until now).
func (b *Backing) syncMeta() error {
	b.metaMu.Lock()
	err := b.metaErr
	if err != nil {
		b.metaErr = nil
		b.writeMetaLocked(0, b.metaEnd)
	}
	b.metaMu.Unlock()
	return errors.Join(err, b.meta.Sync())
}

// SetQuiesce gives a live copy's Sync the way to wait for every chunk owner to finish what it is doing
// (the store locks and unlocks each shard): a block is marked after it is written, by its owner.
func (b *Backing) SetQuiesce(fn func()) { b.quiesce = fn }

// SyncNames makes the files' names in the directory, and the directory's in its parent, as durable as
// their contents: an fsync of a file covers its data, not its directory entry, which a machine reboot
// could otherwise lose (doc/design/restart.md rule 9). Best effort: a file system that cannot sync a
// directory keeps names as it does anyway.
func (b *Backing) SyncNames() {
	syncDir(b.dir)
	syncDir(filepath.Dir(b.dir))
}

func fileSize(f *os.File) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// mapShared maps n bytes of f, from its start, at an address aligned to hugePageSize: a pair of pages of a
// live copy can then move onto one huge page (Arena.Collapse). The address space is reserved aligned,
// without memory, and the file mapped over it.
func mapShared(f *os.File, n int) ([]byte, error) {
	n = min(n, mapLimit)
	r, err := mapAnonAligned(n, unix.PROT_NONE, unix.MAP_NORESERVE)
	if err != nil {
		return nil, fmt.Errorf("slab: reserving address space for %s: %w", f.Name(), err)
	}
	at := unsafe.Pointer(unsafe.SliceData(r))
	p, err := unix.MmapPtr(int(f.Fd()), 0, at, uintptr(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_NORESERVE|unix.MAP_FIXED)
	if err != nil {
		unmapBytes(r)
		return nil, fmt.Errorf("slab: mapping %s: %w", f.Name(), err)
	}
	return unsafe.Slice((*byte)(p), n), nil
}

// collapsible reports whether the pages may move onto huge pages (Arena.Collapse), those of a live copy,
// and whether they are advised onto them from the first touch (-L).
func (b *Backing) collapsible() (ok, huge bool) { return b.liveWanted, b.grow == hugePageSize }

func (b *Backing) roundUp(n int64) int64 { return (n + b.grow - 1) / b.grow * b.grow }

// page returns the memory of page id, growing the items file to hold it. Its contents are what was stored
// there: zeros for a page never used or released since.
func (b *Backing) page(id uint32, fresh bool) (mem []byte, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.itemsMem == nil {
		return nil, errBackingClosed
	}
	if fresh {
		// The record's block before the file grows: once it reaches past the page, every start reads its
		// record, and clears it when no shard adopts the page; on a full tmpfs even a read of a hole faults.
		if err := b.reserveRecord(id); err != nil {
			return nil, err
		}
	}
	if end := b.roundUp(int64(id+1) * PageSize); end > b.itemsSize {
		if err := b.items.Truncate(end); err != nil {
			return nil, err
		}
		b.itemsSize = end
	}
	if fresh {
		if err := b.reserveBlocks(id); err != nil {
			return nil, err
		}
	}
	return b.itemsPage(id), nil
}

// reservePage reserves page id's blocks in the files (an adopted page: Allocator.LoadPages).
func (b *Backing) reservePage(id uint32) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.itemsMem == nil {
		return errBackingClosed
	}
	return b.reservePageLocked(id)
}

// reservePageLocked allocates page id's blocks and its record's in the files: a store into a
// hole of a full file system (a tmpfs live copy past its size, a full disk) gets SIGBUS; refused here,
// the page is not used. The caller holds b.mu.
func (b *Backing) reservePageLocked(id uint32) error {
	return errors.Join(b.reserveBlocks(id), b.reserveRecord(id))
}

// reserveBlocks allocates page id's blocks (reservePageLocked).
func (b *Backing) reserveBlocks(id uint32) error {
	return reserve(b.items, int64(id)*PageSize, PageSize)
}

// reserveRecord allocates page id's record in the meta files (reservePageLocked).
func (b *Backing) reserveRecord(id uint32) error {
	off := headerBytes + int64(id)*recordBytes
	if l := b.live; l != nil && l.meta != nil {
		if err := reserve(l.meta, off, recordBytes); err != nil {
			return err
		}
	}
	return reserve(b.meta, off, recordBytes)
}

// reserve allocates bytes [off, off+n) of f, where the file system can (ENOSPC when it is full).
func reserve(f *os.File, off, n int64) error {
	if err := fallocate(f, 0, off, n); err != nil && !errors.Is(err, unix.EOPNOTSUPP) {
		return fmt.Errorf("slab: reserving %d bytes of %s: %w", n, f.Name(), err)
	}
	return nil
}

// fsNoCowFl is FS_NOCOW_FL (linux/fs.h; not in x/sys/unix): chattr's C, "write the file's blocks in place".
const fsNoCowFl = 0x00800000

// noCow asks a copy-on-write file system to write empty file f's blocks in place (btrfs: the flag only
// takes on an empty file), so that a block reserve allocated needs no new space when a store writes it
// again, and a full file system cannot fault a store into a mapped file (UnkeptReservations). Elsewhere
// the request fails and changes nothing; btrfs then keeps no checksum of the file's blocks, which the
// seals and the page records' check bytes stand in for.
func noCow(f *os.File) {
	if flags, err := fileFlags(f); err == nil && flags&fsNoCowFl == 0 {
		_ = unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, int(flags|fsNoCowFl))
	}
}

// isNoCow says whether the file at path has its blocks written in place (noCow took).
func isNoCow(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	flags, err := fileFlags(f)
	return err == nil && flags&fsNoCowFl != 0
}

// fileFlags is f's inode flags (chattr's), where its file system has them.
func fileFlags(f *os.File) (uint32, error) {
	return unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
}

// zfsSuperMagic is ZFS's statfs type (ZFS_SUPER_MAGIC in OpenZFS; not in x/sys/unix).
const zfsSuperMagic = 0x2fc12fc1

// UnkeptReservations says why, where it is so, reserve's fallocate does not make later stores into the
// reserved blocks of the items file the server maps for data directory dir safe (see doc/design/restart-costs.md,
// "File systems"): there a full file system can kill the server with SIGBUS. "" where the reservations
// hold, or when the file cannot be examined. The file is dir's own, or with a live copy under liveRoot
// the live one (dir's is then written with write, as meta always is, which fails with ENOSPC). A
// copy-on-write file system needs new space to write a block again: bcachefs; btrfs unless the file is
// nocow (noCow) and the kernel's page faults honour that (Linux 6.17: "btrfs: fix -ENOSPC mmap write
// failure on NOCOW files/extents"). ZFS reserves nothing.
func UnkeptReservations(dir, liveRoot string) string {
	items := filepath.Join(dir, "items")
	if liveRoot != "" {
		ld, err := liveDirFor(liveRoot, dir)
		if err != nil {
			return ""
		}
		items = filepath.Join(ld, "items")
	}
	var st unix.Statfs_t
	if unix.Statfs(filepath.Dir(items), &st) != nil {
		return ""
	}
	over := ""
	if uint32(st.Type) == unix.OVERLAYFS_SUPER_MAGIC { // the file is the upper layer's (a container's root)
		upper := overlayUpper(filepath.Dir(items))
		if upper == "" || unix.Statfs(upper, &st) != nil {
			return "" // not visible here (a container's host): nothing is known
		}
		over = "overlayfs over "
	}
	fs := unkeptOn(uint32(st.Type)) // a 32-bit magic number, in a field that is signed on some ports
	switch {
	case fs == "":
		return ""
	case fs != "btrfs":
		return over + fs
	case !isNoCow(items): // overlayfs passes the flags through
		return over + "btrfs, and its items file is not nocow (made by an older leasecached, or the flag was refused)"
	case !kernelAtLeast(6, 17):
		return over + "btrfs, on a kernel before 6.17 (a store into a nocow file's page still asks for new space)"
	}
	return ""
}

// overlayUpper is the upper directory of the overlayfs mount that holds dir, from /proc/self/mountinfo:
// "" when the mount holding dir is not an overlayfs or names none. The mount is the first whose device is
// dir's (an overlayfs reports its own for a directory); where none is, or dir cannot be examined (not
// made yet), the one with the longest mount point above it, the last listed of those (the top of a
// stack), which a mount placed beneath another (MOVE_MOUNT_BENEATH) can mislead.
func overlayUpper(dir string) string {
	if d, err := filepath.EvalSymlinks(dir); err == nil {
		dir = d
	}
	info, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	dev := ""
	var st unix.Stat_t
	if unix.Stat(dir, &st) == nil {
		dev = fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev))
	}
	best, upper := -1, ""
	for _, line := range strings.Split(string(info), "\n") {
		// id parent dev root mountpoint options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 {
			continue
		}
		if dev != "" && f[2] == dev {
			return upperDir(g)
		}
		mp := unescapeMount(f[4])
		if len(mp) < best || !(dir == mp || strings.HasPrefix(dir, strings.TrimSuffix(mp, "/")+"/")) {
			continue
		}
		best, upper = len(mp), upperDir(g)
	}
	return upper
}

// upperDir is the upperdir option of a mountinfo line's fields after " - " (fstype, source, superoptions):
// "" for one that is not an overlayfs.
func upperDir(g []string) string {
	if g[0] != "overlay" {
		return ""
	}
	for _, opt := range strings.Split(g[2], ",") {
		if v, ok := strings.CutPrefix(opt, "upperdir="); ok {
			return unescapeMount(v)
		}
	}
	return ""
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space, \011, \012, \134).
func unescapeMount(s string) string {
	if !strings.Contains(s, "\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// kernelAtLeast says whether the running kernel's release is major.minor or later.
func kernelAtLeast(major, minor int) bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	var ma, mi int
	if n, _ := fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &ma, &mi); n != 2 {
		return false
	}
	return ma > major || ma == major && mi >= minor
}

// unkeptOn is UnkeptReservations for a statfs type.
func unkeptOn(magic uint32) string {
	switch magic {
	case unix.BTRFS_SUPER_MAGIC:
		return "btrfs"
	case unix.BCACHEFS_SUPER_MAGIC:
		return "bcachefs"
	case zfsSuperMagic:
		return "zfs"
	}
	return ""
}

// itemsLen is the items file's length now (it grows as pages are taken).
func (b *Backing) itemsLen() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.itemsSize
}

// itemsPage is page id's memory in the items mapping (the caller checked it is inside the file).
func (b *Backing) itemsPage(id uint32) []byte {
	off := int(id) * PageSize
	return b.itemsMem[off : off+PageSize : off+PageSize]
}

// stored is page id's memory as stored, for reading, without growing the file: nil past its end.
func (b *Backing) stored(id uint32) []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.itemsMem == nil || int64(id+1)*PageSize > b.itemsSize {
		return nil
	}
	return b.itemsPage(id)
}

// emptyingStored is told before the adoption empties the stored pages no allocator took
// (Arena.FinishAdopt). Best effort: a disk that cannot sync fails this start's syncs too, and they say so.
func (b *Backing) emptyingStored() {
	if b.syncFirst {
		b.syncFirst = false
		_ = b.items.Sync()
	}
}

// discard empties page id: its record, then its memory, which reads back as zeros and give their
// disk and page cache back.
func (b *Backing) discard(id uint32) {
	b.setRecord(id, 0)
	b.punch(id)
}

// punch zeroes page id's memory (a page that changes class: chunks of the old geometry must not
// be read as chunks of the new one).
func (b *Backing) punch(id uint32) {
	if punchFile(b.items, int64(id)*PageSize, PageSize) != nil {
		clear(b.itemsMem[int(id)*PageSize : int(id+1)*PageSize]) // the zeros could not be written either
	}
	if b.live != nil {
		b.live.moved(id)
	}
}

func (b *Backing) recordWord(id uint32) *uint64 {
	return (*uint64)(unsafe.Pointer(&b.metaMem[recordOffset(id)]))
}

func recordOffset(id uint32) int { return headerBytes + int(id)*recordBytes }

func (b *Backing) setRecord(id uint32, v uint64) { b.setMeta(recordOffset(id), v) }

// Records lists the stored pages whose records are whole, in id order. A parked page is listed as in
// use after a machine reboot that no Sync begun after it was parked came before (its items may be all
// that reached the disk of those it moved); otherwise it holds nothing to keep, and is not listed
// (doc/design/restart.md rule 9).
func (b *Backing) Records() []PageRecord {
	var out []PageRecord
	b.storedRecords(func(id uint32, v uint64) {
		class, owner, ok := decodeRecord(v)
		if !ok {
			var at uint32
			class, owner, at, ok = decodeParked(v)
			ok = ok && b.rebooted && b.uncovered(at)
		}
		if ok {
			out = append(out, PageRecord{ID: id, Class: int(class), Owner: int(owner)})
		}
	})
	return out
}

// bootID names the machine's boot (a hash of the kernel's boot_id, never 0), 0 when it cannot be read: a
// start then never takes its directory for one after a reboot, and reads no parked page (the safe side:
// after a kill, a parked page's items may have been deleted since).
func bootID() uint64 {
	id, err := os.ReadFile(bootIDFile)
	if err != nil || len(bytes.TrimSpace(id)) == 0 {
		return 0
	}
	h := fnv.New64a()
	h.Write(bytes.TrimSpace(id))
	return h.Sum64() | 1
}

// bootIDFile is where Linux names the current boot (a random UUID drawn at each boot).
const bootIDFile = "/proc/sys/kernel/random/boot_id"

// lastParked is the largest Sync number a parked page's record names (as a number near the last
// finished one, opened: records keep 32 bits of it), and whether any does.
func (b *Backing) lastParked() (last uint64, any bool) {
	b.storedRecords(func(_ uint32, v uint64) {
		if _, _, at, ok := decodeParked(v); ok {
			any = true
			last = max(last, uint64(int64(b.opened)+int64(int32(at-uint32(b.opened)))))
		}
	})
	return last, any
}

// uncovered says whether no Sync begun after a page was parked, the last begun being at then, had
// finished when the directory was opened.
func (b *Backing) uncovered(at uint32) bool { return int32(uint32(b.opened)-at) <= 0 }

// storedRecords calls fn with each stored page's record word, in id order.
func (b *Backing) storedRecords(fn func(id uint32, v uint64)) {
	last := min(b.itemsSize/PageSize, MaxPages)
	for id := uint32(0); int64(id) < last; id++ {
		fn(id, atomic.LoadUint64(b.recordWord(id)))
	}
}

// ParkedRecords lists the parked pages of a start that is not after a reboot (in id order) that no
// finished Sync covers: the copies the moves that parked them made may be in the page cache only, so the
// pages are to be kept out of use until this process's first Sync has finished (Allocator.AdoptParked),
// as they were in the last one's. Those a Sync covers (a clean stop's, for one) are emptied at once.
func (b *Backing) ParkedRecords() []PageRecord {
	if b.rebooted {
		return nil // listed in use (Records), or a Sync finished since they were parked: nothing to wait for
	}
	var out []PageRecord
	b.storedRecords(func(id uint32, v uint64) {
		if class, owner, at, ok := decodeParked(v); ok && b.uncovered(at) {
			out = append(out, PageRecord{ID: id, Class: int(class), Owner: int(owner)})
		}
	})
	return out
}

// Adopted records that the stored pages have been taken (Records, ParkedRecords; the others are
// emptied): from now on the directory is this boot's, and each Sync's number is stored.
func (b *Backing) Adopted() {
	b.setMeta(hdrBoot, b.boot)
	b.adopted.Store(true)
}

// Parks says whether a page move must park a page it rescued items from (Allocator.ParkDrained): when
// the directory's own items file is mapped and synced periodically (BackingOptions.Syncs).
func (b *Backing) Parks() bool { return b.parks }

// SyncsBegun is the number of the last Sync begun: a page parked now, or a version kept now (Keeps),
// waits for a Sync with a larger one.
func (b *Backing) SyncsBegun() uint64 { return b.syncsBegun.Load() }

// Keeps says whether a change must keep the version it replaces until a Sync begun after it has
// finished (shard/keep.go): when Syncs write the items to a disk, whose volatile cache a power cut may
// leave with the block that freed the version and without the one holding its successor
// (doc/design/restart.md rule 9).
func (b *Backing) Keeps() bool { return b.keeps }

// Rebooted says whether the machine rebooted since the directory was last opened.
func (b *Backing) Rebooted() bool { return b.rebooted }

// SyncedAfter says whether a Sync begun after Sync number n (its low 32 bits) had finished when the
// directory was opened.
func (b *Backing) SyncedAfter(n uint32) bool { return !b.uncovered(n) }

// Parked is how many pages are parked now (Allocator.ParkDrained): each waits for the next Sync.
func (b *Backing) Parked() int { return int(b.parked.Load()) }

func (b *Backing) parkedBy(n int64) { b.parked.Add(n) }

// SyncsDone is the number of the last Sync that finished (of a mapped directory): every page parked
// before that Sync began can be released (Allocator.ReleaseParked).
func (b *Backing) SyncsDone() uint64 { return atomic.LoadUint64(b.counter(hdrSyncs)) }

func (b *Backing) counter(off int) *uint64 { return (*uint64)(unsafe.Pointer(&b.metaMem[off])) }

// SealKey is the directory's seal key, drawn when it was last emptied, for its owner to mix into every
// seal: a seal is in the item's chunk, next to bytes a client chose, and a page read with another class's
// geometry (its record newer than its contents after a reboot, rule 9) puts chunk starts inside values,
// so a seal that anyone could compute would let a client's value pass for an item of any key. A damaged
// key only drops items: no seal matches. doc/design/restart.md rule 1.
func (b *Backing) SealKey() uint64 { return binary.LittleEndian.Uint64(b.metaMem[hdrSealKey:]) }

// CasHigh is the stored CAS high-water mark: every CAS handed out before the stop was below it. Of its two
// copies the larger counts (one cut short by a kill, or damaged, is then harmless).
func (b *Backing) CasHigh() uint64 {
	return max(atomic.LoadUint64(b.counter(hdrCasHigh)), atomic.LoadUint64(b.counter(hdrCasHigh2)))
}

// SetCasHigh stores the CAS high-water mark.
func (b *Backing) SetCasHigh(v uint64) {
	b.setMeta(hdrCasHigh, v)
	b.setMeta(hdrCasHigh2, v)
}

// SyncHeader writes meta (the header: the CAS mark, flush_all's marks; and the page records) to disk, not
// items: a few KiB.
func (b *Backing) SyncHeader() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.metaMem == nil {
		return errBackingClosed
	}
	return b.syncMeta()
}

// Flushed is flush_all's stored marks (oldest_live and the CAS below which items are gone); OpenBacking
// has checked them (flushMarksWhole).
func (b *Backing) Flushed() (oldestLive int64, oldestCas uint64) {
	return int64(atomic.LoadUint64(b.counter(hdrOldestLive))), atomic.LoadUint64(b.counter(hdrOldestCas))
}

// SetFlushed stores flush_all's marks.
func (b *Backing) SetFlushed(oldestLive int64, oldestCas uint64) {
	b.setMeta(hdrOldestCas, oldestCas)
	b.setMeta(hdrOldestLive, uint64(oldestLive))
	b.setMeta(hdrFlushCheck, flushCheck(uint64(oldestLive), oldestCas))
}

// Sync writes what is mapped to disk (a machine that goes down afterwards keeps it). With a live copy it
// copies what changed since the last Sync into the directory's files first.
func (b *Backing) Sync() error {
	b.mu.Lock()
	if b.itemsMem == nil {
		b.mu.Unlock()
		return errBackingClosed
	}
	if b.live != nil {
		itemsSize := b.itemsSize
		b.mu.Unlock() // the file may grow meanwhile: what grows is marked, for the next Sync
		return b.syncLive(itemsSize)
	}
	defer b.mu.Unlock()
	n := b.syncsBegun.Add(1)
	if b.syncSteps != nil {
		b.mu.Unlock() // a step may take a page, which grows the files
		b.syncSteps("begun")
		b.mu.Lock()
	}
	if err := b.items.Sync(); err != nil {
		return errors.Join(err, b.syncMeta())
	}
	// Whatever a page move copied before this Sync began is on disk: the pages it parked may go
	// (SyncsDone), and a start after a reboot need not read them (Records). Not before the stored pages
	// were taken: a parked page this start has not taken yet may be one a reboot needs.
	if b.adopted.Load() {
		b.setMeta(hdrSyncs, n)
	}
	return b.syncMeta()
}

// Close syncs, unmaps and unlocks. Nothing may use the arena's pages afterwards. With a live copy, a
// Sync that wrote everything is recorded in the header (hdrClean), so that the next start need not copy
// every block again.
func (b *Backing) Close() error {
	var errs []error
	if b.itemsMem != nil { // not after an open that failed before the mapping
		err := b.Sync()
		if err == nil && b.live != nil && !b.live.movesOwed() {
			b.setMeta(hdrClean, atomic.LoadUint64(b.counter(hdrInstance)))
			err = b.syncMeta()
		}
		errs = append(errs, err)
	}
	b.mu.Lock()
	for _, m := range []*[]byte{&b.metaMem, &b.itemsMem} {
		if *m != nil {
			errs = append(errs, unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(*m)), uintptr(len(*m))))
			*m = nil
		}
	}
	b.mu.Unlock()
	if b.live != nil {
		errs = append(errs, b.live.close())
		b.live = nil
	}
	for _, f := range []*os.File{b.meta, b.items, b.lock} {
		if f != nil {
			errs = append(errs, f.Close())
		}
	}
	return errors.Join(errs...)
}
