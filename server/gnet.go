package server

import (
	"log/slog"
	"net"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/leasecached/leasecached/watch"
)

// The gnet transport: Server is gnet's event handler, and each gnet.Conn is the Transport of one
// connection's engine (conn.go). Everything gnet-specific about serving a connection is here and in
// batch.go (batched reads) and loop.go (what an event loop's connections share).

// OnBoot records the engine so Stop can reach it, once gnet has made every listener.
func (s *Server) OnBoot(eng gnet.Engine) gnet.Action {
	s.eng.Store(&eng)
	s.restoreUmask()
	s.announce()
	close(s.ready)
	return gnet.None
}

// OnOpen admits a connection unless the connection limit is reached; memcached answers the refused one
// with an error line before closing it, so clients see why.
func (s *Server) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	if s.tlsAddrs.is(c.LocalAddr()) { // admitted once its handshake is done (looptls.go)
		return nil, s.openTLS(c)
	}
	if !s.admit() {
		s.refused(c.Fd(), addrString(c.RemoteAddr()))
		return tooManyConns, gnet.Close
	}
	cn := newConn(s, s.loopOf(c.EventLoop()))
	s.openConn(cn, c, c.Fd(), addrString(c.RemoteAddr()), listenAddr(c.LocalAddr()))
	c.SetContext(cn)
	return nil, gnet.None
}

// admit takes a -c slot for a new connection of either transport, or counts it refused. The slot is
// taken in one atomic step, so connections opening at once on several loops or goroutines never pass the
// limit together; closeConn gives it back.
func (s *Server) admit() bool {
	if s.stats.currConns.Add(1) > int64(s.cfg.ConnLimit) {
		s.stats.currConns.Add(-1)
		s.stats.rejectedConns.Add(1)
		return false
	}
	return true
}

// refused logs (-v) a connection admit refused, as memcached does ("Too many open connections").
func (s *Server) refused(fd int, peer string) {
	s.logRefusal("refused: too many open connections", fd, peer, slog.Int("limit", s.cfg.ConnLimit))
}

// openConn counts and records a connection either transport admitted (admit): cn is its engine, handle the
// transport's connection (a gnet.Conn, or a *streamConn), listen the listener's address in `stats conns`
// form.
func (s *Server) openConn(cn *conn, handle any, fd int, remote, listen string) {
	s.stats.totalConns.Add(1)
	cn.fd, cn.remote, cn.listen = fd, remote, listen
	cn.lastCmd.Store(time.Now().Unix())
	s.conns.Store(cn, handle)
	if s.watch.On(watch.ConnEvents) {
		s.watchConnEvent(cn, false, 0)
	}
	cn.log(slog.LevelDebug, "connection opened", slog.String("listen", listen))
}

// Refusal is what a connection refused for lack of file descriptors is told before it is closed
// (gnet.RefusalHandler, a leasecached patch): memcached's words for a connection over the limit. fd is the
// descriptor it was accepted on (the reserve's, given up for it) and peer its client; each refusal is
// logged at -v like one over -c.
func (s *Server) Refusal(fd int, peer net.Addr) []byte {
	s.stats.rejectedConns.Add(1)
	s.logRefusal("refused: out of file descriptors", fd, addrString(peer))
	return tooManyConns
}

// OnClose releases the connection's state.
func (s *Server) OnClose(c gnet.Conn, err error) gnet.Action {
	switch x := c.Context().(type) {
	case *conn:
		s.closeConn(x, err)
	case *loopTLS:
		s.closeTLS(x, err)
	}
	c.SetContext(nil)
	return gnet.None
}

// closeConn releases the state of a connection either transport closed. It runs where the connection is
// served (its event loop, or its goroutine), maybe inside its serve call (conn.closed).
func (s *Server) closeConn(cn *conn, err error) {
	cn.closed = true
	cn.unpark() // a parked read costs nothing once its connection is gone (hold.go)
	if cn.auth != nil && cn.auth.pending != nil {
		cn.auth.pending.Cancel() // a check still waiting for a checker is not made (auth.go)
	}
	if cn.bin != nil && cn.bin.pending != nil {
		cn.bin.pending.Cancel() // the same for a SASL check (binary.go)
	}
	if cn.gc == nil {
		cn.releaseBig() // not inside serve, which may still be using it (serve's done gives it back)
	}
	if cn.watch != nil {
		s.watch.Remove(cn.watch)
	}
	if s.watch.On(watch.ConnEvents) {
		s.watchConnEvent(cn, true, s.closeReason(cn, err))
	}
	s.conns.Delete(cn)
	s.stats.currConns.Add(-1)
	if s.logs(slog.LevelDebug) {
		if err != nil {
			cn.log(slog.LevelDebug, "connection closed", slog.Any("err", err))
		} else {
			cn.log(slog.LevelDebug, "connection closed")
		}
	}
}

// OnTraffic serves every complete request buffered on c, and does what the connection's engine asks of
// its transport: gnet.Conn is one (Transport), and gnet's fork can pause reading it (gnet.ReadPauser).
func (s *Server) OnTraffic(c gnet.Conn) gnet.Action {
	cn, ok := c.Context().(*conn)
	if !ok {
		if lt, ok := c.Context().(*loopTLS); ok {
			return s.trafficTLS(c, lt)
		}
		return gnet.Close
	}
	return afterServe(c, cn.serve(c))
}

// afterServe does what a serve call of c's engine asked of c: gnet's fork can pause reading it
// (gnet.ReadPauser), and Wake serves it again after the loop's other connections.
func afterServe(c gnet.Conn, action Action) gnet.Action {
	switch action {
	case Close:
		return gnet.Close
	case PauseRead:
		if p, ok := c.(gnet.ReadPauser); ok {
			_ = p.PauseRead()
		}
	case ServeAgain:
		_ = c.Wake(nil)
	}
	return gnet.None
}

// gnetWaker is the part of gnet.Conn that wakerOf uses.
type gnetWaker interface {
	Wake(gnet.AsyncCallback) error
}

// wakerOf is how a checker goroutine has c served again once its check is done: gnet's Wake, which any
// goroutine may call. A transport without one (the stream transport: a goroutine per connection) is nil:
// the check runs in its serve call, which holds only that connection.
func wakerOf(c Transport) func() {
	if w, ok := c.(gnetWaker); ok {
		return func() { _ = w.Wake(nil) }
	}
	return nil
}
