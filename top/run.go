package top

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Defaults of the command's options.
const (
	DefaultAddr     = "127.0.0.1:11211"
	DefaultInterval = time.Second
	// DefaultTimeout bounds the connect and each poll: a server that does not answer `stats` within it is
	// reported as lost, not waited on.
	DefaultTimeout = 5 * time.Second
	// pipeWidth is the width frames are drawn at when the output is not a terminal.
	pipeWidth = 80
)

// The terminal sequences of the screen mode (ANSI/VT100; every terminal emulator in use has them).
const (
	enterScreen = "\x1b[?1049h\x1b[?25l" // the alternate screen (the shell's screen comes back on exit), cursor hidden
	leaveScreen = "\x1b[?25h\x1b[?1049l"
	cursorHome  = "\x1b[H"
	clearToEOL  = "\x1b[K"
	clearBelow  = "\x1b[J"
)

// Options are `leasecached top`'s.
type Options struct {
	Addr       string
	Interval   time.Duration
	Iterations int         // frames to draw before exiting; 0: until quit
	TLS        *tls.Config // nil: plaintext
	Timeout    time.Duration
}

// Run shows the view of opt.Addr on out until it is quit (q or Ctrl-C on the terminal, SIGINT, SIGTERM, the
// context), opt.Iterations frames are drawn, or the server is lost (an error). When out is a terminal and
// no Iterations are asked for, it switches to the alternate screen and redraws in place (at once when the
// window is resized), reading keys from in when in is a terminal too, and puts the terminal back before it
// returns; otherwise it prints one plain frame per interval, for pipes and scripts (and `-n 1` on a
// terminal leaves its frame on the screen).
func Run(ctx context.Context, opt Options, in, out *os.File) error {
	if opt.Interval <= 0 {
		opt.Interval = DefaultInterval
	}
	if opt.Timeout <= 0 {
		opt.Timeout = DefaultTimeout
	}
	c, err := Dial(ctx, opt.Addr, opt.TLS, opt.Timeout)
	if err != nil {
		return fmt.Errorf("cannot reach %s: %w", opt.Addr, err)
	}
	quit := make(chan struct{})
	var once sync.Once
	stop := func() { once.Do(func() { close(quit); c.Close() }) } // Close ends a poll in progress
	defer stop()

	screen := opt.Iterations == 0 && isTerminal(out.Fd())
	if screen && isTerminal(in.Fd()) {
		if restore, err := keyMode(in.Fd()); err == nil {
			defer restore()
			// It stays blocked in a read after Run returns, until the process exits: nothing else reads in.
			go readKeys(in, stop)
		}
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		select {
		case <-sigs:
		case <-ctx.Done():
		case <-quit:
		}
		stop()
	}()
	if screen {
		if _, err := io.WriteString(out, enterScreen); err != nil {
			return err
		}
		defer io.WriteString(out, leaveScreen) //nolint:errcheck // nothing to do about a terminal gone
	}

	resized := make(chan os.Signal, 1)
	if screen {
		signal.Notify(resized, syscall.SIGWINCH)
		defer signal.Stop(resized)
	}

	var prev Snapshot
	for n := 1; ; n++ {
		cur, err := c.Poll()
		if err != nil {
			select {
			case <-quit:
				return nil
			default:
			}
			if n == 1 { // a TLS server that refuses the client's certificate says so at the first read
				return fmt.Errorf("cannot reach %s: %w", opt.Addr, err)
			}
			return fmt.Errorf("lost %s: %w", opt.Addr, err)
		}
		f := Compute(opt.Addr, prev, cur)
		prev = cur
		if err := draw(out, f, screen); err != nil {
			return err
		}
		if opt.Iterations > 0 && n >= opt.Iterations {
			return nil
		}
		if quitted := wait(opt.Interval, quit, resized, func() error { return draw(out, f, screen) }); quitted {
			return nil
		}
	}
}

// wait waits for the interval to pass, redrawing on each resize; it reports whether quit came first.
func wait(interval time.Duration, quit <-chan struct{}, resized <-chan os.Signal, redraw func() error) bool {
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-quit:
			return true
		case <-resized:
			_ = redraw() // a failed write shows at the next frame's
		case <-t.C:
			return false
		}
	}
}

// draw writes one frame: in place on a terminal, sized to it; after the last one on a pipe.
func draw(out *os.File, f Frame, screen bool) error {
	if !screen {
		_, err := io.WriteString(out, Text(f, pipeWidth, 0)+"\n")
		return err
	}
	cols, rows := termSize(out.Fd())
	if cols == 0 {
		cols = pipeWidth
	}
	lines := Render(f, cols, rows)
	if rows > 0 && len(lines) > rows {
		lines = lines[:rows]
	}
	var b strings.Builder
	b.WriteString(cursorHome)
	for i, l := range lines {
		if cols < minWidth && len(l) > cols {
			l = l[:cols]
		}
		b.WriteString(l)
		b.WriteString(clearToEOL)
		if i < len(lines)-1 { // no newline after the last row: it would scroll a full screen
			b.WriteString("\r\n")
		}
	}
	b.WriteString(clearBelow)
	_, err := io.WriteString(out, b.String())
	return err
}

// quitKeys end the view: q, Ctrl-C (keyMode delivers it as a byte) and Ctrl-D.
func isQuitKey(c byte) bool { return c == 'q' || c == 'Q' || c == 0x03 || c == 0x04 }

// readKeys calls stop at a quit key or when in ends.
func readKeys(in io.Reader, stop func()) {
	buf := make([]byte, 64)
	for {
		n, err := in.Read(buf)
		for _, c := range buf[:n] {
			if isQuitKey(c) {
				stop()
				return
			}
		}
		if err != nil {
			return
		}
	}
}
