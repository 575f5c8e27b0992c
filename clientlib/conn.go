package clientlib

import (
	"bufio"
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// This file owns one pipelined connection: requests from concurrent callers written back to back,
// replies read in the same order, each by its own caller (doc/design/client-pipelining.md).

// readBufferSize: the reader must hold the longest reply line (a VALUE header with a 250-byte key, or an
// mg reply with its flags); values are read straight through it.
const readBufferSize = 16 << 10

// maxKeptWriteBuffer: a write buffer grown larger than this (a large value) is dropped after use
// rather than kept for the connection's life.
const maxKeptWriteBuffer = 64 << 10

// aLongTimeAgo is a deadline in the past: setting it makes blocked reads and writes return at once.
var aLongTimeAgo = time.Unix(1, 0)

// epoch anchors monotonic timestamps kept in atomics (conn.lastUsed).
var epoch = time.Now()

// untilMN is the reply count of a quiet meta request ended by mn: its replies end at the MN line.
const untilMN = -1

// Ticket states, changed under conn.qmu.
const (
	tWaiting   uint8 = iota // written (or queued to be), its reply not yet next
	tTurn                   // its reply is next: its caller reads it
	tAbandoned              // its caller gave up: the connection's drainer reads and drops its reply
	tBroken                 // the connection broke before its turn: it gets no reply
)

// ticket is one request's place in its connection's reply order. Tickets are recycled by their
// connection, except an abandoned one, which its caller no longer owns.
type ticket struct {
	next    *ticket
	turn    chan struct{} // signalled when state leaves tWaiting
	state   uint8
	sent    bool            // send was called (set and read by the owner only)
	replies int             // replies the request produces (untilMN for a quiet meta request)
	mark    int             // length of the write buffer before the request's first byte
	start   time.Time       // when the request began: Config.Timeout is counted from here
	ctx     context.Context // the caller's
}

// conn is one connection to a server (TCP, TLS or a Unix socket), shared by pipelined requests.
type conn struct {
	srv     *server
	pool    *pool
	nc      net.Conn
	r       *bufio.Reader // read only by the caller whose reply is next (or the drainer)
	timeout time.Duration

	// Writing. wmu is held from a request's first byte to its send; the bytes go out in one write per
	// batch, by the sender itself when nothing else is outstanding, else by the writer goroutine.
	wmu     sync.Mutex
	w       wbuf          // bytes not yet written
	spare   []byte        // the other buffer, swapped with w.b for each write
	cur     *ticket       // the request being written
	writing bool          // a write to nc is under way (by a sender or the writer goroutine)
	kick    chan struct{} // wakes the writer goroutine
	done    chan struct{} // closed with the connection

	// Reply order.
	qmu        sync.Mutex
	head, tail *ticket
	free       *ticket
	broken     error

	// Interrupting a blocked wait for a reply when its caller's context ends (peek).
	imu      sync.Mutex
	peeking  bool
	peekSeq  uint64
	inflight atomic.Int32 // requests given this connection and not yet done with it (pool)
	draining atomic.Bool  // an abandoned reply is being read: no new requests (pool)
	lastUsed atomic.Int64 // when inflight last dropped to 0, since epoch
	closed   atomic.Bool
}

func newConn(srv *server, p *pool, nc net.Conn, timeout time.Duration) *conn {
	cn := &conn{srv: srv, pool: p, nc: nc, r: bufio.NewReaderSize(nc, readBufferSize), timeout: timeout,
		kick: make(chan struct{}, 1), done: make(chan struct{})}
	go cn.writer()
	return cn
}

// wbuf is an append-only request buffer with bufio.Writer's method names.
type wbuf struct{ b []byte }

func (w *wbuf) Write(p []byte)         { w.b = append(w.b, p...) }
func (w *wbuf) WriteString(s string)   { w.b = append(w.b, s...) }
func (w *wbuf) WriteByte(c byte) error { w.b = append(w.b, c); return nil }

// begin starts a request: the caller may write it into cn.w until it calls send.
func (cn *conn) begin(ctx context.Context) *ticket {
	cn.qmu.Lock()
	t := cn.free
	if t != nil {
		cn.free = t.next
	}
	cn.qmu.Unlock()
	if t == nil {
		t = &ticket{turn: make(chan struct{}, 1)}
	}
	t.next, t.state, t.sent, t.replies, t.ctx = nil, tWaiting, false, 0, ctx
	t.start = time.Now()
	cn.wmu.Lock()
	t.mark = len(cn.w.b)
	cn.cur = t
	return t
}

// unbegin ends a request that was never sent, dropping whatever it wrote.
func (cn *conn) unbegin(t *ticket) {
	cn.w.b = cn.w.b[:t.mark]
	cn.cur = nil
	cn.wmu.Unlock()
	cn.recycle(t)
}

func (cn *conn) recycle(t *ticket) {
	t.ctx = nil
	cn.qmu.Lock()
	t.next, cn.free = cn.free, t
	cn.qmu.Unlock()
}

// send ends the current request's write. It takes the request's place in the reply order, hands its
// bytes to be written (writing them itself when no other reply is outstanding, so that a lone caller
// pays no goroutine switch), and waits until the request's reply is next and has begun to arrive. It
// returns errAbandoned if the caller's context ended first: the reply then belongs to the drainer.
func (cn *conn) send(replies int) error {
	t := cn.cur
	cn.cur = nil
	t.sent, t.replies = true, replies
	cn.qmu.Lock()
	if cn.broken != nil {
		cn.qmu.Unlock()
		cn.w.b = cn.w.b[:t.mark]
		cn.wmu.Unlock()
		t.state = tBroken
		return errPipelineBroken
	}
	first := cn.head == nil
	if first {
		cn.head, cn.tail = t, t
		t.state = tTurn
		t.turn <- struct{}{}
	} else {
		cn.tail.next, cn.tail = t, t
	}
	cn.qmu.Unlock()
	if cn.writing {
		cn.wmu.Unlock() // the write under way is followed by one of these bytes
		return cn.await(t)
	}
	cn.writing = true
	if !first {
		cn.wmu.Unlock()
		cn.kick <- struct{}{} // capacity 1, and only the holder of writing kicks
		return cn.await(t)
	}
	buf := cn.w.b
	cn.w.b, cn.spare = cn.spare[:0], nil
	cn.wmu.Unlock()
	err := cn.write(buf)
	cn.wmu.Lock()
	if len(cn.w.b) > 0 && err == nil {
		cn.kick <- struct{}{}
	} else {
		cn.writing = false
	}
	cn.wmu.Unlock()
	if err != nil {
		cn.fail(err)
	}
	return cn.await(t)
}

// write sends buf, bounded by Config.Timeout, and keeps it as the spare buffer.
func (cn *conn) write(buf []byte) error {
	_ = cn.nc.SetWriteDeadline(time.Now().Add(cn.timeout))
	_, err := cn.nc.Write(buf)
	if cap(buf) <= maxKeptWriteBuffer {
		cn.wmu.Lock()
		cn.spare = buf[:0]
		cn.wmu.Unlock()
	}
	if err != nil {
		return cn.ioErr("write", err)
	}
	return nil
}

// writer writes what senders queued while another write was under way, one write per batch. Writing
// here, not on a caller's goroutine, keeps every caller free to read its reply: a server whose replies
// are not read stops reading requests.
func (cn *conn) writer() {
	for {
		select {
		case <-cn.kick:
		case <-cn.done:
			return
		}
		for {
			cn.wmu.Lock()
			if len(cn.w.b) == 0 {
				cn.writing = false
				cn.wmu.Unlock()
				break
			}
			buf := cn.w.b
			cn.w.b, cn.spare = cn.spare[:0], nil
			cn.wmu.Unlock()
			if err := cn.write(buf); err != nil {
				cn.fail(err)
				return
			}
		}
	}
}

// await waits for t's turn within its caller's context, then for its reply's first byte.
func (cn *conn) await(t *ticket) error {
	select {
	case <-t.turn:
	case <-t.ctx.Done():
		cn.qmu.Lock()
		if t.state == tWaiting {
			t.state = tAbandoned
			cn.qmu.Unlock()
			return errAbandoned
		}
		cn.qmu.Unlock()
		<-t.turn // its turn came at the same moment: take it (peek sees the context ended)
	}
	cn.qmu.Lock()
	st := t.state
	cn.qmu.Unlock()
	if st == tBroken {
		return errPipelineBroken
	}
	return cn.peek(t)
}

// peek waits for the first byte of t's reply within the caller's deadline (and Config.Timeout). A
// caller whose context ends first abandons the reply to the drainer, which keeps the connection in
// step; once the reply has begun, it is read to its end under Config.Timeout alone, so that one
// caller's cancellation never breaks the replies queued behind it.
func (cn *conn) peek(t *ticket) error {
	limit := t.start.Add(cn.timeout)
	if cn.r.Buffered() == 0 {
		deadline := limit
		if d, ok := t.ctx.Deadline(); ok && d.Before(deadline) {
			deadline = d
		}
		_ = cn.nc.SetReadDeadline(deadline)
		var stop func() bool
		if t.ctx.Done() != nil {
			cn.imu.Lock()
			cn.peekSeq++
			seq := cn.peekSeq
			cn.peeking = true
			cn.imu.Unlock()
			stop = context.AfterFunc(t.ctx, func() { cn.interruptPeek(seq) })
		}
		_, err := cn.r.Peek(1)
		if stop != nil {
			stop()
			cn.imu.Lock()
			cn.peeking = false
			cn.imu.Unlock()
		}
		if err != nil {
			if callerDone(t.ctx) == nil && t.ctx.Err() == nil {
				return cn.ioErr("read", err) // the server's failure: nothing within Config.Timeout, or closed
			}
			cn.qmu.Lock()
			t.state = tAbandoned
			cn.qmu.Unlock()
			cn.startDrain(t)
			return errAbandoned
		}
		if deadline.Equal(limit) {
			return nil
		}
	}
	_ = cn.nc.SetReadDeadline(limit)
	return nil
}

// interruptPeek makes the blocked peek seq return when its caller's context ends; a call that comes
// late, once another caller peeks, does nothing.
func (cn *conn) interruptPeek(seq uint64) {
	cn.imu.Lock()
	if cn.peeking && cn.peekSeq == seq {
		_ = cn.nc.SetReadDeadline(aLongTimeAgo)
	}
	cn.imu.Unlock()
}

// pass ends t's turn after its reply was read: the next reply is its caller's, or the drainer's if that
// caller gave up.
func (cn *conn) pass(t *ticket) {
	cn.qmu.Lock()
	if cn.head != t { // the connection broke meanwhile and dropped its queue
		cn.qmu.Unlock()
		cn.recycle(t)
		return
	}
	cn.head = t.next
	if cn.head == nil {
		cn.tail = nil
	}
	t.ctx, t.next, cn.free = nil, cn.free, t
	next := cn.head
	drain := next != nil && next.state == tAbandoned
	if next != nil && !drain {
		next.state = tTurn
		next.turn <- struct{}{}
	}
	cn.qmu.Unlock()
	if drain {
		cn.startDrain(next)
	}
}

// startDrain hands the connection's turn to the drainer (Client.drainConn), from t, the abandoned
// request at the head of the reply order.
func (cn *conn) startDrain(t *ticket) {
	cn.draining.Store(true)
	if !cn.pool.drain(cn, t) {
		cn.fail(ErrClosed)
	}
}

// fail breaks the connection: it is closed and leaves its pool; callers waiting for their turn get
// errPipelineBroken (their requests may or may not have reached the server); the caller reading, if
// any, gets its read's error.
func (cn *conn) fail(err error) {
	cn.qmu.Lock()
	if cn.broken != nil {
		cn.qmu.Unlock()
		return
	}
	cn.broken = err
	var dropped int32
	for t := cn.head; t != nil; {
		next := t.next
		switch t.state {
		case tWaiting:
			t.state = tBroken
			t.turn <- struct{}{}
		case tAbandoned:
			dropped++
		}
		t = next
	}
	cn.head, cn.tail = nil, nil
	cn.qmu.Unlock()
	cn.pool.remove(cn)
	for range dropped {
		cn.pool.put(cn)
	}
}

// close closes the connection and stops its writer.
func (cn *conn) close() {
	if cn.closed.CompareAndSwap(false, true) {
		_ = cn.nc.Close()
		close(cn.done)
	}
}

func (cn *conn) idleFor() time.Duration {
	return time.Since(epoch) - time.Duration(cn.lastUsed.Load())
}
