package clientlib

import (
	"bufio"
	"context"
	"net"
	"time"
)

// Buffer sizes of one connection. The reader must hold the longest reply line (a VALUE header with a
// 250-byte key, or an mg reply with its flags); values are read straight through it.
const (
	readBufferSize  = 16 << 10
	writeBufferSize = 16 << 10
)

// aLongTimeAgo is a deadline in the past: setting it makes blocked reads and writes return at once.
var aLongTimeAgo = time.Unix(1, 0)

// conn is one connection to a server (TCP, TLS or a Unix socket), used by one request at a time.
type conn struct {
	srv *server
	nc  net.Conn
	r   *bufio.Reader
	w   *bufio.Writer
	num [24]byte // scratch for formatting numbers: a local array would escape through bufio.Writer.Write

	idleSince time.Time // when it was put back in its pool
	start     time.Time // when the current request began (arm)
	sent      bool      // the current request was written completely (flush succeeded)
}

func newConn(srv *server, nc net.Conn) *conn {
	return &conn{srv: srv, nc: nc, r: bufio.NewReaderSize(nc, readBufferSize), w: bufio.NewWriterSize(nc, writeBufferSize)}
}

// arm bounds the coming request by the context's deadline (or the client timeout, if sooner) and makes
// cancellation interrupt blocked I/O. The returned disarm reports whether the request ran undisturbed;
// if not, the connection must be discarded.
func (cn *conn) arm(ctx context.Context, timeout time.Duration) (disarm func() bool) {
	cn.start, cn.sent = time.Now(), false
	deadline := cn.start.Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = cn.nc.SetDeadline(deadline)
	if ctx.Done() == nil {
		return alwaysUndisturbed
	}
	stop := context.AfterFunc(ctx, func() { _ = cn.nc.SetDeadline(aLongTimeAgo) })
	return stop
}

func alwaysUndisturbed() bool { return true }

func (cn *conn) close() { _ = cn.nc.Close() }
