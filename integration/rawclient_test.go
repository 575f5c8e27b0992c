package integration

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"testing"
	"time"
)

// Protocol bytes used by the raw client.
var (
	// sentinelCmd is memcached's meta no-op: it has no side effect and its
	// reply, sentinelReply, marks the end of everything sent before it.
	sentinelCmd   = []byte("mn\r\n")
	sentinelReply = []byte("MN\r\n")
)

// Limits of the raw client.
const (
	// dialTimeout bounds connecting to a daemon already known to be up.
	dialTimeout = 2 * time.Second
	// defaultReplyTimeout bounds waiting for a sentinel. Scripts are built
	// so that the sentinel always arrives on a healthy server, so only a
	// broken or diverging server pays this.
	defaultReplyTimeout = 2 * time.Second
	// readBufSize is the size of one read from the socket.
	readBufSize = 64 << 10
	// maxRandomChunk is the largest piece in randomChunks mode.
	maxRandomChunk = 17
	// chunkPause is the pause between pieces in the paused chunk modes, long
	// enough for the server to see the pieces in separate reads.
	chunkPause = 200 * time.Microsecond
)

// sendMode says how a script is cut into writes, to exercise a server's
// handling of commands split across reads.
type sendMode int

const (
	wholeWrite   sendMode = iota // one write
	byteAtATime                  // one write per byte, no pauses
	randomChunks                 // 1..maxRandomChunk-byte writes with short pauses
)

var allModes = []sendMode{wholeWrite, byteAtATime, randomChunks}

func (m sendMode) String() string {
	switch m {
	case wholeWrite:
		return "whole"
	case byteAtATime:
		return "bytewise"
	case randomChunks:
		return "chunks"
	}
	return "mode?"
}

// rawConn is a bare TCP connection to a daemon, speaking bytes.
type rawConn struct {
	c   net.Conn
	rng *rand.Rand
	// fixedChunk, when > 0, overrides byteAtATime/randomChunks with pieces
	// of this size (used for multi-megabyte scripts, where byte-at-a-time
	// would take too long).
	fixedChunk int
	// halfClose shuts the write side (sends FIN) after each script: the
	// server must still answer everything before it closes.
	halfClose bool
}

// dialRaw connects to d; the connection is closed in t.Cleanup.
func dialRaw(t testing.TB, d *daemon) *rawConn {
	t.Helper()
	rc, err := dialRawErr(d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.c.Close() })
	return rc
}

// dialRawErr connects to d; the caller closes the connection. It is safe to
// call from goroutines other than the test's.
func dialRawErr(d *daemon) (*rawConn, error) {
	c, err := net.DialTimeout("tcp", d.addr, dialTimeout)
	if err != nil {
		return nil, fmt.Errorf("dial %s at %s: %w", d.name, d.addr, err)
	}
	return &rawConn{c: c, rng: rand.New(rand.NewSource(1))}, nil
}

// reply is what came back for one exchange.
type reply struct {
	data     []byte
	closed   bool // the server closed (or reset) the connection
	timedOut bool // neither the sentinel nor EOF arrived in time
	writeErr error
}

// exchange sends script in the given mode and concurrently reads until the
// reply ends with sentinel (nil: read only until EOF or timeout), EOF or
// timeout. Reading runs concurrently with writing so that a server that
// answers while we still send can never deadlock the test.
func (r *rawConn) exchange(script []byte, mode sendMode, sentinel []byte, timeout time.Duration) reply {
	// The deadline is pushed forward while writing progresses, so that a
	// slow chunked send on a loaded machine is not mistaken for a silent
	// server: the timeout is the wait for the reply after the last byte.
	_ = r.c.SetDeadline(time.Now().Add(timeout))
	got := make(chan reply, 1)
	go func() { got <- readUntil(r.c, sentinel) }()
	werr := r.write(script, mode, timeout)
	if r.halfClose && werr == nil {
		if tc, ok := r.c.(*net.TCPConn); ok {
			werr = tc.CloseWrite()
		}
	}
	_ = r.c.SetReadDeadline(time.Now().Add(timeout))
	rep := <-got
	rep.writeErr = werr
	return rep
}

// write sends script cut according to mode, extending the connection's
// deadline by timeout before each piece.
func (r *rawConn) write(script []byte, mode sendMode, timeout time.Duration) error {
	if mode == wholeWrite {
		_, err := r.c.Write(script)
		return err
	}
	for len(script) > 0 {
		n := 1
		pause := time.Duration(0)
		switch {
		case r.fixedChunk > 0:
			n = r.fixedChunk
		case mode == randomChunks:
			n = 1 + r.rng.Intn(maxRandomChunk)
			pause = chunkPause
		}
		n = min(n, len(script))
		_ = r.c.SetDeadline(time.Now().Add(timeout))
		if _, err := r.c.Write(script[:n]); err != nil {
			return err
		}
		script = script[n:]
		if pause > 0 {
			time.Sleep(pause)
		}
	}
	return nil
}

// readUntil reads until the accumulated bytes end with sentinel, EOF, or the
// connection deadline.
func readUntil(c net.Conn, sentinel []byte) reply {
	var rep reply
	buf := make([]byte, readBufSize)
	for {
		n, err := c.Read(buf)
		rep.data = append(rep.data, buf[:n]...)
		if sentinel != nil && bytes.HasSuffix(rep.data, sentinel) {
			return rep
		}
		if err != nil {
			var ne net.Error
			switch {
			case errors.As(err, &ne) && ne.Timeout():
				rep.timedOut = true
			case errors.Is(err, io.EOF):
				rep.closed = true
			default: // ECONNRESET and friends: the server dropped us
				rep.closed = true
			}
			return rep
		}
	}
}

// roundTrip dials d, sends script followed by the sentinel and returns the
// reply with the trailing sentinel reply stripped.
func roundTrip(t testing.TB, d *daemon, script string, mode sendMode) reply {
	t.Helper()
	rc := dialRaw(t, d)
	rep := rc.exchange(append([]byte(script), sentinelCmd...), mode, sentinelReply, defaultReplyTimeout)
	rep.data = bytes.TrimSuffix(rep.data, sentinelReply)
	return rep
}
