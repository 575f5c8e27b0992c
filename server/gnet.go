package server

import (
	"time"

	"github.com/panjf2000/gnet/v2"
)

// The gnet transport: Server is gnet's event handler, and each gnet.Conn is the Transport of one
// connection's engine (conn.go). Everything gnet-specific about serving a connection is here and in
// batch.go (batched reads) and loop.go (what an event loop's connections share).

// OnBoot records the engine so Stop can reach it, and starts giving bursts' memory back (memory.go).
func (s *Server) OnBoot(eng gnet.Engine) gnet.Action {
	s.eng.Store(&eng)
	go s.releaseMemory(eng)
	close(s.ready)
	if s.verbosity.Load() > 0 {
		s.logger.Printf("listening on %s with %d event loops", s.Addr(), s.cfg.Threads)
	}
	return gnet.None
}

// OnOpen admits a connection unless the connection limit is reached; memcached answers the refused one
// with an error line before closing it, so clients see why.
func (s *Server) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	if s.stats.currConns.Load() >= int64(s.cfg.ConnLimit) {
		s.stats.rejectedConns.Add(1)
		return tooManyConns, gnet.Close
	}
	s.stats.currConns.Add(1)
	s.stats.totalConns.Add(1)
	cn := newConn(s, s.loopOf(c.EventLoop()))
	cn.fd = c.Fd()
	cn.remote = c.RemoteAddr().String()
	cn.lastCmd.Store(time.Now().Unix())
	s.conns.Store(cn, c)
	c.SetContext(cn)
	if s.verbosity.Load() > 1 {
		s.logger.Printf("new connection from %s", c.RemoteAddr())
	}
	return nil, gnet.None
}

// Refusal is what a connection refused for lack of file descriptors is told before it is closed
// (gnet.RefusalHandler, a leasecached patch): memcached's words for a connection over the limit.
func (s *Server) Refusal() []byte {
	s.stats.rejectedConns.Add(1)
	return tooManyConns
}

// OnClose releases the connection's state.
func (s *Server) OnClose(c gnet.Conn, err error) gnet.Action {
	if cn, ok := c.Context().(*conn); ok {
		cn.closed = true // OnClose runs on the connection's loop, maybe inside its serve (conn.closed)
		if cn.gc == nil {
			cn.releaseBig() // not inside serve, which may still be using it (serve's done gives it back)
		}
		s.conns.Delete(cn)
		s.stats.currConns.Add(-1)
		c.SetContext(nil)
	}
	if s.verbosity.Load() > 1 {
		s.logger.Printf("connection from %s closed: %v", c.RemoteAddr(), err)
	}
	return gnet.None
}

// OnTraffic serves every complete request buffered on c, and does what the connection's engine asks of
// its transport: gnet.Conn is one (Transport), and gnet's fork can pause reading it (gnet.ReadPauser).
func (s *Server) OnTraffic(c gnet.Conn) gnet.Action {
	cn, ok := c.Context().(*conn)
	if !ok {
		return gnet.Close
	}
	switch cn.serve(c) {
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
