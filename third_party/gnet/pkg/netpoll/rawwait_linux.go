// leasecached patch: see Poller.Polling in poller_epoll_default.go.

//go:build linux && !poll_opt

package netpoll

import (
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawEpollWait is epoll_wait(2) with no timeout, made without entering the scheduler's syscall state: the
// calling goroutine keeps its P while it sleeps in the kernel. The Go runtime interrupts it with a signal
// when it needs the P (the wait then fails with EINTR).
func rawEpollWait(epfd int, events []epollevent) (int, error) {
	r, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&events[0])),
		uintptr(len(events)), ^uintptr(0), 0, 0)
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}

var (
	heldMu sync.Mutex
	held   int // pollers running, each holding a P
)

// holdP records one more poller that holds a P for as long as it runs, and raises GOMAXPROCS so that at least
// one P stays free for every other goroutine (timers, the acceptor's hand-offs, the GC's workers). It never
// lowers GOMAXPROCS; an operator's larger setting is kept.
func holdP() {
	heldMu.Lock()
	defer heldMu.Unlock()
	held++
	if runtime.GOMAXPROCS(0) <= held {
		runtime.GOMAXPROCS(held + 1)
	}
}

// releaseP records that a poller has stopped.
func releaseP() {
	heldMu.Lock()
	held--
	heldMu.Unlock()
}
