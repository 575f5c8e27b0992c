// leasecached patch: watching a connection for writes only, while its handler pauses reading it
// (backpressure.go in the gnet package).

//go:build linux && !poll_opt

package netpoll

import (
	"os"

	"golang.org/x/sys/unix"
)

// ModWrite modifies the given file descriptor with writable event in the poller.
func (p *Poller) ModWrite(pa *PollAttachment, edgeTriggered bool) error {
	var ev uint32 = WriteEvents
	if edgeTriggered {
		ev |= unix.EPOLLET | unix.EPOLLRDHUP
	}
	return os.NewSyscallError("epoll_ctl mod",
		unix.EpollCtl(p.fd, unix.EPOLL_CTL_MOD, pa.FD, &unix.EpollEvent{Fd: int32(pa.FD), Events: ev}))
}
