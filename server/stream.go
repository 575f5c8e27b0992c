package server

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// The stream transport: connections gnet cannot carry (TLS: crypto/tls needs a net.Conn to drive) are each
// served by a goroutine of their own that reads into a buffer, runs the same engine as gnet's connections
// (conn.serve) and writes its replies with blocking writes. See doc/design/listeners.md.
//
// Blocking writes are its backpressure: a connection whose client does not read stops in Write, so it
// neither reads nor executes anything more, and holds at most one serve call's replies (flushThreshold plus
// one value), as a paused gnet connection does. The goroutine reads again after every serve call,
// whatever the engine left in the buffer, so a request that arrived behind a large TLS record is served
// from what crypto/tls already decrypted without waiting for more bytes from the client.

const (
	// streamReadMin is the least room a read is given, and the buffer an idle connection keeps.
	streamReadMin = 4 << 10
	// handshakeTimeout bounds a TLS handshake: a client that connects and sends nothing holds a
	// goroutine and a descriptor no longer than this (and no -c slot: the slot is taken after it).
	handshakeTimeout = 10 * time.Second
)

// streamConn is one connection of the stream transport: the Transport its engine serves.
type streamConn struct {
	inbuf
	nc net.Conn
	cn *conn
}

func (sc *streamConn) OutboundBuffered() int { return 0 } // Write returns once the socket took everything

// Write sends p before it returns. A failed write ends the connection, as a failed gnet write does: the
// engine executes nothing more of its input (conn.closed).
func (sc *streamConn) Write(p []byte) (int, error) {
	if sc.cn.closed {
		return 0, net.ErrClosed
	}
	n, err := sc.nc.Write(p)
	if err != nil {
		sc.cn.closed = true
	}
	return n, err
}

// fill reads what the connection has into the buffer.
func (sc *streamConn) fill() error {
	n, err := sc.nc.Read(sc.room())
	sc.w += n
	if n > 0 {
		return nil // an error with data is seen again by the next read
	}
	return err
}

// streamListeners are the stream transport's listeners and connections, for Stop.
type streamListeners struct {
	mu    sync.Mutex
	lns   []net.Listener
	conns map[*streamConn]struct{}
	wg    sync.WaitGroup // accept loops and connections
	// idle are the loopShared states the stream connections borrow for a serve call each (borrow): as many
	// exist as ever served at once, which -c bounds. Not a sync.Pool: each holds a share of the stats,
	// which must never be dropped.
	idle []*loopShared
	srv  *Server
}

// borrow returns a loopShared no other serve call is using; give it back with giveBack.
func (st *streamListeners) borrow() *loopShared {
	st.mu.Lock()
	defer st.mu.Unlock()
	if n := len(st.idle); n > 0 {
		ls := st.idle[n-1]
		st.idle = st.idle[:n-1]
		return ls
	}
	return st.srv.newLoopShared(false)
}

func (st *streamListeners) giveBack(ls *loopShared) {
	st.mu.Lock()
	st.idle = append(st.idle, ls)
	st.mu.Unlock()
}

// listenStream opens the stream transport's listener for l.
func (s *Server) listenStream(l Listener) (net.Listener, error) {
	ln, err := net.Listen(l.Network, l.Addr)
	if err != nil {
		return nil, err
	}
	if l.TLS {
		ln = tls.NewListener(ln, s.certs.Load().Config())
	}
	return ln, nil
}

// serveStream accepts connections on ln until it is closed. Accept failures that pass (descriptors or
// memory running out) are retried after a growing pause, as net/http's server does, and logged once a
// minute.
func (s *Server) serveStream(ln net.Listener, listenAddr string) {
	defer s.streams.wg.Done()
	var pause time.Duration
	var lastLog time.Time
	for {
		nc, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			if time.Since(lastLog) > time.Minute {
				s.logger.Warn("accept failed: retrying", "listen", listenAddr, "err", err)
				lastLog = time.Now()
			}
			time.Sleep(pause)
			continue
		}
		pause = 0
		s.streams.wg.Add(1)
		go s.serveStreamConn(nc, listenAddr)
	}
}

// serveStreamConn runs one stream connection: the TLS handshake, then reads and serve calls until the
// client or the engine ends it. The connection is known to Stop from its accept on, so that Stop closes
// it even in the middle of its handshake.
func (s *Server) serveStreamConn(nc net.Conn, listenAddr string) {
	sc := &streamConn{nc: nc}
	if !s.streams.add(sc) { // Stop has begun
		_ = nc.Close()
		s.streams.wg.Done()
		return
	}
	if tc, ok := nc.(*tls.Conn); ok {
		if !s.handshake(tc, connFd(nc)) {
			s.streams.remove(sc)
			_ = nc.Close()
			s.streams.wg.Done()
			return
		}
		// A handshake grows its goroutine's stack to tens of KiB, which an idle connection would keep
		// until a collection shrinks it; the connection is served on a goroutine of its own instead.
		go s.serveHandshaken(sc, listenAddr)
		return
	}
	s.serveHandshaken(sc, listenAddr)
}

// serveHandshaken serves a stream connection whose handshake, if any, is done.
func (s *Server) serveHandshaken(sc *streamConn, listenAddr string) {
	defer s.streams.wg.Done()
	defer sc.nc.Close()
	defer s.streams.remove(sc)
	if !s.admit() {
		s.refused(connFd(sc.nc), addrString(sc.nc.RemoteAddr()))
		_ = sc.nc.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = sc.nc.Write(tooManyConns)
		return
	}
	sc.buf, sc.cn = make([]byte, streamReadMin), newConn(s, nil)
	s.openConn(sc.cn, sc, connFd(sc.nc), addrString(sc.nc.RemoteAddr()), listenAddr)
	s.closeConn(sc.cn, s.streamLoop(sc))
}

// handshake completes tc's TLS handshake within handshakeTimeout, counting a failure in
// ssl_handshake_errors and logging it (-v) as about the connection on descriptor fd. A plaintext client on a
// TLS port fails here: it gets nothing back.
func (s *Server) handshake(tc *tls.Conn, fd int) bool {
	ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		s.certs.Load().HandshakeFailed()
		s.logConn(slog.LevelInfo, "TLS handshake failed", fd, addrString(tc.RemoteAddr()), slog.Any("err", err))
		return false
	}
	s.certs.Load().HandshakeDone(tc.ConnectionState())
	return true
}

// streamLoop reads and serves sc until the connection ends, and returns why.
func (s *Server) streamLoop(sc *streamConn) error {
	cn := sc.cn
	idle := s.cfg.IdleTimeout
	for {
		if idle > 0 {
			// memcached closes a connection silent for more than idle_timeout whole seconds, checked about
			// once a second (idle.go); a deadline one second past the timeout closes it within that range.
			_ = sc.nc.SetReadDeadline(time.Now().Add(idle + idleCheckEvery))
		}
		if err := sc.fill(); err != nil {
			if idle > 0 && errors.Is(err, os.ErrDeadlineExceeded) {
				s.kickedIdle(cn)
			}
			return err
		}
		for {
			cn.loop = s.streams.borrow()
			action := cn.serve(sc)
			s.streams.giveBack(cn.loop)
			cn.loop = nil
			if action == Close || cn.closed {
				return nil
			}
			if action != ServeAgain { // Continue; PauseRead never comes: nothing stays unsent (Write)
				break
			}
			runtime.Gosched() // a request answering in pieces lets other connections run between them
		}
		sc.shrink()
	}
}

// add records sc for Stop, unless Stop has begun.
func (st *streamListeners) add(sc *streamConn) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.conns == nil {
		return false
	}
	st.conns[sc] = struct{}{}
	return true
}

func (st *streamListeners) remove(sc *streamConn) {
	st.mu.Lock()
	delete(st.conns, sc)
	st.mu.Unlock()
}

// start records the listeners the stream transport serves, unless Stop has been called (it reports
// false, and the caller closes them).
func (st *streamListeners) start(s *Server, lns []net.Listener) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if s.stopping.Load() { // Stop sets it before it takes st.mu
		return false
	}
	st.lns, st.conns, st.srv = lns, make(map[*streamConn]struct{}), s
	return true
}

// stop closes the listeners and every connection, then waits for their goroutines until ctx ends.
func (st *streamListeners) stop(ctx context.Context) error {
	st.mu.Lock()
	for _, ln := range st.lns {
		_ = ln.Close()
	}
	for sc := range st.conns {
		// The socket, not the TLS connection: tls.Conn.Close sends close_notify, which can wait 5 s for
		// a client that does not read, and Stop must not.
		if tc, ok := sc.nc.(*tls.Conn); ok {
			_ = tc.NetConn().Close()
		} else {
			_ = sc.nc.Close()
		}
	}
	st.lns, st.conns = nil, nil
	st.mu.Unlock()
	done := make(chan struct{})
	go func() { st.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// connFd is nc's descriptor, the connection's name in `stats conns` (-1 if it has none).
func connFd(nc net.Conn) int {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return -1
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return -1
	}
	fd := -1
	_ = raw.Control(func(f uintptr) { fd = int(f) })
	return fd
}

// addrString is a's text, also for an address gnet or the kernel left unset (a unix socket's peer).
func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}
