package server

import (
	"fmt"
	"log"
	"sync/atomic"
)

// gnetLogger routes gnet's own log lines into ours: errors always, the rest only with -v, so a quiet
// daemon prints nothing on start (as memcached does).
type gnetLogger struct {
	l         *log.Logger
	verbosity *atomic.Int32
	lastErr   *atomic.Pointer[string] // the last error line, for Server.Run's error (nil: not kept)
}

func (g gnetLogger) Debugf(format string, args ...any) {
	if g.verbosity.Load() > 1 {
		g.l.Printf("gnet: "+format, args...)
	}
}

func (g gnetLogger) Infof(format string, args ...any) {
	if g.verbosity.Load() > 0 {
		g.l.Printf("gnet: "+format, args...)
	}
}

func (g gnetLogger) Warnf(format string, args ...any) { g.l.Printf("gnet warning: "+format, args...) }
func (g gnetLogger) Errorf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if g.lastErr != nil {
		g.lastErr.Store(&msg)
	}
	g.l.Print("gnet error: " + msg)
}
func (g gnetLogger) Fatalf(format string, args ...any) { g.l.Fatalf("gnet fatal: "+format, args...) }
