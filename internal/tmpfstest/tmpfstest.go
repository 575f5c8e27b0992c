//go:build linux

// Package tmpfstest gives tests a directory on tmpfs: a root for a data directory's live copy.
package tmpfstest

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// Dir is a new directory under /dev/shm named after pattern (os.MkdirTemp's), removed after the test,
// which skips where /dev/shm is not a tmpfs.
func Dir(t testing.TB, pattern string) string {
	t.Helper()
	var st unix.Statfs_t
	if unix.Statfs("/dev/shm", &st) != nil || st.Type != unix.TMPFS_MAGIC {
		t.Skip("no tmpfs at /dev/shm")
	}
	dir, err := os.MkdirTemp("/dev/shm", pattern)
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// Small mounts a tmpfs of size (mount's size=) on a new directory for the test, unmounted after it; the
// test skips where it may not mount (not root).
func Small(t testing.TB, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	root := t.TempDir()
	require.NoError(t, unix.Mount("tmpfs", root, "tmpfs", 0, "size="+size))
	t.Cleanup(func() { _ = unix.Unmount(root, unix.MNT_DETACH) })
	return root
}
