package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// --idle-timeout, memcached's -o idle_timeout: a connection that has sent nothing for longer than the
// timeout is closed, so clients that vanished without a FIN or RST (half-open connections) cannot hold a
// -c slot, a descriptor and their buffers forever. Off (0) by default, as in memcached.
//
// The rule is memcached 1.6.18's: a thread goes through the connections about once a second and closes
// those whose last command is more than idle_timeout whole seconds old (measured with its one-second
// clock, so a connection is closed after between N and N+2 seconds of silence, N+3 counting the check's
// period), except connections with replies still to write: those wait for their client, and memcached
// leaves a connection in its write states alone. It counts each close in `stats` idle_kicks, a stat it
// sends only with the timeout on.
//
// Two differences from memcached:
//   - The clock starts at a connection's last read (conn.lastCmd, set by every serve call), not its last
//     complete command, so a client that trickles in a request a few bytes at a time is not idle while it
//     sends; memcached closes it (its last_cmd_time moves only with whole commands).
//   - A connection that stalls in the middle of a data block is closed too; memcached leaves one in its
//     conn_nread state alone. That connection holds up to a whole item in memory (bigreq.go), which is what
//     this setting exists to give back.

// idleCheckEvery is how often OnTick looks for idle connections: memcached's idle thread goes through
// its connection table about once a second.
const idleCheckEvery = time.Second

// idleTimeoutSeconds is the idle timeout in whole seconds (0: off). The flag only takes whole seconds.
func (s *Server) idleTimeoutSeconds() int64 { return int64(s.cfg.IdleTimeout / time.Second) }

// idleConn is a connection OnTick found idle: ours and gnet's.
type idleConn struct {
	cn *conn
	c  gnet.Conn
}

// isIdle says whether cn has been silent for longer than limit seconds at now (unix seconds).
func isIdle(cn *conn, now, limit int64) bool { return now-cn.lastCmd.Load() > limit }

// OnTick runs on gnet's ticker goroutine (gnet.WithTicker, set only when the idle timeout is on): it finds
// the connections idle for longer than the timeout and asks each one's event loop to close them. A
// connection is only ever touched on its own loop, so the loop checks again there (closeIdle): the client
// may have sent a request in between, or the connection may be closed already.
func (s *Server) OnTick() (time.Duration, gnet.Action) {
	limit := s.idleTimeoutSeconds()
	if limit <= 0 {
		return idleCheckEvery, gnet.None
	}
	now := s.store.Now()
	var idle map[gnet.EventLoop][]idleConn
	s.conns.Range(func(k, v any) bool {
		cn := k.(*conn)
		c, ok := v.(gnet.Conn) // a stream connection's read deadline is its idle check (stream.go)
		if !ok || !isIdle(cn, now, limit) {
			return true
		}
		el := c.EventLoop() // fixed for the connection's life: safe from here
		if idle == nil {
			idle = make(map[gnet.EventLoop][]idleConn)
		}
		idle[el] = append(idle[el], idleConn{cn, c})
		return true
	})
	for el, conns := range idle {
		// An error means the engine is shutting down, which closes every connection anyway.
		_ = el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
			s.closeIdle(conns, limit)
			return nil
		}))
	}
	return idleCheckEvery, gnet.None
}

// closeIdle closes those of conns that are still idle, on their event loop (Execute runs it between two
// rounds of events, so no serve call is in progress).
func (s *Server) closeIdle(conns []idleConn, limit int64) {
	now := s.store.Now()
	for _, ic := range conns {
		// cn.closed: OnClose ran (the gnet.Conn may be released, its descriptor reused). Unsent replies:
		// the connection waits for its client to read, as memcached's write states do.
		// A watcher is never idle: memcached's logger thread owns it, and the idle check passes it by.
		if ic.cn.closed || ic.cn.watch != nil || !isIdle(ic.cn, now, limit) || ic.c.OutboundBuffered() > 0 {
			continue
		}
		s.kickedIdle(ic.cn)
		if lt, ok := ic.c.Context().(*loopTLS); ok {
			lt.closeNotify()
		}
		_ = ic.c.EventLoop().Close(ic.c) // on this loop: closes now, OnClose included
	}
}

// kickedIdle counts (idle_kicks) and logs (-vv) a connection either transport closes for idleness.
func (s *Server) kickedIdle(cn *conn) {
	cn.closeWhy = closeIdleTimeout
	s.stats.idleKicks.Add(1)
	cn.log(slog.LevelDebug, "closing idle connection", slog.Int64("idle_timeout", s.idleTimeoutSeconds()))
}
