// Package rawio holds the raw system calls of the lab's two event loops, the load generator's threads
// (package load) and the ceiling responder's loops (package ceiling): both run like a C event loop, on
// nonblocking sockets the Go runtime does not know about.
//
// The contract: Read and Write never block (the sockets are nonblocking), so they skip the runtime's
// bookkeeping around a blocking system call; EpollWait is told nothing either, so the calling thread keeps
// its P while it sleeps, which is why every caller bounds it (2 ms) and then waits in an ordinary
// unix.EpollWait. None of them allocates: an errno converts to an error from a static table.
package rawio

import (
	"fmt"
	"net"
	"strconv"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// EpollWait is epoll_pwait as a raw system call: the runtime is not told, so the thread keeps its P.
func EpollWait(epfd int, events []unix.EpollEvent, msec int) (int, error) {
	n, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&events[0])),
		uintptr(len(events)), uintptr(msec), 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// Read and Write are read(2) and write(2) on nonblocking sockets as raw system calls: they never block,
// so the runtime's bookkeeping around a blocking system call (entersyscall, exitsyscall) is skipped. p
// must not be empty. An errno converts to an error without allocating (small integers are boxed from a
// static table).
func Read(fd int, p []byte) (int, error) {
	n, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// Write: see Read.
func Write(fd int, p []byte) (int, error) {
	n, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// CeilMsec is d in whole milliseconds, rounded up: a wait's timeout argument never ends it early.
func CeilMsec(d time.Duration) int { return int((d + time.Millisecond - 1) / time.Millisecond) }

// ResolveSockaddr turns host:port into a socket address (the first address of a name, as net.Dial
// would try first; no host means this machine, as for net.Dial).
func ResolveSockaddr(addr string) (unix.Sockaddr, int, error) {
	ta, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return nil, 0, err
	}
	ip := ta.IP
	if ip == nil || ip.IsUnspecified() {
		if ip != nil && ip.To4() == nil {
			ip = net.IPv6loopback
		} else {
			ip = net.IPv4(127, 0, 0, 1)
		}
	}
	if ip4 := ip.To4(); ip4 != nil {
		sa := &unix.SockaddrInet4{Port: ta.Port}
		copy(sa.Addr[:], ip4)
		return sa, unix.AF_INET, nil
	}
	sa := &unix.SockaddrInet6{Port: ta.Port}
	copy(sa.Addr[:], ip.To16())
	if ta.Zone != "" {
		if ifi, err := net.InterfaceByName(ta.Zone); err == nil {
			sa.ZoneId = uint32(ifi.Index)
		} else if n, err := strconv.ParseUint(ta.Zone, 10, 32); err == nil {
			sa.ZoneId = uint32(n)
		} else {
			return nil, 0, fmt.Errorf("unknown IPv6 zone %q", ta.Zone)
		}
	}
	return sa, unix.AF_INET6, nil
}
