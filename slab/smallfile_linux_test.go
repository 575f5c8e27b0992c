package slab

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestReadSmall: a damaged small file (grown to a TiB, a link to /dev/zero, a FIFO, a directory) is an
// error at once, never read into memory whole nor waited on; one within its limit is read.
func TestReadSmall(t *testing.T) {
	dir := t.TempDir()
	path := func(name string) string { return filepath.Join(dir, name) }
	require.NoError(t, os.WriteFile(path("ok"), []byte("/dev/shm"), 0o600))
	require.NoError(t, os.WriteFile(path("limit"), make([]byte, 64), 0o600))
	require.NoError(t, os.WriteFile(path("huge"), []byte("x"), 0o600))
	require.NoError(t, os.Truncate(path("huge"), 1<<40))
	require.NoError(t, os.Symlink("/dev/zero", path("zero")))
	require.NoError(t, unix.Mkfifo(path("fifo"), 0o600))
	require.NoError(t, os.Mkdir(path("dir"), 0o700))
	for _, tc := range []struct {
		name string
		want string // "" when an error is
	}{
		{"ok", "/dev/shm"},
		{"limit", string(make([]byte, 64))},
		{"huge", ""},
		{"zero", ""},
		{"fifo", ""},
		{"dir", ""},
		{"missing", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := readSmall(path(tc.name), 64)
			if tc.want == "" {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, string(b))
		})
	}
}

// A live copy's origin or moved file, or a directory's live-root, grown to a TiB (damage) leaves the
// start able to go on: sweepLive passes over the copy, and the directory's root is the default one.
func TestDamagedSmallFilesAtStart(t *testing.T) {
	root, dir := liveRoot(t), t.TempDir()
	ld := filepath.Join(root, livePrefix+"0-0")
	require.NoError(t, os.Mkdir(ld, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(ld, liveOrigin), nil, 0o600))
	require.NoError(t, os.Truncate(filepath.Join(ld, liveOrigin), 1<<40))
	sweepLive(root) // read whole, it ran out of memory
	require.DirExists(t, ld, "a copy naming no directory is left alone")

	require.NoError(t, os.WriteFile(filepath.Join(dir, liveRootFile), []byte("/x"), 0o600))
	require.NoError(t, os.Truncate(filepath.Join(dir, liveRootFile), 1<<40))
	require.Equal(t, DefaultLiveRoot, recordedLiveRoot(dir))
}

// A live copy whose items is a FIFO (damage) does not hold the start: it is opened without blocking, as
// every small file is (readSmall), and the start goes on or fails, but returns.
func TestLiveCopyItemsFifo(t *testing.T) {
	root, dir, c := liveRoot(t), t.TempDir(), DefaultClasses()
	b, _ := openLiveBacking(t, dir, root, c)
	ld := b.live.dir
	require.NoError(t, b.Close())
	require.NoError(t, os.Remove(filepath.Join(ld, "items")))
	require.NoError(t, unix.Mkfifo(filepath.Join(ld, "items"), 0o600))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if b, _, err := OpenBacking(dir, Identity{Shards: 1, Classes: c}, BackingOptions{Live: root}); err == nil {
			_ = b.Close()
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		if f, err := os.OpenFile(filepath.Join(ld, "items"), os.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
			_ = f.Close() // lets the blocked open return
		}
		t.Fatal("the start hangs on a FIFO named items in the live copy")
	}
}
