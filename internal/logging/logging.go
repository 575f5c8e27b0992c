// Package logging is the daemon's log output: the levels -v selects and memcached's `verbosity N` changes,
// and the two formats, text for people and JSON for log shippers. See doc/design/logging.md.
package logging

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
)

// Levels beyond slog's four. NOTICE is printed at -v0: what an operator caused (a signal), as memcached
// prints its draining stop without -v. TRACE is -vvv.
const (
	LevelTrace  = slog.LevelDebug - 4
	LevelNotice = slog.LevelInfo + 2
)

// Level is the least level printed at verbosity v: the count of -v, or memcached's `verbosity N`.
func Level(v int) slog.Level {
	switch {
	case v <= 0:
		return LevelNotice
	case v == 1:
		return slog.LevelInfo
	case v == 2:
		return slog.LevelDebug
	}
	return LevelTrace
}

// Format is how lines are written: --log-format.
type Format string

const (
	Text Format = "text" // one line per record: prefix, time, level, message, then key=value attributes
	JSON Format = "json" // one JSON object per line (slog's JSONHandler)
)

// ParseFormat reads --log-format.
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case Text, JSON:
		return f, nil
	}
	return "", fmt.Errorf("%q: want text or json", s)
}

// Prefix starts every text line, as the daemon's one-line exit reason does: stderr is often shared (a
// shell, a test harness), and the prefix says whose line it is.
const Prefix = "leasecached: "

// textTime is the text format's time: the standard log package's, which the daemon wrote before slog.
const textTime = "2006/01/02 15:04:05"

// New returns a logger writing f to w, printing records at level and above.
func New(w io.Writer, f Format, level slog.Leveler) *slog.Logger {
	if f == JSON {
		return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: levelNames}))
	}
	out := &textOut{w: w}
	attrs := slog.NewTextHandler(&out.buf, &slog.HandlerOptions{Level: LevelTrace, ReplaceAttr: attrsOnly})
	return slog.New(&textHandler{out: out, attrs: attrs, level: level})
}

// LevelName is how both formats name l: slog's names, and TRACE and NOTICE for the levels slog lacks.
func LevelName(l slog.Level) string {
	switch l {
	case LevelTrace:
		return "TRACE"
	case LevelNotice:
		return "NOTICE"
	}
	return l.String()
}

// levelNames is the JSON handler's ReplaceAttr: the level by LevelName.
func levelNames(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.LevelKey {
		if l, ok := a.Value.Any().(slog.Level); ok {
			return slog.String(slog.LevelKey, LevelName(l))
		}
	}
	return a
}

// attrsOnly keeps the text handler's inner TextHandler to the attributes: textHandler writes the rest.
func attrsOnly(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && (a.Key == slog.TimeKey || a.Key == slog.LevelKey || a.Key == slog.MessageKey) {
		return slog.Attr{}
	}
	return a
}

// textHandler writes "leasecached: 2006/01/02 15:04:05 LEVEL message k=v ...": the message as written
// (a person reads it), the attributes quoted as slog's TextHandler quotes them, which formats them into
// out.buf.
type textHandler struct {
	out   *textOut
	attrs slog.Handler // a TextHandler into out.buf, with the handler's attributes and groups
	level slog.Leveler
}

// textOut is what a textHandler and those derived from it (WithAttrs, WithGroup) share: one line is
// built in buf and written whole, so lines of concurrent records never interleave.
type textOut struct {
	mu  sync.Mutex
	w   io.Writer
	buf bytes.Buffer
}

func (h *textHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level.Level() }

func (h *textHandler) Handle(ctx context.Context, r slog.Record) error {
	o := h.out
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf.Reset()
	o.buf.WriteString(Prefix)
	if !r.Time.IsZero() {
		o.buf.WriteString(r.Time.Format(textTime))
		o.buf.WriteByte(' ')
	}
	o.buf.WriteString(LevelName(r.Level))
	o.buf.WriteByte(' ')
	o.buf.WriteString(r.Message)
	mark := o.buf.Len()
	o.buf.WriteByte(' ')
	if err := h.attrs.Handle(ctx, r); err != nil {
		return err
	}
	if o.buf.Len() == mark+2 { // no attributes: the inner handler wrote only its newline
		o.buf.Truncate(mark)
		o.buf.WriteByte('\n')
	}
	_, err := o.w.Write(o.buf.Bytes())
	if o.buf.Cap() > 64<<10 { // one huge line must not pin its buffer
		o.buf = bytes.Buffer{}
	}
	return err
}

func (h *textHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &textHandler{out: h.out, attrs: h.attrs.WithAttrs(as), level: h.level}
}

func (h *textHandler) WithGroup(name string) slog.Handler {
	return &textHandler{out: h.out, attrs: h.attrs.WithGroup(name), level: h.level}
}
