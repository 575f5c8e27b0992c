package slab

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// interruptFallocate makes fallocateSys fail with EINTR the first failures times it is called for each
// piece, as Linux 6.1's tmpfs does whenever a signal is pending (fallocate), and records the pieces the
// system call then allocated (on 6.1 it may interrupt them too).
func interruptFallocate(t *testing.T, failures int) (pieces *[][2]int64) {
	t.Helper()
	pieces = new([][2]int64)
	tries := map[int64]int{}
	real := fallocateSys
	fallocateSys = func(fd int, mode uint32, off, n int64) error {
		if tries[off]++; tries[off] <= failures {
			return unix.EINTR
		}
		err := real(fd, mode, off, n)
		if err == nil {
			*pieces = append(*pieces, [2]int64{off, n})
		}
		return err
	}
	t.Cleanup(func() { fallocateSys = real })
	return pieces
}

func TestFallocateRetriesInterrupted(t *testing.T) {
	for _, tc := range []struct {
		name     string
		failures int // EINTRs before each piece goes through
		off, n   int64
		err      error
	}{
		{"never interrupted", 0, 0, 3 * PageSize, nil},
		{"each piece interrupted once", 1, PageSize, 3 * PageSize, nil},
		{"interrupted all but the last try", fallocateTries - 1, 0, PageSize + 4096, nil},
		{"interrupted at every try", fallocateTries, 0, PageSize, unix.EINTR},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := os.Create(filepath.Join(liveRoot(t), "f"))
			require.NoError(t, err)
			defer f.Close()
			pieces := interruptFallocate(t, tc.failures)
			err = fallocate(f, 0, tc.off, tc.n)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				require.Empty(t, *pieces)
				return
			}
			require.NoError(t, err)
			at := tc.off
			for _, p := range *pieces {
				require.Equal(t, at, p[0], "pieces in order, none left out")
				require.LessOrEqual(t, p[1], int64(fallocateStep))
				at += p[1]
			}
			require.Equal(t, tc.off+tc.n, at)
			var st unix.Stat_t
			require.NoError(t, unix.Fstat(int(f.Fd()), &st))
			require.Equal(t, tc.n, st.Blocks*512, "every byte allocated")
		})
	}
}

// TestLoadPagesInterrupted: a live copy's pages are reserved at the start while signals interrupt the
// allocations (Debian 12's kernel, 6.1, returns EINTR for any pending signal). Every page is kept, with its
// contents; before fallocate retried, each interrupted page was given back with its items, and nothing
// said so.
func TestLoadPagesInterrupted(t *testing.T) {
	b, a, al := liveCopyOfPages(t, liveRoot(t), 8)
	defer b.Close()
	c := al.Classes()
	for _, rec := range b.Records() {
		require.NoError(t, al.Adopt(rec.ID, rec.Class))
	}
	a.FinishAdopt()
	interruptFallocate(t, 1)
	require.NoError(t, al.LoadPages())
	require.Equal(t, 8, al.OwnedPages(), "no page given back")
	for p := range al.Pages(c.Largest()) {
		id := al.PageAt(c.Largest(), p)
		first, size, n := al.PageChunks(id)
		for i := range n {
			require.Equal(t, byte(1), al.Chunk(first + Ref(i*size))[StateOffset], "page %d chunk %d read in", id, i)
		}
	}
}
