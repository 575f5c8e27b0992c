// leasecached patch: an event loop's reads and writes on its nonblocking sockets go straight to the kernel,
// without entering the scheduler's syscall state. They cannot block, and a loop that never leaves the running
// state never has its P taken by sysmon (which, each time, woke another thread and kept sysmon itself
// polling every 20 us). See epollWait in pkg/netpoll/rawwait_linux.go.

//go:build linux

package io

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// maxStackIovecs is how many buffers RawWritev hands the kernel without allocating.
const maxStackIovecs = 16

// RawRead is read(2) on a nonblocking fd, made without the scheduler's syscall bookkeeping.
func RawRead(fd int, p []byte) (int, error) {
	return rawRW(unix.SYS_READ, fd, p)
}

// RawWrite is write(2) on a nonblocking fd, made without the scheduler's syscall bookkeeping.
func RawWrite(fd int, p []byte) (int, error) {
	return rawRW(unix.SYS_WRITE, fd, p)
}

func rawRW(trap uintptr, fd int, p []byte) (int, error) {
	var ptr unsafe.Pointer
	if len(p) > 0 {
		ptr = unsafe.Pointer(&p[0])
	}
	r, _, e := unix.RawSyscall(trap, uintptr(fd), uintptr(ptr), uintptr(len(p)))
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}

// RawWritev is writev(2) on a nonblocking fd, made without the scheduler's syscall bookkeeping. Empty
// buffers are skipped, as unix.Writev does.
func RawWritev(fd int, bs [][]byte) (int, error) {
	var stack [maxStackIovecs]unix.Iovec
	iov := stack[:0]
	for _, b := range bs {
		if len(b) == 0 {
			continue
		}
		v := unix.Iovec{Base: &b[0]}
		v.SetLen(len(b))
		iov = append(iov, v)
	}
	if len(iov) == 0 {
		return 0, nil
	}
	r, _, e := unix.RawSyscall(unix.SYS_WRITEV, uintptr(fd), uintptr(unsafe.Pointer(&iov[0])), uintptr(len(iov)))
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}
