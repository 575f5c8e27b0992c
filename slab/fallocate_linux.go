package slab

import (
	"os"

	"golang.org/x/sys/unix"
)

// fallocateStep is how much of a range one fallocate call covers, and fallocateTries how often a call
// interrupted by a signal is made again before the range is given up: see fallocate.
const (
	fallocateStep  = 256 << 10
	fallocateTries = 100
)

// fallocate is fallocate(2) of bytes [off, off+n) of f in mode, made in fallocateStep pieces, each again
// while a signal interrupts it: Linux 6.1's tmpfs (Debian 12) gives up an allocation with EINTR whenever
// any signal is pending for the thread, and frees what that call had allocated, and the Go runtime
// signals its threads at any time (doc/design/restart-costs.md, "File systems"). A piece keeps what the
// pieces before it allocated.
func fallocate(f *os.File, mode uint32, off, n int64) error {
	fd := int(f.Fd())
	for end := off + n; off < end; {
		step := min(end-off, fallocateStep)
		err := fallocateSys(fd, mode, off, step)
		for try := 1; err == unix.EINTR && try < fallocateTries; try++ {
			err = fallocateSys(fd, mode, off, step)
		}
		if err != nil {
			return err
		}
		off += step
	}
	return nil
}

// fallocateSys is the system call (tests interrupt it).
var fallocateSys = unix.Fallocate
