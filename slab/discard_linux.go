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
// nothing behind, as the kernel frees the rest at its exit. Only a file of this process's directory (its
// lock held) with no name left is freed so: truncating one another process maps would kill it with
// SIGBUS (a live copy under a shared root, sweepLive), and one still linked elsewhere (a symlink, a hard
// link) is the data's, emptied in place as before. Until it is freed, its blocks count as free
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
	var st unix.Stat_t
	if unix.Lstat(f.Name(), &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink != 1 ||
		os.Remove(f.Name()) != nil {
		return f, f.Truncate(0) // a link, or a directory this process may not change: in place
	}
	nf, err := os.OpenFile(f.Name(), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return f, err
	}
	discard(f)
	return nf, nil
}

// removeAllSoon removes directory dir, this process's own live copy, as os.RemoveAll does, its items file
// freed in the background.
func removeAllSoon(dir string) {
	var f *os.File
	if fi, err := os.Lstat(dir); err == nil && fi.IsDir() {
		f, _ = os.OpenFile(filepath.Join(dir, "items"), os.O_RDWR|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	}
	_ = os.RemoveAll(dir)
	if f != nil {
		discard(f)
	}
}

// discard frees f from its end in discardStep steps, then closes it, in the background; a file that is
// not regular, or still has a name, is only closed.
func discard(f *os.File) {
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink != 0 {
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
