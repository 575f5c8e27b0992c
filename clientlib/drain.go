package clientlib

import (
	"bytes"
	"context"
)

// This file keeps a pipelined connection in step when callers give up: the replies they no longer wait
// for are read and dropped in order, so that no caller is ever handed another's reply.

// drainConn reads and drops the replies of requests whose callers gave up, from the head of cn's reply
// order, then hands the turn to the next caller still waiting. It judges the server by them: a reply
// within Config.Timeout of its request is a success, none is a failure (without this, a hung server
// would never count as failing while every caller's deadline is shorter than Timeout), and then the
// connection, out of step, is closed.
func (c *Client) drainConn(srv *server, cn *conn, t *ticket) {
	defer srv.pool.woke()
	stop := context.AfterFunc(c.life, func() { _ = cn.nc.SetReadDeadline(aLongTimeAgo) })
	defer stop()
	for {
		if err := cn.skip(t); err != nil {
			if c.life.Err() == nil {
				c.failed(srv)
			}
			cn.fail(err) // puts t's slot back
			return
		}
		srv.succeeded()
		// Popping t and handing the turn on are one step: a sender that finds the queue empty takes the
		// turn itself (send), so the turn is never held twice.
		cn.qmu.Lock()
		if cn.head != t { // broken meanwhile: fail put t's slot back
			cn.qmu.Unlock()
			return
		}
		cn.head = t.next
		if cn.head == nil {
			cn.tail = nil
		}
		next := cn.head
		more := next != nil && next.state == tAbandoned
		if next != nil && !more {
			next.state = tTurn
			next.turn <- struct{}{}
		}
		if !more {
			cn.draining.Store(false)
		}
		cn.qmu.Unlock()
		srv.pool.put(cn)
		if !more {
			return
		}
		t = next
	}
}

// skip reads and drops t's replies, bounded by Config.Timeout from t's start. It knows replies by their
// shape alone: VALUE/LVALUE blocks and STAT lines continue a reply up to its END, a VA line's data block
// ends it, and any other line (a status, a number, an error) is a whole reply; a quiet meta request's
// replies end at MN.
func (cn *conn) skip(t *ticket) error {
	_ = cn.nc.SetReadDeadline(t.start.Add(cn.timeout))
	var scratch [4][]byte
	for n := t.replies; n != 0; {
		line, err := cn.readLine()
		if err != nil {
			return err
		}
		switch {
		case bytes.HasPrefix(line, []byte("VALUE ")), bytes.HasPrefix(line, []byte("LVALUE ")):
			h, err := cn.parseValue(line, 1<<30)
			if err != nil {
				return err
			}
			if _, err := cn.r.Discard(h.size + 2); err != nil {
				return cn.ioErr("read", err)
			}
			continue
		case bytes.HasPrefix(line, []byte("STAT ")):
			continue
		case bytes.HasPrefix(line, []byte("VA ")):
			f := fields(scratch[:0], line)
			size, ok := parseUint(f[1], 31)
			if !ok {
				return cn.protoErr("bad VA line", line)
			}
			if _, err := cn.r.Discard(int(size) + 2); err != nil {
				return cn.ioErr("read", err)
			}
		}
		if n > 0 {
			n--
		} else if bytes.Equal(line, []byte("MN")) {
			n = 0
		}
	}
	return nil
}
