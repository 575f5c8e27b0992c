// leasecached patch: a handler can stop a connection from being read until what it has not taken of its
// replies is written. See LEASECACHED.md.

//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package gnet

// ReadPauser is implemented by the Conn of the unix event loops. PauseRead, called from c's own loop
// while c has unsent data, stops reading c until all of it has been written; then reading resumes and the
// handler's OnTraffic runs once, with whatever input c still holds. It does nothing when c has no unsent
// data (nothing would wake it) or is already paused. Closing c ends the pause with the connection. Only
// Linux's default poller pauses (backpressure_linux.go); elsewhere PauseRead does nothing.
type ReadPauser interface {
	PauseRead() error
}

// resumeRead ends c's pause, if any, once write has written all of c's data and watches c for reads
// again: the handler serves the input c already holds.
func (el *eventloop) resumeRead(c *conn) error {
	if !c.readPaused {
		return nil
	}
	c.readPaused = false
	return el.wake(c)
}
