//go:build linux

package slab

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leasecached/leasecached/internal/tmpfstest"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// A start that does not use what a directory stores (here: another shard count) does not wait while the
// kernel frees it, which takes seconds for a few GB: OpenBacking returns with the directory's items, and
// the live copy, emptied while their old files, unlinked, are still held for freeing (discards.hook holds
// them), and their blocks counted as free room meanwhile; the freeing then ends with nothing left of them.
func TestStartEmptyFreesInTheBackground(t *testing.T) {
	for _, live := range []bool{false, true} {
		t.Run(map[bool]string{false: "mapped", true: "live copy"}[live], func(t *testing.T) {
			root := ""
			if live {
				root = tmpfstest.Small(t, "64m") // only this test's files: its free room is exact
			}
			dir, c := t.TempDir(), DefaultClasses()
			b, _, err := OpenBacking(dir, Identity{Shards: 1, Classes: c}, BackingOptions{Live: root})
			require.NoError(t, err)
			if live {
				loadLive(t, b)
			}
			a, err := NewBackedArena(16*PageSize, b)
			require.NoError(t, err)
			al := NewAllocator(a, c, 0)
			for class := 20; class < 28; class++ { // a page each
				writeChunk(t, al, class, 7)
			}
			require.NoError(t, b.Close())

			var mu sync.Mutex
			var held []os.FileInfo
			hold := make(chan struct{})
			setHook := func(h func(*os.File)) {
				discards.mu.Lock()
				discards.hook = h
				discards.mu.Unlock()
			}
			setHook(func(f *os.File) {
				st, err := f.Stat()
				if err != nil {
					st = nil // failed below
				}
				mu.Lock()
				held = append(held, st)
				mu.Unlock()
				<-hold
			})
			defer setHook(nil)
			type opened struct {
				b      *Backing
				reason string
				err    error
			}
			done := make(chan opened, 1)
			go func() {
				b, reason, err := OpenBacking(dir, Identity{Shards: 2, Classes: c}, BackingOptions{Live: root})
				done <- opened{b, reason, err}
			}()
			var o opened
			select {
			case o = <-done:
			case <-time.After(20 * time.Second):
				close(hold)
				t.Fatal("the start waits for the data it does not use to be freed")
			}
			require.NoError(t, o.err)
			require.NotEmpty(t, o.reason)
			st, err := os.Stat(filepath.Join(dir, "items"))
			require.NoError(t, err)
			require.Zero(t, st.Size(), "the directory's items starts empty")
			require.Eventually(t, func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(held) == map[bool]int{false: 1, true: 2}[live]
			}, 10*time.Second, time.Millisecond, "the directory's items and the live copy's, freed")
			byDev := map[uint64]int64{}
			for _, fi := range held {
				require.NotNil(t, fi)
				st := fi.Sys().(*syscall.Stat_t)
				require.Positive(t, st.Blocks, "%s: freed before its turn", fi.Name())
				require.Zero(t, st.Nlink, "%s: unlinked, so that nothing of it outlives the process", fi.Name())
				byDev[st.Dev] += st.Blocks * 512
			}
			for dev, n := range byDev {
				require.Equal(t, n, discardHeld(dev), "blocks being freed count as free room")
			}
			if live {
				var st unix.Statfs_t
				var rst unix.Stat_t
				require.NoError(t, unix.Statfs(root, &st))
				require.NoError(t, unix.Stat(root, &rst))
				free, _ := freeBytes(&st)
				require.Positive(t, discardHeld(rst.Dev))
				require.Equal(t, int((free+discardHeld(rst.Dev))/PageSize), o.b.RoomPages(),
					"the old live copy's pages, being freed, are room for the new one")
			}
			close(hold)
			require.Eventually(t, func() bool { return discarding() == 0 }, 10*time.Second, time.Millisecond)
			for dev := range byDev {
				require.Zero(t, discardHeld(dev))
			}
			require.NoError(t, o.b.Close())
		})
	}
}

// A start sweeps the live copies under its root whose data directory is gone, but a server whose directory
// was renamed (or one in another mount namespace sharing the root) still maps its copy: the sweep only
// unlinks it, and that server goes on reading and writing it (found by a review: the background freeing
// truncated it, and that server died with SIGBUS).
func TestSweepLeavesAMappedCopyWhole(t *testing.T) {
	root, c := liveRoot(t), DefaultClasses()
	dirA := filepath.Join(t.TempDir(), "a")
	require.NoError(t, os.Mkdir(dirA, 0o700))
	a, al := openLiveBacking(t, dirA, root, c)
	defer a.Close()
	r := writeChunk(t, al, 5, 7)
	require.NoError(t, os.Rename(dirA, dirA+"-moved"))

	b, _ := openLiveBacking(t, t.TempDir(), root, c) // sweeps a's copy: its directory is gone
	defer b.Close()
	require.Eventually(t, func() bool { return discarding() == 0 }, 10*time.Second, time.Millisecond)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	require.NotPanics(t, func() {
		chunk := al.Chunk(r)
		require.Equal(t, byte(7), chunk[len(chunk)-1])
		chunk[0] = 8
	}, "the running server's copy was freed under it")
}

// A directory whose items is a link to a file elsewhere (another disk) keeps that layout when it starts
// empty: the file is emptied in place, as before there was a background freeing, not the link replaced.
func TestStartEmptyKeepsALinkedItems(t *testing.T) {
	dir, elsewhere, c := t.TempDir(), t.TempDir(), DefaultClasses()
	target := filepath.Join(elsewhere, "items")
	require.NoError(t, os.WriteFile(target, nil, 0o600))
	require.NoError(t, os.Symlink(target, filepath.Join(dir, "items")))
	b, _, err := OpenBacking(dir, Identity{Shards: 1, Classes: c}, BackingOptions{})
	require.NoError(t, err)
	a, err := NewBackedArena(16*PageSize, b)
	require.NoError(t, err)
	writeChunk(t, NewAllocator(a, c, 0), 5, 7)
	require.NoError(t, b.Close())
	st, err := os.Stat(target)
	require.NoError(t, err)
	require.Positive(t, st.Size())

	b, reason, err := OpenBacking(dir, Identity{Shards: 2, Classes: c}, BackingOptions{})
	require.NoError(t, err)
	require.NoError(t, b.Close())
	require.NotEmpty(t, reason)
	fi, err := os.Lstat(filepath.Join(dir, "items"))
	require.NoError(t, err)
	require.Equal(t, os.ModeSymlink, fi.Mode()&os.ModeType, "the link is kept")
	st, err = os.Stat(target)
	require.NoError(t, err)
	require.Zero(t, st.Size(), "what it links to is emptied")
}
