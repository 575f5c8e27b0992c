package server

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasecached/leasecached/internal/logging"
)

// What the server logs at each verbosity, and in which format, is in doc/design/logging.md: -v0 warnings
// and errors, -v connection errors and refusals, -vv connections opened and closed.

// The attributes that name the client a line is about: its descriptor, as memcached's "<fd" prefix does,
// and its address.
const (
	attrConn = "conn"
	attrPeer = "peer"
)

// setVerbosity is -v's count at start and memcached's `verbosity N` at run time: `stats settings` reports
// it, and the log prints from its level on.
func (s *Server) setVerbosity(v int) {
	s.verbosity.Store(int32(v))
	s.cfg.LogLevel.Set(logging.Level(v))
	s.tracing.Store(logging.Level(v) <= logging.LevelTrace)
}

// logs reports whether a line at level would be printed: a check to make before building a line's
// attributes on a path that runs often.
func (s *Server) logs(level slog.Level) bool { return s.logger.Enabled(context.Background(), level) }

// logConn logs a line about the client on descriptor fd at address peer.
func (s *Server) logConn(level slog.Level, msg string, fd int, peer string, attrs ...slog.Attr) {
	if !s.logs(level) {
		return
	}
	all := make([]slog.Attr, 0, 2+len(attrs))
	all = append(all, slog.Int(attrConn, fd), slog.String(attrPeer, peer))
	s.logger.LogAttrs(context.Background(), level, msg, append(all, attrs...)...)
}

// log logs a line about cn's client.
func (cn *conn) log(level slog.Level, msg string, attrs ...slog.Attr) {
	cn.srv.logConn(level, msg, cn.fd, cn.remote, attrs...)
}

// traceCommand logs (-vvv) a command a client sent, as memcached's -vv echoes each one: what it is (cmd, or
// a binary opcode), its first key and how many keys, never its data. The caller checks s.tracing first:
// this runs per request.
func (cn *conn) traceCommand(what slog.Attr, key []byte, keys int) {
	attrs := make([]slog.Attr, 0, 3)
	attrs = append(attrs, what)
	if keys > 0 {
		attrs = append(attrs, slog.String("key", string(key)))
	}
	if keys > 1 {
		attrs = append(attrs, slog.Int("keys", keys))
	}
	cn.log(logging.LevelTrace, "command", attrs...)
}

// Refusal lines are rate-limited: a flood of connections refused (over -c, or for lack of descriptors) logs
// at most refusalLines lines a second, and the lines held back are counted and logged as one line once the
// second that held the first of them back ends. See doc/design/logging.md.
const (
	refusalLines  = 10
	refusalWindow = time.Second
)

// lineLimit lets at most refusalLines lines through in each refusalWindow and counts the rest.
type lineLimit struct {
	mu     sync.Mutex
	window time.Time // when the current window began
	lines  int       // lines let through in it
	held   int       // lines held back since the last count was taken
}

// allow reports whether a line may be logged at now; a line held back is counted, and first says it is
// the first held back since the count was last taken (the caller then arranges for the count's line).
func (l *lineLimit) allow(now time.Time) (ok, first bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.window) >= refusalWindow {
		l.window, l.lines = now, 0
	}
	if l.lines < refusalLines {
		l.lines++
		return true, false
	}
	l.held++
	return false, l.held == 1
}

// takeHeld returns how many lines were held back since it was last called.
func (l *lineLimit) takeHeld() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.held
	l.held = 0
	return n
}

// logRefusal logs (-v) a connection refused, through the refusal lines' limit (s.refusals).
func (s *Server) logRefusal(msg string, fd int, peer string, attrs ...slog.Attr) {
	if !s.logs(slog.LevelInfo) {
		return
	}
	ok, first := s.refusals.allow(time.Now())
	if ok {
		s.logConn(slog.LevelInfo, msg, fd, peer, attrs...)
		return
	}
	if first {
		time.AfterFunc(refusalWindow, s.logHeldRefusals)
	}
}

// logHeldRefusals logs how many refusal lines the limit held back.
func (s *Server) logHeldRefusals() {
	if n := s.refusals.takeHeld(); n > 0 {
		s.logger.LogAttrs(context.Background(), slog.LevelInfo, "refusals not logged",
			slog.Int("count", n), slog.Int("per_second", refusalLines))
	}
}

// gnetLogger routes gnet's own log lines into ours at their levels: a quiet daemon prints only gnet's
// warnings and errors.
type gnetLogger struct {
	l       *slog.Logger
	lastErr *atomic.Pointer[string] // the last error line, for Server.Run's error (nil: not kept)
}

func (g gnetLogger) logf(level slog.Level, format string, args []any) {
	if g.l.Enabled(context.Background(), level) {
		g.l.Log(context.Background(), level, "gnet: "+fmt.Sprintf(format, args...))
	}
}

func (g gnetLogger) Debugf(format string, args ...any) { g.logf(slog.LevelDebug, format, args) }
func (g gnetLogger) Infof(format string, args ...any)  { g.logf(slog.LevelInfo, format, args) }
func (g gnetLogger) Warnf(format string, args ...any)  { g.logf(slog.LevelWarn, format, args) }

func (g gnetLogger) Errorf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if g.lastErr != nil {
		g.lastErr.Store(&msg)
	}
	g.l.Error("gnet: " + msg)
}

func (g gnetLogger) Fatalf(format string, args ...any) {
	g.l.Error("gnet: fatal: " + fmt.Sprintf(format, args...))
	os.Exit(1)
}
