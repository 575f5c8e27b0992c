// leasecached patch: an accepting loop that runs out of descriptors refuses new connections and keeps
// serving, instead of stopping the engine. See LEASECACHED.md.

//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package gnet

import (
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/panjf2000/gnet/v2/pkg/queue"
	"github.com/panjf2000/gnet/v2/pkg/socket"
)

// RefusalHandler is an EventHandler that says what a connection refused for lack of descriptors is told
// before it is closed (memcached: "ERROR Too many open connections"). Refusal is called on the accepting
// loop once per refused connection, with the descriptor it was accepted on and its peer's address, so it
// may count and log them.
type RefusalHandler interface {
	Refusal(fd int, peer net.Addr) []byte
}

// acceptPause is how long a listener is left unwatched when not even the reserve descriptor can be had;
// memcached retries its disabled listeners on a 10 ms timer too.
const acceptPause = 10 * time.Millisecond

// acceptOutcome is what the accept loop does after acceptExhausted.
type acceptOutcome uint8

const (
	acceptFail acceptOutcome = iota // not a shortage of descriptors: upstream's handling (stop the engine)
	acceptNext                      // one waiting connection was refused: accept the next
	acceptWait                      // the listener is paused for acceptPause: return to the poller
)

// acceptLimit is an accepting loop's state for descriptor shortages. Only that loop touches it.
type acceptLimit struct {
	// reserve is a descriptor held open so that, when accept finds none left, closing it lets the loop
	// accept one waiting connection and refuse it with a reason, rather than leave it in the queue
	// (0: none held).
	reserve int
	// logged is when the last shortage was logged, and refused how many connections were refused since:
	// a flood logs one line a minute, not one per refusal.
	logged  time.Time
	refused int
}

// acceptLogEvery is how often a lasting shortage of descriptors is logged.
const acceptLogEvery = time.Minute

// holdReserve opens the reserve descriptor if none is held; it fails quietly when there is none to have.
func (a *acceptLimit) holdReserve() {
	if a.reserve > 0 {
		return
	}
	if fd, err := unix.Open(os.DevNull, unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
		a.reserve = fd
	}
}

// acceptExhausted handles err from accepting on listener fd: when it says descriptors (or kernel memory
// for sockets) ran out, the oldest waiting connection is refused through the reserve descriptor, or, with
// no reserve to give up, the listener is left alone for acceptPause. Open connections are served on.
func (el *eventloop) acceptExhausted(fd int, err error) acceptOutcome {
	switch err {
	case unix.EMFILE, unix.ENFILE, unix.ENOBUFS, unix.ENOMEM:
	default:
		return acceptFail
	}
	a := &el.acceptLimit
	if now := time.Now(); now.Sub(a.logged) >= acceptLogEvery {
		el.getLogger().Errorf("accept: %v: refusing new connections until descriptors are freed (%d refused since the last report)",
			os.NewSyscallError("accept", err), a.refused)
		a.logged, a.refused = now, 0
	}
	a.refused++
	if a.reserve > 0 {
		_ = unix.Close(a.reserve)
		a.reserve = 0
		nfd, sa, aerr := socket.Accept(fd)
		if aerr == nil {
			if r, ok := el.eventHandler.(RefusalHandler); ok {
				_, _ = unix.Write(nfd, r.Refusal(nfd, socket.SockaddrToTCPOrUnixAddr(sa)))
			}
			_ = unix.Close(nfd)
		}
		a.holdReserve()
		if aerr == nil && a.reserve > 0 {
			return acceptNext
		}
	}
	el.pauseListener(fd)
	return acceptWait
}

// acceptRecovered makes sure a reserve is held after a successful accept.
func (el *eventloop) acceptRecovered() { el.acceptLimit.holdReserve() }

// pauseListener stops watching listener fd and watches it again after acceptPause. The ingress loop
// watches its listeners edge-triggered (engine_unix.go), and adding a listener with waiting connections
// reports it at once.
func (el *eventloop) pauseListener(fd int) {
	ln := el.listeners[fd]
	if ln == nil || ln.pollAttachment == nil {
		return
	}
	if el.poller.Delete(fd) != nil {
		return
	}
	et := el.idx == -1
	time.AfterFunc(acceptPause, func() {
		_ = el.poller.Trigger(queue.HighPriority, func(any) error {
			if el.engine.isShutdown() {
				return nil
			}
			return el.poller.AddRead(ln.pollAttachment, et)
		}, nil)
	})
}
