// leasecached patch: a handler can lend a connection's socket to another owner for a while. See
// LEASECACHED.md.

//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package gnet

// Lender is implemented by the Conn of the unix event loops. Lend, called on c's own loop while c has no
// unsent data (in OnOpen, before c was ever read), stops watching c for reads and writes: the loop
// neither reads c nor writes to it, and whatever arrives stays in the kernel for the borrower (a goroutine
// with a duplicate of c's descriptor) to read. TakeBack, called on c's loop once the borrower is done
// with the socket, watches c for reads again (and for writes if it has unsent data). While c is lent the
// handler must not write to it. An error or hang-up of the socket is still reported and closes c.
// Only Linux's default poller lends (lend_linux.go); elsewhere both return errorx.ErrUnsupportedOp.
type Lender interface {
	Lend() error
	TakeBack() error
}
