package near

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasecached/leasecached/clientlib/internal/rawconn"
)

// A watcher's state says whether near copies from its server may be filled.
const (
	stateDown      int32 = iota // connecting, or reconnecting after a loss: no fills
	stateFull                   // "watch mutations deletions": sets, deletes and flush_all invalidate
	stateMutations              // "watch mutations" only (memcached 1.6.18): deletes and flush_all wait for TTL
	stateTTLOnly                // watch refused altogether: TTL is the only bound
)

// watcher keeps one "watch" connection to a server open, feeding its lines to the cache, and flushes
// the server's copies whenever the stream is lost, before reconnecting with backoff.
type watcher struct {
	addr  string
	nc    *Cache
	state atomic.Int32

	mu     sync.Mutex
	conn   net.Conn // the current stream, closed by stop
	closed bool
	done   chan struct{}
	wake   chan struct{}
}

func newWatcher(nc *Cache, addr string) *watcher {
	w := &watcher{addr: addr, nc: nc, done: make(chan struct{}), wake: make(chan struct{})}
	go w.run()
	return w
}

func (w *watcher) run() {
	defer close(w.done)
	backoff := minBackoff
	for {
		live, err := w.session()
		// Down before the flush: a read that reserved its key before this point is flushed, one that
		// reserves after it sees the state and does not fill.
		w.state.Store(stateDown)
		n := w.nc.store.flush(w.addr)
		w.nc.flushes.Add(1)
		if w.isClosed() {
			return
		}
		if errors.Is(err, errWatchRefused) {
			w.nc.cfg.Logf("near: %s refuses watch; its near copies are bounded by TTL alone", w.addr)
			w.state.Store(stateTTLOnly)
			return
		}
		w.nc.cfg.Logf("near: watch stream of %s lost (%v); flushed %d copies, reconnecting", w.addr, err, n)
		if live {
			backoff = minBackoff
		}
		select {
		case <-time.After(backoff):
		case <-w.wake:
			return
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// dial opens a watch connection: with Config.DialContext when set, else as the client dials its own
// connections (internal/rawconn), TLS and authentication included.
func (w *watcher) dial(ctx context.Context) (net.Conn, error) {
	if d := w.nc.cfg.DialContext; d != nil {
		return d(ctx, network(w.addr), w.addr)
	}
	return rawconn.Dial(w.nc.c, ctx, w.addr)
}

var errWatchRefused = errors.New("near: watch refused")

// session dials, asks for the stream and reads it until it fails; live says whether it got that far.
func (w *watcher) session() (live bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
	conn, err := w.dial(ctx)
	cancel()
	if err != nil {
		return false, err
	}
	if !w.setConn(conn) {
		conn.Close()
		return false, net.ErrClosed
	}
	defer conn.Close()
	r := bufio.NewReaderSize(conn, 64<<10)
	mode, err := handshake(conn, r)
	if err != nil {
		return false, err
	}
	if mode == stateMutations {
		w.nc.cfg.Logf("near: %s refuses watch deletions; deletes and flush_all reach its near copies through TTL", w.addr)
	}
	w.state.Store(mode)
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than any watch line: unknown content, so drop everything and read on.
			w.nc.store.flush(w.addr)
			w.nc.flushes.Add(1)
			continue
		}
		if err != nil {
			return true, err
		}
		w.nc.apply(w.addr, bytes.TrimRight(line, "\r\n"))
	}
}

// handshake asks for mutations and deletions, then for mutations alone if the server refuses
// (memcached 1.6.18 answers ERROR to "deletions" and keeps the connection); it returns the mode.
func handshake(conn net.Conn, r *bufio.Reader) (int32, error) {
	_ = conn.SetDeadline(time.Now().Add(dialTimeout))
	for _, try := range []struct {
		cmd  string
		mode int32
	}{{"watch mutations deletions\r\n", stateFull}, {"watch mutations\r\n", stateMutations}} {
		if _, err := conn.Write([]byte(try.cmd)); err != nil {
			return stateDown, err
		}
		line, err := r.ReadString('\n')
		if err != nil {
			return stateDown, err
		}
		if line == "OK\r\n" {
			_ = conn.SetDeadline(time.Time{})
			return try.mode, nil
		}
	}
	return stateDown, errWatchRefused
}

func (w *watcher) setConn(c net.Conn) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false
	}
	w.conn = c
	return true
}

func (w *watcher) isClosed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.closed
}

// stop closes the stream and waits for the goroutine.
func (w *watcher) stop() {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.wake)
		if w.conn != nil {
			w.conn.Close()
		}
	}
	w.mu.Unlock()
	<-w.done
}
