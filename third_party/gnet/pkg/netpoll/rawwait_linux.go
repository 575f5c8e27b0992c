// leasecached patch: see Poller.Polling in poller_epoll_default.go.

//go:build linux && !poll_opt

package netpoll

import (
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawWaitMsec bounds a raw wait: shorter than sysmon's 10 ms preemption period, so an idle loop leaves the
// raw wait before sysmon would signal it, and a stop-the-world never waits longer than this for a loop
// even when preemption signals are off.
const rawWaitMsec = 2

// rawEpollWait is epoll_pwait(2) with a timeout in milliseconds, made without entering the scheduler's
// syscall state. Keep msec small: a raw call that sleeps holds its P until it returns or a signal interrupts it.
func rawEpollWait(epfd int, events []epollevent, msec int) (int, error) {
	r, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&events[0])),
		uintptr(len(events)), uintptr(msec), 0, 0)
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}

var (
	heldMu sync.Mutex
	held   int // pollers running
)

// holdP records one more poller and raises GOMAXPROCS to at least pollers + 1. A busy poller keeps its P
// through its raw waits, so without the extra P, timers, the GC's workers and every other goroutine would
// wait for a loop to be preempted; an idle P also keeps sysmon from retaking a sleeping loop's P at once. It
// never lowers GOMAXPROCS, and it overrides a smaller GOMAXPROCS from the environment.
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
