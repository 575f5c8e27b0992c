package slab

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Data a start does not use (restart.md rule 8: a directory that starts empty; a live copy made stale) is
// gigabytes of blocks or tmpfs pages, and the kernel frees them inside the call that drops the last of
// the file: seconds of ftruncate or unlink for a few GB, during which the start could not open its
// listener. So such a file is unlinked (or replaced) at once and freed in discardStep steps by a
// goroutine that holds it open meanwhile: a process that dies before that goroutine is done leaves
// nothing behind, as the kernel frees the rest at its exit. Until it is freed, its blocks count as free
// room (discardHeld), as they were before the start: a page a shard takes meanwhile is refused only when
// the freeing falls behind, and the shard evicts.
const discardStep = 64 << 20

// discards is what the files being freed still hold.
var discards struct {
	mu   sync.Mutex
	n    int              // files being freed
	held map[uint64]int64 // bytes of blocks they hold, by device
	hook func(*os.File)   // tests: called before a file is freed
}

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
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		_ = f.Close()
		return
	}
	dev, held := st.Dev, st.Blocks*512
	discards.mu.Lock()
	discards.n++
	if discards.held == nil {
		discards.held = map[uint64]int64{}
	}
	discards.held[dev] += held
	hook := discards.hook
	discards.mu.Unlock()
	go func() {
		defer func() {
			_ = f.Close()
			discards.mu.Lock()
			discards.n--
			discards.held[dev] -= held
			discards.mu.Unlock()
		}()
		if hook != nil {
			hook(f)
		}
		for size := st.Size; size > 0; {
			size = max(size-discardStep, 0)
			if f.Truncate(size) != nil {
				return
			}
			if unix.Fstat(int(f.Fd()), &st) == nil {
				discards.mu.Lock()
				discards.held[dev] -= held - st.Blocks*512
				held = st.Blocks * 512
				discards.mu.Unlock()
			}
		}
	}()
}

// discardHeld is how many bytes of blocks on device dev the files being freed still hold.
func discardHeld(dev uint64) int64 {
	discards.mu.Lock()
	defer discards.mu.Unlock()
	return discards.held[dev]
}

// discarding is how many files are being freed.
func discarding() int {
	discards.mu.Lock()
	defer discards.mu.Unlock()
	return discards.n
}
