package slab

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// The small files a data directory and its live copy keep beside items and meta (lock, live-root,
// origin, loading, loaded, moved) are read whole, and each is at most a few KiB, moved a bitmap of
// movedBytes. Damaged, one may be any size or no regular file at all (a link to /dev/zero, a FIFO): read
// through readSmall, it is then an error, which each reader takes for a file that says nothing, never a
// read of all of it into memory or a wait on it (restart.md rule 3: damaged files lose items, never stop
// the server).
const (
	smallTextMax = 8 << 10  // a path (PATH_MAX 4096) and a number or two, one a line
	loadedMax    = 64 << 10 // a line per shard id (live.openLoaded)
	lockMax      = 64       // a pid
)

// readSmall reads file path, a regular file of at most limit bytes.
func readSmall(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0) // a FIFO must not hold the open
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() || st.Size() > limit {
		return nil, fmt.Errorf("slab: %s: not a regular file of at most %d bytes", path, limit)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err == nil && int64(len(b)) > limit { // grown since the Stat
		err = fmt.Errorf("slab: %s: longer than %d bytes", path, limit)
	}
	return b, err
}
