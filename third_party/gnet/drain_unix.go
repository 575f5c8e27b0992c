// leasecached patch: connections handed to a loop that had already stopped. See LEASECACHED.md, item 10.

//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package gnet

import "golang.org/x/sys/unix"

// closePending closes the connections whose registration is still in the loop's task queue once the engine
// has stopped: the acceptor queued them behind the loop's shutdown task, or after the loop had returned, so
// no loop opened them and closeConns never saw them. Their peers see the close at once, as those still in
// the listener's backlog do. It runs after every loop and the acceptor have returned (closeEventLoops).
func (el *eventloop) closePending() {
	el.poller.DrainTasks(func(param any) {
		var c *conn
		var done func()
		switch p := param.(type) {
		case *conn:
			c = p
		case *connWithCallback:
			c, done = p.c, p.cb
		}
		// A registration's stream connection was accepted (remote set) and never opened; read and write
		// tasks name connections that were opened, and closeConns has released them (remote nil).
		if c == nil || c.isDatagram || c.opened || c.remote == nil {
			return
		}
		_ = unix.Close(c.fd)
		c.release()
		if done != nil {
			done()
		}
	})
}
