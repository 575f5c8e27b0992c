package server

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"

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
