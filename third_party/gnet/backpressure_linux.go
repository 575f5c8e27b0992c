// leasecached patch: see backpressure.go.

//go:build linux && !poll_opt

package gnet

// PauseRead implements ReadPauser.
func (c *conn) PauseRead() error {
	if !c.opened || c.readPaused || c.outboundBuffer.IsEmpty() || c.isDatagram {
		return nil
	}
	if err := c.loop.poller.ModWrite(&c.pollAttachment, c.loop.engine.opts.EdgeTriggeredIO); err != nil {
		return err
	}
	c.readPaused = true
	return nil
}
