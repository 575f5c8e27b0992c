// leasecached patch: watching a connection for nothing but errors and hang-ups, while its handler lends
// its socket to another owner (lend.go in the gnet package).

//go:build linux && !poll_opt

package netpoll

import (
	"os"

	"golang.org/x/sys/unix"
)

// ModNone keeps the given file descriptor in the poller with no events asked for: epoll still reports
// its errors and hang-ups (EPOLLERR, EPOLLHUP).
func (p *Poller) ModNone(pa *PollAttachment) error {
	return os.NewSyscallError("epoll_ctl mod",
		unix.EpollCtl(p.fd, unix.EPOLL_CTL_MOD, pa.FD, &unix.EpollEvent{Fd: int32(pa.FD)}))
}
