// leasecached patch: see lend.go.

//go:build linux && !poll_opt

package gnet

import errorx "github.com/panjf2000/gnet/v2/pkg/errors"

// Lend implements Lender.
func (c *conn) Lend() error {
	if !c.opened || c.isDatagram || !c.outboundBuffer.IsEmpty() {
		return errorx.ErrUnsupportedOp
	}
	return c.loop.poller.ModNone(&c.pollAttachment)
}

// TakeBack implements Lender.
func (c *conn) TakeBack() error {
	et := c.loop.engine.opts.EdgeTriggeredIO
	if !c.outboundBuffer.IsEmpty() {
		return c.loop.poller.ModReadWrite(&c.pollAttachment, et)
	}
	return c.loop.poller.ModRead(&c.pollAttachment, et)
}
