// leasecached patch: see backpressure.go.

//go:build darwin || dragonfly || freebsd || netbsd || openbsd || (linux && poll_opt)

package gnet

// PauseRead implements ReadPauser: on these pollers it does nothing, and replies are buffered unbounded as
// upstream does.
func (c *conn) PauseRead() error { return nil }
