//go:build linux

package slab

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/leasecached/leasecached/internal/tmpfstest"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// liveRoot is a root for live copies on tmpfs, removed after the test; the test skips without tmpfs.
func liveRoot(t testing.TB) string { return tmpfstest.Dir(t, "lc-live-test-") }

// requireDiskIsLive checks that the data directory's items file holds exactly what the live copy does.
func requireDiskIsLive(t *testing.T, b *Backing, msg string) {
	t.Helper()
	disk, err := os.ReadFile(filepath.Join(b.dir, "items"))
	require.NoError(t, err)
	require.Len(t, disk, int(b.itemsSize), "%s: items size", msg)
	if !bytes.Equal(disk, b.itemsMem[:b.itemsSize]) {
		for i := range disk {
			if disk[i] != b.itemsMem[i] {
				require.Failf(t, "disk behind live", "%s: items differs first at byte %d (page %d, block %d)",
					msg, i, i/PageSize, i>>blockShift)
			}
		}
	}
	// The page records, which reach the directory's meta through syncs only (rule 12).
	meta, err := os.ReadFile(filepath.Join(b.dir, "meta"))
	require.NoError(t, err)
	for id := range uint32(b.itemsSize / PageSize) {
		off := recordOffset(id)
		require.Equal(t, *b.recordWord(id), binary.LittleEndian.Uint64(meta[off:]), "%s: page %d's record", msg, id)
	}
}

// loadLive reads every page of b's files into a live copy being made, and ends its making.
func loadLive(t *testing.T, b *Backing) {
	t.Helper()
	for id := range uint32(b.itemsSize / PageSize) {
		require.NoError(t, b.loadPage(id))
	}
	require.NoError(t, b.LiveLoaded())
}

// writeChunk stores a chunk of class full of v, and marks it written.
func writeChunk(t *testing.T, al *Allocator, class int, v byte) Ref {
	t.Helper()
	r, ok := al.Alloc(class)
	require.True(t, ok)
	chunk := al.Chunk(r)
	for i := range chunk {
		chunk[i] = v
	}
	al.Wrote(r, len(chunk))
	return r
}

// crash closes b as a killed process would: nothing synced, nothing recorded.
func crash(t *testing.T, b *Backing) {
	t.Helper()
	for _, m := range [][]byte{b.metaMem, b.itemsMem} {
		require.NoError(t, unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(m)), uintptr(len(m))))
	}
	b.metaMem, b.itemsMem = nil, nil
	require.NoError(t, b.Close()) // unmapped: Close only closes the files, which unlocks the directory
}

// openLiveBacking opens dir with a live copy under root and, as a store's restart does, reads every
// stored page in where the live copy is being made (loadLive).
func openLiveBacking(t *testing.T, dir, root string, c *Classes) (*Backing, *Allocator) {
	t.Helper()
	b, _, err := OpenBacking(dir, Identity{Shards: 1, Classes: c}, BackingOptions{Live: root})
	require.NoError(t, err)
	loadLive(t, b)
	a, err := NewBackedArena(16*PageSize, b)
	require.NoError(t, err)
	return b, NewAllocator(a, c, 0)
}

// TestLiveCopySync runs random writes through the allocator (chunks written and marked, chunks freed,
// pages drained, moved to another class and released) and checks after each sync that the directory's
// files are byte for byte the live copy.
func TestLiveCopySync(t *testing.T) {
	root := liveRoot(t)
	for seed := range uint64(3) {
		t.Run("seed", func(t *testing.T) {
			w := newLiveWriter(seed)
			b, al := openLiveBacking(t, t.TempDir(), root, w.c)
			defer b.Close()
			for round := range 12 {
				for range 1 + w.rng.IntN(200) {
					w.op(t, al)
				}
				require.NoError(t, b.Sync())
				requireDiskIsLive(t, b, "after sync "+string(rune('0'+round%10)))
			}
		})
	}
}

// TestLiveCopySyncWhileWriting is TestLiveCopySync with the syncs running while the owner writes, as the
// server's do: the owner works under a lock that quiesce waits for (the shard lock). Once the writes stop,
// one more sync must leave the directory's files byte for byte the live copy: a block changed after a
// sync took its mark is copied by the next one, and a page punched and taken again is not punched after
// its new blocks were copied.
func TestLiveCopySyncWhileWriting(t *testing.T) {
	root := liveRoot(t)
	w := newLiveWriter(7)
	b, al := openLiveBacking(t, t.TempDir(), root, w.c)
	defer b.Close()
	var mu sync.Mutex
	b.SetQuiesce(func() { mu.Lock(); mu.Unlock() })
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 2_000_000 && !stop.Load(); i++ {
			func() {
				mu.Lock()
				defer mu.Unlock() // a failed require ends the goroutine: quiesce must not wait forever
				w.op(t, al)
			}()
		}
	}()
	syncs := 0
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); syncs++ {
		require.NoError(t, b.Sync())
	}
	stop.Store(true)
	<-done
	require.NoError(t, b.Sync())
	requireDiskIsLive(t, b, fmt.Sprintf("after %d syncs while writing, and one more", syncs))
}

// liveWriter makes random writes through an allocator on a live copy: chunks written and marked, chunks
// freed, pages emptied and moved to another class or released.
type liveWriter struct {
	rng     *rand.Rand
	c       *Classes
	classes []int
	noise   []byte
	held    map[Ref]bool
}

func newLiveWriter(seed uint64) *liveWriter {
	c := DefaultClasses()
	w := &liveWriter{rng: rand.New(rand.NewPCG(seed, 1)), c: c, classes: []int{0, 3, 10, c.Count() / 2, c.Largest()},
		noise: make([]byte, 2*PageSize), held: map[Ref]bool{}}
	for i := range w.noise {
		w.noise[i] = byte(i*131 + i>>9)
	}
	return w
}

// op makes one random write.
func (w *liveWriter) op(t *testing.T, al *Allocator) {
	rng, held, classes := w.rng, w.held, w.classes
	switch op := rng.IntN(10); {
	case op < 6:
		r, ok := al.Alloc(classes[rng.IntN(len(classes))])
		if !ok {
			return
		}
		chunk := al.Chunk(r)
		copy(chunk, w.noise[rng.IntN(PageSize):])
		chunk[StateOffset] = 1 // in use
		al.Wrote(r, len(chunk))
		held[r] = true
	case op < 9:
		for r := range held {
			al.Free(r)
			delete(held, r)
			break
		}
	default:
		// Empty a page of ours and move it to another class, or give it back.
		for r := range held {
			p := r.Page()
			for q := range held {
				if q.Page() == p {
					al.Free(q)
					delete(held, q)
				}
			}
			if rng.IntN(2) == 0 {
				require.NoError(t, al.ReleasePage(p))
			} else {
				to := classes[rng.IntN(len(classes))]
				if to == al.ClassOf(MakeRef(p, 0)) {
					to = classes[(slices.Index(classes, to)+1)%len(classes)]
				}
				require.NoError(t, al.MovePage(p, to))
			}
			break
		}
	}
}

// TestLiveCopyRestarts checks which copy a start uses: the live one after a clean stop (nothing to copy
// again), the directory's after the live one is gone (a machine reboot), and the directory's after a
// server ran on it without a live copy (the old live copy is behind it). A live copy whose data directory
// is gone is swept.
func TestLiveCopyRestarts(t *testing.T) {
	root := liveRoot(t)
	c := DefaultClasses()
	dir := t.TempDir()
	write := func(al *Allocator, v byte) Ref { return writeChunk(t, al, 5, v) }
	stored := func(b *Backing, r Ref) byte { return b.stored(r.Page())[r.Offset()+StateOffset+1] }

	b, al := openLiveBacking(t, dir, root, c)
	r := write(al, 7)
	require.NoError(t, b.Close())
	liveDir, err := liveDirFor(root, dir)
	require.NoError(t, err)
	require.DirExists(t, liveDir)

	b, _ = openLiveBacking(t, dir, root, c)
	require.Equal(t, byte(7), stored(b, r))
	for i, w := range b.live.marks[:(b.itemsSize>>blockShift+63)/64] {
		require.Zero(t, w, "after a clean stop nothing is to be copied again (word %d)", i)
	}
	require.NoError(t, b.Close())

	// A crash after a sync and more writes: the directory is behind, so the next start copies every block.
	// (A Backing alone adopts nothing: the new allocator takes page 0 again, and r2 may be r.)
	b, al = openLiveBacking(t, dir, root, c)
	require.NoError(t, b.Sync())
	r2 := write(al, 8)
	crash(t, b)
	b, _ = openLiveBacking(t, dir, root, c)
	require.Equal(t, byte(8), stored(b, r2))
	require.NoError(t, b.Sync())
	requireDiskIsLive(t, b, "the first sync after a crash")
	written := b.live.written.Load()
	require.Positive(t, written, "the directory was behind the live copy")
	require.LessOrEqual(t, written, int64(8<<blockShift), "the first sync after a crash writes what differs, not all")
	require.Nil(t, b.live.check, "every block compared")
	require.NoError(t, b.Close())

	require.NoError(t, os.RemoveAll(liveDir)) // a machine reboot
	// A crash while the new live copy is being made: the next start makes it again from the directory.
	b, _, err = OpenBacking(dir, Identity{Shards: 1, Classes: c}, BackingOptions{Live: root})
	require.NoError(t, err)
	require.True(t, b.live.owed.Load())
	crash(t, b)
	b, _ = openLiveBacking(t, dir, root, c)
	require.Equal(t, byte(8), stored(b, r2), "copied from the directory")
	require.NoError(t, b.Close())

	// Without a live copy the directory's files change; the live copy left behind is then stale.
	plain, _, err := OpenBacking(dir, Identity{Shards: 1, Classes: c}, BackingOptions{})
	require.NoError(t, err)
	plain.itemsPage(r2.Page())[r2.Offset()+StateOffset+1] = 9
	require.NoError(t, plain.Close())
	b, _ = openLiveBacking(t, dir, root, c)
	require.Equal(t, byte(9), stored(b, r2), "the directory's newer files, not the old live copy")
	require.NoError(t, b.Close())

	require.NoError(t, os.RemoveAll(dir))
	b, _ = openLiveBacking(t, t.TempDir(), root, c) // may take dir's inode, and so its live directory's name
	require.NoError(t, b.Close())
	ents, err := os.ReadDir(root)
	require.NoError(t, err)
	for _, e := range ents {
		origin, _ := os.ReadFile(filepath.Join(root, e.Name(), liveOrigin))
		require.NotContains(t, string(origin), dir+"\n", "the live copy of a removed data directory is swept")
	}
}

// TestLiveCopyFull runs a live copy on a tmpfs too small for the arena: taking a page the file system has
// no room for fails (the caller evicts), where a store into an unreserved hole would kill the process with
// SIGBUS.
func TestLiveCopyFull(t *testing.T) {
	root := tmpfstest.Small(t, "4m")
	c := DefaultClasses()
	b, al := openLiveBacking(t, t.TempDir(), root, c)
	defer b.Close()
	class := c.Largest()
	for range 64 {
		r, ok := al.Alloc(class)
		if !ok {
			break
		}
		chunk := al.Chunk(r)
		for i := range chunk {
			chunk[i] = 1
		}
		al.Wrote(r, len(chunk))
	}
	require.Less(t, al.OwnedPages(), 4, "pages taken on a 4 MiB tmpfs")
	require.Positive(t, al.OwnedPages())
}

// liveArena is an arena of 8 pages on a new directory with a live copy, closed at cleanup.
func liveArena(t *testing.T, c *Classes) (*Backing, *Arena) {
	t.Helper()
	b, _ := openLiveBacking(t, t.TempDir(), liveRoot(t), c)
	t.Cleanup(func() { b.Close() })
	a, err := NewBackedArena(8*PageSize, b)
	require.NoError(t, err)
	return b, a
}

// TestCollapseLiveCopy: the pages of a live copy on tmpfs move onto huge pages as anonymous ones do
// (TestCollapse); those of a mapped directory never do.
func TestCollapseLiveCopy(t *testing.T) {
	c := DefaultClasses()
	_, a := liveArena(t, c)
	require.True(t, a.Collapsing(), "a live copy's pages do not collapse")
	checkCollapse(t, a, "ShmemPmdMapped")

	mapped, _, err := OpenBacking(t.TempDir(), Identity{Shards: 1, Classes: c}, BackingOptions{})
	require.NoError(t, err)
	defer mapped.Close()
	a, err = NewBackedArena(8*PageSize, mapped)
	require.NoError(t, err)
	require.False(t, a.Collapsing(), "a mapped directory's pages collapse")
}

// No region of a live copy collapses while a sync runs (restart-live.md rule 13): a call during one skips,
// and the next collapses what was reported.
func TestCollapseWaitsForSync(t *testing.T) {
	c := DefaultClasses()
	b, a := liveArena(t, c)
	al := NewAllocator(a, c, 8)
	id, _ := c.For(1000)
	for al.Pages(id) < 3 { // the first two carved whole: a region
		r, ok := al.Alloc(id)
		require.True(t, ok)
		clear(al.Chunk(r))
		al.Chunk(r)[0] = 1
		al.Wrote(r, 1)
	}
	during := -1
	b.SetSyncSteps(func(step string) {
		if step == "items" {
			during = a.Collapse()
		}
	})
	require.NoError(t, b.Sync())
	b.SetSyncSteps(nil)
	require.Zero(t, during, "regions collapsed during a sync")
	require.Equal(t, 1, collapseOrSkip(t, a), "regions collapsed after it")
}

// TestLiveCopyMovedPage: a page that moves to another class is punched (chunks of the old geometry must
// not be read at a restart), which gives its blocks back to the tmpfs, and reserved again, so that stores
// into it land once the tmpfs is full, where a hole would get SIGBUS. When the reservation fails the move
// is refused and the page goes back to the arena.
func TestLiveCopyMovedPage(t *testing.T) {
	for _, tc := range []struct {
		name    string
		reserve bool // whether the files can be reserved in when the page moves
	}{{"room", true}, {"no room", false}} {
		t.Run(tc.name, func(t *testing.T) {
			root := tmpfstest.Small(t, "8m")
			c := DefaultClasses()
			b, al := openLiveBacking(t, t.TempDir(), root, c)
			defer b.Close()
			from, to := 0, c.Count()/2
			r := writeChunk(t, al, from, 1)
			p := r.Page()
			al.Free(r)
			if !tc.reserve {
				items := b.items
				var err error
				b.items, err = os.Open(items.Name()) // read-only: the punch and the reservation fail
				require.NoError(t, err)
				err = al.MovePage(p, to)
				require.NoError(t, b.items.Close())
				b.items = items
				require.ErrorIs(t, err, ErrPageRefused)
				require.Zero(t, al.OwnedPages(), "the refused page went back to the arena")
				_, _, draining := al.Draining()
				require.False(t, draining)
				return
			}
			require.NoError(t, al.MovePage(p, to))
			fillFS(t, root)
			n := 0
			for {
				r, ok := al.Alloc(to)
				if !ok || r.Page() != p {
					break
				}
				chunk := al.Chunk(r)
				require.False(t, faults(func() { fill(chunk, 2) }), "a store into chunk %d of the moved page faulted", n)
				al.Wrote(r, len(chunk))
				n++
			}
			require.Positive(t, n, "chunks of the moved page")
		})
	}
}

// fillFS writes a file into dir until its file system is full.
func fillFS(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "filler"))
	require.NoError(t, err)
	defer f.Close()
	buf := make([]byte, 64<<10)
	for range 1 << 14 {
		if _, err := f.Write(buf); err != nil {
			require.ErrorIs(t, err, unix.ENOSPC)
			return
		}
	}
	t.Fatal("the file system never filled up")
}

// faults runs fn and reports whether a store of it faulted: SIGBUS, for a hole of a full file system,
// becomes a panic here instead of killing the test binary.
func faults(fn func()) (faulted bool) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() { faulted = recover() != nil }()
	fn()
	return false
}

// fill writes v over b.
func fill(b []byte, v byte) {
	for i := range b {
		b[i] = v
	}
}

// BenchmarkLiveSync is a sync of a live copy whose every block changed: 64 MiB of items
// copied into the data directory (under $TMPDIR) and synced (copy), or compared with it, as the first sync
// after a crash does, where nothing changed (compare). CPU is what the server pays for it; the rest is
// the disk.
func BenchmarkLiveSync(b *testing.B) {
	for _, bc := range []struct {
		name  string
		model func(*Backing)
	}{{"copy", (*Backing).markAllLive}, {"compare", (*Backing).checkAllLive}} {
		b.Run(bc.name, func(b *testing.B) { benchmarkLiveSync(b, bc.model) })
	}
}

func benchmarkLiveSync(b *testing.B, model func(*Backing)) {
	root := liveRoot(b)
	c := DefaultClasses()
	back, _, err := OpenBacking(b.TempDir(), Identity{Shards: 1, Classes: c}, BackingOptions{Live: root})
	require.NoError(b, err)
	defer back.Close()
	const pages = 64
	for id := range uint32(pages) {
		mem, err := back.page(id, true)
		require.NoError(b, err)
		for i := 0; i < len(mem); i += 4096 {
			mem[i] = 1
		}
	}
	var ru0, ru1 unix.Rusage
	b.SetBytes(pages * PageSize)
	b.ResetTimer()
	back.markAllLive()
	require.NoError(b, back.Sync())
	written := back.live.written.Load()
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru0)
	for range b.N {
		model(back)
		require.NoError(b, back.Sync())
	}
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru1)
	cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/op")
	b.ReportMetric(float64(back.live.written.Load()-written)/float64(b.N), "written-B/op")
}

// TestLiveCopySyncFailure: a sync that cannot write the directory's files fails, and the blocks and
// punches it could not write are written by the next one that can.
func TestLiveCopySyncFailure(t *testing.T) {
	root := liveRoot(t)
	c := DefaultClasses()
	b, al := openLiveBacking(t, t.TempDir(), root, c)
	defer b.Close()
	write := func(class int, v byte) Ref { return writeChunk(t, al, class, v) }
	gone := []Ref{write(0, 1), write(0, 2)}
	write(1, 3)
	require.NoError(t, b.Sync())
	for _, r := range gone {
		al.Free(r)
	}
	require.NoError(t, al.ReleasePage(gone[0].Page())) // punched
	write(1, 4)

	l := b.live
	items, direct := l.items, l.direct
	var err error
	l.items, err = os.Open(items.Name()) // read-only: every write and punch fails
	require.NoError(t, err)
	defer l.items.Close()
	l.direct = -1
	require.Error(t, b.Sync())
	l.items, l.direct = items, direct
	require.NoError(t, b.Sync())
	requireDiskIsLive(t, b, "after a failed sync and a good one")
}

// liveCopyOfPages stores n pages of the largest class (two chunks each, in use) in a new data directory
// without a live copy, then opens it with one under root: a live copy being made, nothing adopted yet.
func liveCopyOfPages(t *testing.T, root string, n int) (*Backing, *Arena, *Allocator) {
	t.Helper()
	c := DefaultClasses()
	dir := t.TempDir()
	plain, _, err := OpenBacking(dir, Identity{Shards: 1, Classes: c}, BackingOptions{})
	require.NoError(t, err)
	a, err := NewBackedArena(16*PageSize, plain)
	require.NoError(t, err)
	al := NewAllocator(a, c, 0)
	for range n * 2 {
		r, ok := al.Alloc(c.Largest())
		require.True(t, ok)
		al.Chunk(r)[StateOffset] = 1
	}
	require.NoError(t, plain.Close())

	b, _, err := OpenBacking(dir, Identity{Shards: 1, Classes: c}, BackingOptions{Live: root})
	require.NoError(t, err)
	a, err = NewBackedArena(16*PageSize, b)
	require.NoError(t, err)
	return b, a, NewAllocator(a, c, 0)
}

// TestLiveCopyFullAtLoad: a live copy made from a directory that holds more than the tmpfs has room for
// keeps the pages it can reserve and gives the others back, where a store into one of them, or a free of
// a chunk in it, would get SIGBUS.
func TestLiveCopyFullAtLoad(t *testing.T) {
	root := tmpfstest.Small(t, "4m")
	b, a, al := liveCopyOfPages(t, root, 8)
	defer b.Close()
	c := al.Classes()
	for _, rec := range b.Records() {
		require.NoError(t, al.Adopt(rec.ID, rec.Class))
	}
	a.FinishAdopt()
	require.Equal(t, 8, al.OwnedPages())
	require.Error(t, al.LoadPages(), "8 pages do not fit a 4 MiB tmpfs")
	require.LessOrEqual(t, al.OwnedPages(), 4)
	require.Positive(t, al.OwnedPages())
	for p := range al.Pages(c.Largest()) {
		id := al.PageAt(c.Largest(), p)
		first, size, n := al.PageChunks(id)
		for i := range n {
			r := first + Ref(i*size)
			require.Equal(t, byte(1), al.Chunk(r)[StateOffset], "page %d chunk %d read in", id, i)
			al.Free(r) // writes into the page: reserved
		}
	}
}

// TestLiveCopyCountsUnadopted: a start that makes a live copy counts the items of the pages no shard
// adopts (a smaller -m: StoredChunks) from the directory's files, without reading those pages into the
// live copy, where nobody wants them and a full tmpfs has no room.
func TestLiveCopyCountsUnadopted(t *testing.T) {
	root := tmpfstest.Small(t, "4m")
	b, _, al := liveCopyOfPages(t, root, 4)
	defer func() { _ = os.Remove(filepath.Join(root, "filler")); b.Close() }() // room for Close's sync, whatever failed
	fillFS(t, root)
	used := 0
	require.False(t, faults(func() {
		for _, rec := range b.Records() { // none adopted
			al.StoredChunks(rec, func(chunk []byte) {
				if chunk[StateOffset] != 0 {
					used++
				}
			})
		}
	}), "counting the items of pages nobody adopts faulted")
	require.Equal(t, 8, used)
}

// TestLiveRoom: --data-live auto keeps a live copy only on a tmpfs with room for the memory limit's pages,
// counting what the directory's own live copy there already holds.
func TestLiveRoom(t *testing.T) {
	root := tmpfstest.Small(t, "16m")
	dir, other := t.TempDir(), t.TempDir()
	held, err := liveDirFor(root, dir)
	require.NoError(t, err)
	require.NoError(t, os.Mkdir(held, 0o700))
	f, err := os.Create(filepath.Join(held, "items"))
	require.NoError(t, err)
	require.NoError(t, unix.Fallocate(int(f.Fd()), 0, 0, 10<<20))
	require.NoError(t, f.Close())
	// moved's copy is under another root on the same tmpfs, which moved names (a start frees it).
	moved, sub := t.TempDir(), filepath.Join(root, "sub")
	require.NoError(t, os.Mkdir(sub, 0o700))
	require.NoError(t, recordLiveRoot(moved, sub))
	old, err := liveDirFor(sub, moved)
	require.NoError(t, err)
	require.NoError(t, os.Mkdir(old, 0o700))
	f, err = os.Create(filepath.Join(old, "items"))
	require.NoError(t, err)
	require.NoError(t, unix.Fallocate(int(f.Fd()), 0, 0, 4<<20))
	require.NoError(t, f.Close())

	disk := t.TempDir()
	cases := []struct {
		name, root, dir string
		memoryLimit     int64
		errHas          string
	}{
		{"not a tmpfs", disk, dir, 1 << 20, "not a tmpfs"},
		{"room", root, other, 1 << 20, ""},
		{"no room", root, other, 4 << 20, "MiB free"},
		{"room counting its copy under another root", root, moved, 4 << 20, ""},
		{"room counting its own live copy", root, dir, 11 << 20, ""},
		{"more than the tmpfs", root, dir, 17 << 20, "-m needs 18 MiB"}, // its pages, meta and moved files
		{"a tmpfs without a size limit", tmpfstest.Small(t, "0"), dir, 1 << 50, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.root == disk && OnTmpfs(disk) {
				t.Skip("the temporary directory is on tmpfs")
			}
			err := LiveRoom(tc.root, tc.dir, tc.memoryLimit)
			if tc.errHas == "" {
				require.NoError(t, err)
			} else {
				require.ErrorContains(t, err, tc.errHas)
			}
		})
	}
}

// TestDirectStartDropsDefaultLiveCopy: a start that maps the directory's own files frees the directory's
// live copy in the default root, which is stale from then on and which nothing else would free.
func TestDirectStartDropsDefaultLiveCopy(t *testing.T) {
	if !OnTmpfs(DefaultLiveRoot) {
		t.Skip("no tmpfs at " + DefaultLiveRoot)
	}
	c := DefaultClasses()
	dir := t.TempDir()
	held, err := liveDirFor(DefaultLiveRoot, dir)
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(held) })
	b, _ := openLiveBacking(t, dir, DefaultLiveRoot, c)
	require.NoError(t, b.Close())
	require.DirExists(t, held)
	b, _, err = OpenBacking(dir, Identity{Shards: 1, Classes: c}, BackingOptions{})
	require.NoError(t, err)
	require.NoError(t, b.Close())
	require.NoDirExists(t, held)
}

// TestDirectStartCatchesUpLiveCopy: a start that maps the directory's own files (--data-live off), or keeps
// its live copy under another root, after a server with a live copy was killed first writes the copy's
// blocks into the directory, which is behind it by what came after the last sync, and punches the copy's
// holes in it (a page moved to another class since is a hole until written, and the directory's still
// holds the old class's items); after a clean stop there is nothing to write. Either way the directory
// then holds what the live copy held, and the copy is freed. The copy is found where the directory
// records it was kept, the default root or another. With BackingOptions.Defer the writing waits for
// FinishOpen.
func TestDirectStartCatchesUpLiveCopy(t *testing.T) {
	if !OnTmpfs(DefaultLiveRoot) {
		t.Skip("no tmpfs at " + DefaultLiveRoot)
	}
	c := DefaultClasses()
	for _, tc := range []struct {
		name     string
		from, to string // live roots: "default" is DefaultLiveRoot, "" is off
		killed   bool
		deferred bool // BackingOptions.Defer
	}{
		{"default to off, killed", "default", "", true, false},
		{"default to off, stopped", "default", "", false, false},
		{"other to off, killed", "other", "", true, false},
		{"other to off, stopped", "other", "", false, false},
		{"other to another, killed", "other", "another", true, false},
		{"default to another, killed", "default", "another", true, false},
		{"other to default, stopped", "other", "default", false, false},
		// "link" is a symlink to other, pointed at another before the second start.
		{"link, repointed, killed", "link", "link", true, false},
		{"default to off, killed, deferred", "default", "", true, true},
		{"default to off, stopped, deferred", "default", "", false, true},
		{"other to another, killed, deferred", "other", "another", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			link := filepath.Join(t.TempDir(), "link")
			roots := map[string]string{"": "", "default": DefaultLiveRoot, "other": liveRoot(t), "another": liveRoot(t),
				"link": link}
			require.NoError(t, os.Symlink(roots["other"], link))
			from, to := roots[tc.from], roots[tc.to]
			dir := t.TempDir()
			held, err := liveDirFor(roots[strings.Replace(tc.from, "link", "other", 1)], dir)
			require.NoError(t, err)
			t.Cleanup(func() { _ = os.RemoveAll(held) })
			if to != "" {
				next, err := liveDirFor(roots[strings.Replace(tc.to, "link", "another", 1)], dir)
				require.NoError(t, err)
				t.Cleanup(func() { _ = os.RemoveAll(next) })
			}
			b, al := openLiveBacking(t, dir, from, c)
			r := writeChunk(t, al, 5, 7)
			moved := writeChunk(t, al, 9, 6) // a page of its own
			for range 4 {                    // 2 MiB the directory holds already: not to be written again
				writeChunk(t, al, c.Largest(), 3)
			}
			require.NoError(t, b.Sync())
			writeChunk(t, al, 5, 8) // after the last sync
			chunk := al.Chunk(r)    // and r changed again
			for i := range chunk {
				chunk[i] = 9
			}
			al.Wrote(r, len(chunk))
			b.punch(moved.Page()) // moved to another class, which stored nothing in it yet
			b.setRecord(moved.Page(), encodeRecord(12, 0))
			// The live file as read(2) reads it: a read of a hole through the mapping would fill it.
			want, err := os.ReadFile(filepath.Join(held, "items"))
			require.NoError(t, err)
			require.Len(t, want, int(b.itemsSize))
			if tc.killed {
				crash(t, b)
			} else {
				require.NoError(t, b.Close())
			}
			require.NoError(t, os.Remove(link))
			require.NoError(t, os.Symlink(roots["another"], link))

			// Deferred, a start that has a copy to write in returns first, and FinishOpen writes it.
			b, reason, err := OpenBacking(dir, Identity{Shards: 1, Classes: c}, BackingOptions{Live: to, Defer: tc.deferred})
			require.NoError(t, err)
			defer b.Close()
			require.Equal(t, tc.deferred && tc.killed, b.Pending())
			if b.Pending() {
				disk, err := os.ReadFile(filepath.Join(dir, "items"))
				require.NoError(t, err)
				require.False(t, bytes.Equal(want, disk), "written in before FinishOpen")
				require.DirExists(t, held)
				reason, err = b.FinishOpen()
				require.NoError(t, err)
				require.False(t, b.Pending())
			}
			require.Empty(t, reason)
			disk, err := os.ReadFile(filepath.Join(dir, "items"))
			require.NoError(t, err)
			require.True(t, bytes.Equal(want, disk), "the directory holds what the live copy held")
			require.Contains(t, b.Records(), PageRecord{ID: moved.Page(), Class: 12}, "the moved page's record, in the directory")
			if tc.killed {
				require.Equal(t, held, b.CaughtUp(), "the start says it wrote that copy in")
				// What came after the last sync is written, not every block the copy holds.
				require.Positive(t, b.caughtUpBytes)
				require.LessOrEqual(t, b.caughtUpBytes, int64(4<<blockShift), "blocks the directory held already were written")
			} else {
				require.Empty(t, b.CaughtUp(), "a clean stop's copy has nothing to write")
			}
			require.NoDirExists(t, held)
			if to != "" {
				loadLive(t, b)
				require.True(t, bytes.Equal(want, b.itemsMem[:b.itemsSize]), "the new live copy holds it")
				real, err := filepath.EvalSymlinks(to)
				require.NoError(t, err)
				require.Equal(t, real, recordedLiveRoot(dir))
			}
		})
	}
}

// TestLiveCopyCompare: the first sync after a crash reads the directory back, with O_DIRECT and through
// the page cache where the file system refuses O_DIRECT, and writes only the blocks that differ.
func TestLiveCopyCompare(t *testing.T) {
	for _, direct := range []bool{true, false} {
		t.Run(fmt.Sprintf("direct=%v", direct), func(t *testing.T) {
			root := liveRoot(t)
			c := DefaultClasses()
			dir := t.TempDir()
			b, al := openLiveBacking(t, dir, root, c)
			for range 16 { // 8 MiB the directory holds already: a comparison that read nothing would write them
				writeChunk(t, al, c.Largest(), 7)
			}
			require.NoError(t, b.Sync())
			writeChunk(t, al, 5, 8)
			crash(t, b)
			b, _ = openLiveBacking(t, dir, root, c)
			defer b.Close()
			if fd := b.live.direct; fd >= 0 && !direct {
				require.NoError(t, unix.Close(fd))
				b.live.direct = -1
			}
			require.NoError(t, b.Sync())
			requireDiskIsLive(t, b, "the first sync after a crash")
			written := b.live.written.Load()
			require.Positive(t, written)
			require.LessOrEqual(t, written, int64(8<<blockShift))
		})
	}
}

// TestLiveCopyCompareHoles: the first sync after a crash compares every block, and a page released before
// the crash is a hole in the live copy that DIR may still hold. DIR's copy is emptied, and the hole is
// never read through the mapping: on tmpfs such a read allocates the page, and on a full one it faults.
func TestLiveCopyCompareHoles(t *testing.T) {
	root := tmpfstest.Small(t, "32m")
	c := DefaultClasses()
	dir := t.TempDir()
	b, al := openLiveBacking(t, dir, root, c)
	byPage := map[uint32][]Ref{}
	for range 16 {
		r := writeChunk(t, al, c.Largest(), 7)
		byPage[r.Page()] = append(byPage[r.Page()], r)
	}
	require.NoError(t, b.Sync()) // DIR holds every page
	released := 0
	for p, refs := range byPage {
		if released == len(byPage)/2 {
			break
		}
		for _, r := range refs {
			al.Free(r)
		}
		require.NoError(t, al.ReleasePage(p)) // a hole in the live copy; DIR's copy waits for a sync
		released++
	}
	crash(t, b) // the list of pages to punch in DIR is lost with the process
	fillFS(t, root)
	b, _ = openLiveBacking(t, dir, root, c)
	defer func() { _ = os.Remove(filepath.Join(root, "filler")); b.Close() }() // room for Close's sync, whatever failed
	var err error
	require.False(t, faults(func() { err = b.Sync() }), "the first sync after a crash read a hole of a full tmpfs")
	require.NoError(t, err)
	require.NoError(t, os.Remove(filepath.Join(root, "filler")))
	requireDiskIsLive(t, b, "the first sync after a crash")
}

// TestLiveCopySyncSkipsPunched: blocks written, marked, then punched out of the live copy before the sync
// (their page released) are not read back through the mapping to be copied: on tmpfs that read allocates
// the page again, zeros held until the page is punched once more. DIR's copy is punched instead.
func TestLiveCopySyncSkipsPunched(t *testing.T) {
	root := liveRoot(t)
	c := DefaultClasses()
	b, al := openLiveBacking(t, t.TempDir(), root, c)
	defer b.Close()
	require.NoError(t, b.Sync())
	r := writeChunk(t, al, c.Largest(), 7)
	p := r.Page()
	al.Free(r)
	require.NoError(t, al.ReleasePage(p))
	allocated := func() int64 {
		var st unix.Stat_t
		require.NoError(t, unix.Fstat(int(b.items.Fd()), &st))
		return st.Blocks * 512
	}
	before := allocated()
	require.NoError(t, b.Sync())
	require.Equal(t, before, allocated(), "bytes of the live items file allocated, after the sync")
	disk, err := os.ReadFile(filepath.Join(b.dir, "items"))
	require.NoError(t, err)
	if end := int64(p+1) * PageSize; int64(len(disk)) >= end {
		require.False(t, slices.ContainsFunc(disk[int64(p)*PageSize:end], func(c byte) bool { return c != 0 }),
			"DIR still holds the released page")
	}
}

// A block marked written that the sync's scan finds in a hole, in a page no punch marked moved, is
// copied by the next sync: before Linux 6.4 the kernel shows a region of the live copy being collapsed
// onto a huge page as a hole until it is filled (remarkUnmoved). Here the hole is a punch the allocator
// does not know of, filled again as it was, unmarked, as the collapse would leave it.
func TestLiveCopySyncRemarksHoles(t *testing.T) {
	b, al := openLiveBacking(t, t.TempDir(), liveRoot(t), DefaultClasses())
	defer b.Close()
	require.NoError(t, b.Sync())
	r := writeChunk(t, al, 3, 7)
	blk := (int64(r.Page())*PageSize + int64(r.Offset())) &^ (1<<blockShift - 1)
	saved := slices.Clone(b.itemsMem[blk : blk+1<<blockShift])
	require.NoError(t, punchFile(b.items, blk, 1<<blockShift))
	require.NoError(t, b.Sync()) // finds the block in a hole
	copy(b.itemsMem[blk:], saved)
	require.NoError(t, b.Sync())
	requireDiskIsLive(t, b, "a sync after the hole was filled")
}

// A hole the scan shows where the live file holds bytes (before Linux 6.4, a region being collapsed onto a
// huge page: rule 13) is none to whatever writes a whole page or compares every block: the journal's
// image of a moved page, the first sync's comparison after a kill and a start's catch-up each write the
// block into DIR, whatever DIR held; taking the scan's word, they wrote zeros or left DIR's bytes.
func TestLiveCopyFalseHoles(t *testing.T) {
	for _, w := range holeReaders {
		for _, dirHeld := range []byte{0, 0xEE} {
			t.Run(fmt.Sprintf("%s, DIR holding %#x", w.name, dirHeld), func(t *testing.T) {
				b, src, page := falseHoleCopy(t, dirHeld)
				defer b.Close()
				require.NoError(t, w.write(b, src, page))
				requireDiskIsLive(t, b, w.name)
			})
		}
	}
}

// A reader of holeReaders that cannot read the live file (an I/O error) changes nothing in DIR and
// returns the error; the first sync's comparison after a kill keeps the page listed, so that the next
// one, the file readable again, writes it. Taking the block for a hole instead would have punched DIR's
// bytes or left its zeros, and no later sync would have looked again.
func TestLiveCopyUnreadableHoles(t *testing.T) {
	for _, w := range holeReaders {
		t.Run(w.name, func(t *testing.T) {
			b, src, page := falseHoleCopy(t, 0xEE)
			defer b.Close()
			before, err := os.ReadFile(filepath.Join(b.dir, "items"))
			require.NoError(t, err)

			readable := src.f
			src.f, err = os.OpenFile(readable.Name(), os.O_WRONLY, 0) // every pread fails (EBADF)
			require.NoError(t, err)
			defer src.f.Close()
			require.Error(t, w.write(b, src, page))
			after, err := os.ReadFile(filepath.Join(b.dir, "items"))
			require.NoError(t, err)
			require.True(t, bytes.Equal(before, after), "DIR's items changed by a reader that could not read")

			src.f = readable
			again := w.write
			if w.again != nil {
				again = w.again
			}
			require.NoError(t, again(b, src, page))
			requireDiskIsLive(t, b, w.name+", once the file reads")
		})
	}
}

// holeReaders are what reads the live file's holes before writing them into DIR as holes (rule 13),
// each writing the page of the live file src that holds a chunk into DIR; again, when not nil, is how
// the next attempt after a failed write goes (else write again).
var holeReaders = []struct {
	name         string
	write, again func(b *Backing, src *liveFile, page uint32) error
}{
	{"a moved page's image", func(b *Backing, src *liveFile, page uint32) error {
		pages := []movedPage{{id: page, rec: *b.recordWord(page), image: true}}
		w := openJournal(b.dir, b.SealKey(), b.meta, b.live.items, pages)
		w.writePage(src, page)
		_, err := commitJournal(b.dir, w, b.meta, b.live.items, pages, b.step)
		return err
	}, nil},
	{"the first sync after a kill", func(b *Backing, src *liveFile, _ uint32) error {
		b.checkAllLive()
		return b.live.copyChanged(src, nil, nil)
	}, func(b *Backing, src *liveFile, _ uint32) error {
		return b.live.copyChanged(src, nil, nil) // the page listed still, not every page listed again
	}},
	{"a start's catch-up", func(b *Backing, src *liveFile, page uint32) error {
		live, stored := make([]byte, PageSize), make([]byte, PageSize)
		_, err := catchUpRange(src, b.live.items, live, stored, int64(page)*PageSize, int64(page+1)*PageSize)
		return err
	}, nil},
}

// falseHoleCopy makes a live copy with a chunk written and synced, then dirHeld in DIR's copy of the
// chunk's first block, and returns the live file with that block taken out of its scan's runs (falseHole)
// and the chunk's page.
func falseHoleCopy(t *testing.T, dirHeld byte) (*Backing, *liveFile, uint32) {
	t.Helper()
	b, al := openLiveBacking(t, t.TempDir(), liveRoot(t), DefaultClasses())
	r := writeChunk(t, al, 3, 7)
	require.NoError(t, b.Sync())
	blk := (int64(r.Page())*PageSize + int64(r.Offset())) >> blockShift
	_, err := b.live.items.WriteAt(bytes.Repeat([]byte{dirHeld}, 1<<blockShift), blk<<blockShift)
	require.NoError(t, err)

	src := &liveFile{f: b.items, mem: b.itemsMem}
	src.scan(b.itemsLen() >> blockShift)
	falseHole(src, blk)
	var held [1]bool
	src.holds(blk, held[:])
	require.False(t, held[0], "the scan shows the block in a hole")
	return b, src, r.Page()
}

// falseHole takes block blk out of the runs src's scan found.
func falseHole(src *liveFile, blk int64) {
	var runs [][2]int64
	for _, r := range src.data {
		if r[0] > blk || blk >= r[1] {
			runs = append(runs, r)
			continue
		}
		if r[0] < blk {
			runs = append(runs, [2]int64{r[0], blk})
		}
		if blk+1 < r[1] {
			runs = append(runs, [2]int64{blk + 1, r[1]})
		}
	}
	src.data = runs
}

// TestLiveCopyResume: a server killed while it made its live copy (a start after a reboot: each shard reads
// its pages in, then serves and changes them) leaves a copy that holds the changes of the shards that had
// read theirs in, and the directory, which lacks them, all the other pages. The next start goes on making
// the copy instead of making it again from the directory, which would bring back what those shards
// deleted or overwrote; a start with --data-live off writes those shards' pages into the directory.
func TestLiveCopyResume(t *testing.T) {
	if !OnTmpfs(DefaultLiveRoot) {
		t.Skip("no tmpfs at " + DefaultLiveRoot)
	}
	id := Identity{Shards: 2, Classes: DefaultClasses()}
	for _, restart := range []string{"live", "off", "live, the copy cut short"} {
		t.Run(restart, func(t *testing.T) {
			dir := t.TempDir()
			held, err := liveDirFor(DefaultLiveRoot, dir)
			require.NoError(t, err)
			t.Cleanup(func() { _ = os.RemoveAll(held) })
			// The directory as a reboot leaves it: page 0 of shard 0, page 1 of shard 1.
			b, _, err := OpenBacking(dir, id, BackingOptions{})
			require.NoError(t, err)
			for page := range uint32(2) {
				mem, err := b.page(page, true)
				require.NoError(t, err)
				fill(mem, byte(10+page))
				b.setRecord(page, encodeRecord(3, uint8(page)))
			}
			require.NoError(t, b.Close())

			// A start makes the live copy; shard 0 reads its page in and changes it, then the kill.
			b, reason, err := OpenBacking(dir, id, BackingOptions{Live: DefaultLiveRoot})
			require.NoError(t, err)
			require.Empty(t, reason)
			require.True(t, b.live.owed.Load())
			require.NoError(t, b.loadPage(0))
			require.NoError(t, b.ShardLoaded(0))
			fill(b.itemsMem[:PageSize], 20)
			b.live.mark(0, PageSize)
			crash(t, b)
			require.NoFileExists(t, filepath.Join(held, liveOrigin))
			if restart == "live, the copy cut short" { // shorter than DIR's: grown again, page 1 read in
				require.NoError(t, os.Truncate(filepath.Join(held, "items"), PageSize))
			}

			want := map[uint32]byte{0: 20, 1: 11}
			var got func(page uint32) []byte
			if restart != "off" {
				b, _, err = OpenBacking(dir, id, BackingOptions{Live: DefaultLiveRoot})
				require.NoError(t, err)
				defer b.Close()
				require.True(t, b.live.owed.Load(), "the copy is still being made")
				for page := range uint32(2) {
					require.NoError(t, b.loadPage(page))
				}
				require.NoError(t, b.LiveLoaded())
				require.FileExists(t, filepath.Join(held, liveOrigin))
				require.NoFileExists(t, filepath.Join(held, liveLoading))
				got = func(page uint32) []byte { return b.itemsPage(page) }
			} else {
				b, _, err = OpenBacking(dir, id, BackingOptions{})
				require.NoError(t, err)
				defer b.Close()
				require.Equal(t, held, b.CaughtUp(), "the copy being made was written in")
				got = func(page uint32) []byte { return b.itemsPage(page) }
			}
			for page, v := range want {
				require.Equal(t, bytes.Repeat([]byte{v}, PageSize), got(page), "page %d", page)
			}
		})
	}
}

// TestShardLoadedOnFullTmpfs: recording a shard as read into the copy being made (its file was reserved
// at start), and the copy as made (a rename), need no new room, as the live root may be full by then
// (its pages are reserved for -m).
func TestShardLoadedOnFullTmpfs(t *testing.T) {
	root := tmpfstest.Small(t, "4m")
	dir := t.TempDir()
	b, _, err := OpenBacking(dir, Identity{Shards: 2, Classes: DefaultClasses()}, BackingOptions{Live: root})
	require.NoError(t, err)
	defer b.Close()
	require.True(t, b.live.owed.Load())
	fillFS(t, root)
	for owner := range 2 {
		require.NoError(t, b.ShardLoaded(owner))
	}
	loaded, err := os.ReadFile(filepath.Join(b.live.dir, liveLoaded))
	require.NoError(t, err)
	require.Equal(t, "0\n1\n", string(loaded))
	require.NoError(t, b.LiveLoaded(), "the copy's origin needs no new room either")
	origin, err := os.ReadFile(filepath.Join(b.live.dir, liveOrigin))
	require.NoError(t, err)
	require.Equal(t, b.live.originText(dir, b.live.instance), string(origin))
	require.NoFileExists(t, filepath.Join(b.live.dir, liveLoading))
	require.NoFileExists(t, filepath.Join(b.live.dir, liveLoaded))
}

// TestRecordedLiveRoot: the root a data directory names for its live copy is used only when it is a clean
// absolute path; anything else (no file, a damaged one) is the default root.
func TestRecordedLiveRoot(t *testing.T) {
	for _, tc := range []struct {
		file *string
		want string
	}{
		{nil, DefaultLiveRoot},
		{ptr("/mnt/live"), "/mnt/live"},
		{ptr(""), DefaultLiveRoot},
		{ptr("mnt/live"), DefaultLiveRoot},
		{ptr("/mnt/live/"), DefaultLiveRoot},
		{ptr("/mnt/\x00live"), "/mnt/\x00live"}, // clean and absolute: not found where it is looked for
		{ptr("/mnt/../live"), DefaultLiveRoot},
	} {
		dir := t.TempDir()
		if tc.file != nil {
			require.NoError(t, os.WriteFile(filepath.Join(dir, liveRootFile), []byte(*tc.file), 0o600))
		}
		require.Equal(t, tc.want, recordedLiveRoot(dir))
	}
	dir := t.TempDir()
	require.NoError(t, recordLiveRoot(dir, "/dev/shm/../shm"))
	require.Equal(t, "/dev/shm", recordedLiveRoot(dir))
}

func ptr(s string) *string { return &s }

// The pages a move wrote and no sync committed yet are known to a start after a kill (live.pending, the
// live directory's moved file): a rescue's destination keeps its record, which openLiveMeta's rule (a
// record changed since DIR's) would not see, and committing the source alone could lose the item
// (restart-live.md rule 12).
func TestLiveCopyMovesSurviveKill(t *testing.T) {
	for _, full := range []bool{false, true} {
		t.Run(map[bool]string{false: "moved file", true: "no room for the moved file"}[full], func(t *testing.T) {
			movesSurviveKill(t, full)
		})
	}
}

// movesSurviveKill is TestLiveCopyMovesSurviveKill; full leaves the tmpfs no room for the moved file when
// the copy is opened (openPending's fallback: the marks in memory only), room for pages afterwards.
func movesSurviveKill(t *testing.T, full bool) {
	root := liveRoot(t)
	var filler string
	if full {
		root = tmpfstest.Small(t, "16m")
		filler = filepath.Join(root, "filler")
		var st unix.Statfs_t
		require.NoError(t, unix.Statfs(root, &st))
		f, err := os.Create(filler)
		require.NoError(t, err)
		require.NoError(t, unix.Fallocate(int(f.Fd()), 0, 0, int64(st.Bavail)*st.Bsize-64<<10))
		require.NoError(t, f.Close())
	}
	c := DefaultClasses()
	dir := t.TempDir()
	b, al := openLiveBacking(t, dir, root, c)
	if full {
		require.NoFileExists(t, filepath.Join(b.live.dir, movedFile), "the moved file with no room for it")
		require.NoError(t, os.Remove(filler))
	}
	class := c.Largest()
	src := writeChunk(t, al, class, 7)
	var others []Ref // src's page's other chunks
	dst := writeChunk(t, al, class, 8)
	for src.Page() == dst.Page() {
		others = append(others, dst)
		dst = writeChunk(t, al, class, 8)
	}
	require.NoError(t, b.Sync())
	// A move: src's chunk copied over dst's page's free chunk, src's page emptied and given to class 3.
	require.NoError(t, al.BeginDrain(src.Page()))
	for r, ok := al.Alloc(class); ok; r, ok = al.Alloc(class) {
		if r.Page() == dst.Page() {
			copy(al.Chunk(r), al.Chunk(src))
			al.Wrote(r, len(al.Chunk(r)))
			break
		}
	}
	al.Free(src)
	for _, r := range others { // evicted
		al.Free(r)
	}
	require.NoError(t, al.EndDrain(3))
	crash(t, b)

	b, _ = openLiveBacking(t, dir, root, c)
	defer b.Close()
	require.True(t, b.live.isMoved(src.Page()), "the page moved")
	// Without the file, only a page whose record changed where DIR's names it in use is known moved
	// (openLiveMeta); the first sync after a kill compares every block all the same (copyChanged).
	require.Equal(t, !full, b.live.isMoved(dst.Page()), "the page the move copied into, whose record is unchanged")
	require.NoError(t, b.Sync())
	requireDiskIsLive(t, b, "the first sync after the kill")
	require.False(t, b.live.movesOwed())
}

// A sync commits the pages moved since the last one through the journal (rule 12) writing their images
// straight from the mapping: what it allocates does not grow with the pages moved (a MiB each before).
func TestLiveCopyCommitHoldsNoImages(t *testing.T) {
	const pages = 12
	root := liveRoot(t)
	c := DefaultClasses()
	b, al := openLiveBacking(t, t.TempDir(), root, c)
	defer b.Close()
	class := c.Largest()
	byPage := map[uint32][]Ref{}
	for v := byte(1); len(byPage) < pages; v++ {
		r := writeChunk(t, al, class, v)
		byPage[r.Page()] = append(byPage[r.Page()], r)
	}
	require.NoError(t, b.Sync())
	for p, refs := range byPage { // each page emptied and given to another class: moved, still in use
		require.NoError(t, al.BeginDrain(p))
		for _, r := range refs {
			al.Free(r)
		}
		require.NoError(t, al.EndDrain(3))
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	require.NoError(t, b.Sync())
	runtime.ReadMemStats(&after)
	requireDiskIsLive(t, b, "after the commit")
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(3*PageSize), "bytes allocated by a sync committing %d moved pages", pages)
}
