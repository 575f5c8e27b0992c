//go:build linux

package slab

import (
	"os"
	"path/filepath"
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
