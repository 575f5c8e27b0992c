package slab

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
)

// Data a start does not use (restart.md rule 8: a directory that starts empty; a live copy made stale) is
// gigabytes of blocks or tmpfs pages, and the kernel frees them inside the call that drops the last of
// the file: seconds of ftruncate or unlink for a few GB, during which the start could not open its
// listener, and a kill -9 of the process would wait for the call. So such a file is unlinked (or
// replaced) at once and freed in discardStep steps by a goroutine that holds it open meanwhile: a
// process that dies before that goroutine is done leaves nothing behind, as the kernel frees the rest
// at its exit.
const discardStep = 64 << 20

var (
	discarding  atomic.Int64     // files being freed
	discardHook func(f *os.File) // tests: called before a file is freed
)

// emptied returns an empty file in f's place: f itself when it is empty, else a new file at its path,
// f being freed in the background (discard). f must not be mapped.
func emptied(f *os.File) (*os.File, error) {
	size, err := fileSize(f)
	if err != nil || size == 0 {
		return f, err
	}
	if err := os.Remove(f.Name()); err != nil && !os.IsNotExist(err) {
		return f, err
	}
	nf, err := os.OpenFile(f.Name(), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return f, err
	}
	discard(f)
	return nf, nil
}

// removeAllSoon removes directory dir as os.RemoveAll does, its items file (a live copy's) freed in the
// background.
func removeAllSoon(dir string) {
	f, err := os.OpenFile(filepath.Join(dir, "items"), os.O_RDWR|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	_ = os.RemoveAll(dir)
	if err == nil {
		discard(f)
	}
}

// discard frees f, unlinked, from its end in discardStep steps, then closes it; in the background.
func discard(f *os.File) {
	discarding.Add(1)
	go func() {
		defer discarding.Add(-1)
		defer f.Close()
		if discardHook != nil {
			discardHook(f)
		}
		st, err := f.Stat()
		if err != nil || !st.Mode().IsRegular() {
			return
		}
		for size := st.Size(); size > 0; {
			size = max(size-discardStep, 0)
			if f.Truncate(size) != nil {
				return
			}
		}
	}()
}
