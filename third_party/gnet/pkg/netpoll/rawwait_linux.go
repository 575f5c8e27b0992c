// leasecached patch: the event loops' raw epoll wait. See LEASECACHED.md, item 1.

//go:build linux && !poll_opt

package netpoll

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawWaitMsec bounds a raw wait: shorter than sysmon's 10 ms preemption period, so an idle loop leaves the
// raw wait before sysmon would signal it, and a stop-the-world never waits longer than this for a loop
// even when preemption signals are off.
const rawWaitMsec = 2

// epollWait is Polling's wait (hook: it replaces upstream's unix.EpollWait(p.fd, el.events, msec)). A
// busy poller waits in a raw epoll_pwait and so never yields between rounds: its goroutine keeps its P and
// its OS thread, like a memcached worker thread. Upstream waits through the scheduler, first with a zero
// timeout after a round with events (msec 0), and calls runtime.Gosched when a round finds nothing; each
// Gosched woke an idle P's thread (wakep) and moved the loop to another thread. msec is therefore ignored.
//
// The raw wait is bounded (rawWaitMsec); a loop idle for longer blocks in an ordinary epoll_wait, in the
// scheduler's syscall state, where a stop-the-world or sysmon reach it without a signal, so an idle daemon
// is left alone by sysmon and GODEBUG=asyncpreemptoff=1 cannot wedge a stop-the-world behind a sleeping
// loop. A preemption signal that ends a raw wait returns EINTR, which Polling honours with
// runtime.Gosched. It returns n > 0 or an error (a blocking epoll_wait does not return 0), so upstream's
// empty-round branch (Gosched, then block) runs only for EINTR.
//
// A busy poller holds its P through its raw waits: the program must leave a P for everything else
// (leasecached raises GOMAXPROCS in server.Run).
func epollWait(epfd int, events []epollevent, _ int) (int, error) {
	// epoll_pwait(2) made without entering the scheduler's syscall state: it holds the P until it returns
	// or a signal interrupts it, hence the bound.
	r, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&events[0])),
		uintptr(len(events)), rawWaitMsec, 0, 0)
	if e != 0 {
		return -1, e
	}
	if r == 0 {
		return unix.EpollWait(epfd, events, -1)
	}
	return int(r), nil
}
