// leasecached patch: serving the connections that became readable in one poll together. See LEASECACHED.md
// and batch_unix.go.

//go:build (darwin || dragonfly || freebsd || linux || netbsd || openbsd) && !poll_opt

package gnet

import (
	"errors"
	"io"
	"os"
	"runtime"

	"golang.org/x/sys/unix"

	errorx "github.com/panjf2000/gnet/v2/pkg/errors"
	gio "github.com/panjf2000/gnet/v2/pkg/io"
	"github.com/panjf2000/gnet/v2/pkg/netpoll"
)

// batchReads switches the loop to batched reads when its handler supports them, on Linux (hook: called
// by the reactors before Polling). processEvent tells a plain read event by epoll's bits; kqueue's filters
// are values, not bits (EVFILT_WRITE would pass the test), and the BSDs and macOS are not where leasecached
// is measured, so they keep reading one by one.
func (el *eventloop) batchReads() {
	h, ok := el.eventHandler.(TrafficBatchHandler)
	if !ok || el.engine.opts.EdgeTriggeredIO || runtime.GOOS != "linux" {
		return
	}
	el.reads.handler = h
	el.poller.OnRoundDone(el.serveReads)
}

// processEvent handles one polled event of c (hook: it replaces c.processIO in the reactors' callbacks):
// a read event of a stream connection with no unread input joins the batch, anything else is handled at
// once, after the batch (which shares the read buffer).
func (el *eventloop) processEvent(c *conn, fd int, ev netpoll.IOEvent, flags netpoll.IOFlags) error {
	if el.reads.handler != nil && ev&^netpoll.ReadEvents == 0 && !c.isDatagram && c.inboundBuffer.IsEmpty() {
		return el.readAhead(c)
	}
	if err := el.serveReads(); err != nil {
		return err
	}
	return c.processIO(fd, ev, flags)
}

// acceptAfterReads serves the batch, then accepts on listener fd (hook: it replaces el.accept in the
// reactor's callback): a UDP read reuses the read buffer from its start.
func (el *eventloop) acceptAfterReads(fd int, ev netpoll.IOEvent, flags netpoll.IOFlags) error {
	if err := el.serveReads(); err != nil {
		return err
	}
	return el.accept(fd, ev, flags)
}

// readAhead reads c's new data into the free part of the read buffer and adds c to the batch.
func (el *eventloop) readAhead(c *conn) error {
	if !c.opened {
		return nil
	}
	if len(el.buffer)-el.reads.used < readBatchSpare {
		if err := el.serveReads(); err != nil {
			return err
		}
	}
	buf := el.buffer[el.reads.used:]
	n, err := gio.RawRead(c.fd, buf)
	if err != nil || n == 0 {
		if err == unix.EAGAIN {
			return nil
		}
		if n == 0 {
			err = io.EOF
		}
		return el.close(c, os.NewSyscallError("read", err))
	}
	c.buffer = buf[:n:n]
	el.reads.used += n
	el.reads.conns = append(el.reads.conns, c)
	el.reads.actions = append(el.reads.actions, None)
	return nil
}

// serveReads hands the batch to the handler, then does for each connection what read does after OnTraffic.
// It returns errorx.ErrEngineShutdown when an action or an OnClose asks for a shutdown, and nil otherwise.
func (el *eventloop) serveReads() error {
	b := &el.reads
	if len(b.conns) == 0 {
		return nil
	}
	b.handler.OnTrafficBatch(b.conns, b.actions)
	var err error
	for i, bc := range b.conns {
		c := bc.(*conn)
		b.conns[i] = nil
		if !c.opened {
			continue
		}
		switch b.actions[i] {
		case Close:
			// Only a shutdown asked for by OnClose matters here: Polling ignores read's other errors too.
			if e := el.close(c, nil); errors.Is(e, errorx.ErrEngineShutdown) {
				err = e
			}
			continue
		case Shutdown:
			err = errorx.ErrEngineShutdown
		}
		_, _ = c.inboundBuffer.Write(c.buffer)
		c.buffer = c.buffer[:0]
	}
	b.conns, b.actions, b.used = b.conns[:0], b.actions[:0], 0
	return err
}
