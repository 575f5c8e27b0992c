package clientlib

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"strconv"
	"time"
)

// protocol is what GetOrFill speaks to a server, the best the server offers (doc/leases.md, "A client's
// side"): leasecached's leases, else memcached 1.6's meta commands with their recache flags, else the
// classic commands alone (twemproxy, which closes the connection on any command it does not know).
type protocol int32

const (
	protoUnknown protocol = iota
	protoLeases           // lease-get / lease-set
	protoMeta             // mg with N (W, Z, X) / ms with C / md
	protoClassic          // gets / set, herd-safe within the process only
)

func (p protocol) String() string {
	switch p {
	case protoLeases:
		return "leases"
	case protoMeta:
		return "meta commands"
	case protoClassic:
		return "classic commands only"
	}
	return "unknown"
}

// capabilities returns what srv speaks, learning it once: the first caller starts a probe (learn) and
// every caller waits for it within ctx. A probe that fails (the server is down or does not answer)
// teaches nothing, counts against the server's health, and the next caller probes again.
func (c *Client) capabilities(ctx context.Context, srv *server) (protocol, error) {
	if p := protocol(srv.proto.Load()); p != protoUnknown {
		return p, nil
	}
	srv.learnMu.Lock()
	done := srv.learning
	if done == nil {
		done = make(chan struct{})
		if !c.spawn(&c.background, func() { c.learn(srv, done) }) {
			srv.learnMu.Unlock()
			return protoUnknown, ErrClosed
		}
		srv.learning = done
	}
	srv.learnMu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
		return protoUnknown, ctx.Err()
	}
	if p := protocol(srv.proto.Load()); p != protoUnknown {
		return p, nil
	}
	srv.learnMu.Lock()
	defer srv.learnMu.Unlock()
	return protoUnknown, srv.learnErr
}

// learn probes srv, bounded by Config.Timeout and the client's life, and records the result.
func (c *Client) learn(srv *server, done chan struct{}) {
	ctx, cancel := context.WithTimeout(c.life, c.cfg.Timeout)
	defer cancel()
	p, window, err := c.probeProtocol(ctx, srv)
	switch {
	case err == nil:
		srv.leaseWindow.Store(int64(window))
		srv.proto.Store(int32(p))
		if p == protoLeases {
			c.logf("clientlib: %s speaks leases, lease window %v", srv.addr, window)
		} else {
			c.logf("clientlib: %s speaks %v", srv.addr, p)
		}
	case c.life.Err() == nil && errors.As(err, new(*authError)):
		// The server answered, refusing the credentials: not a failure of its health.
	case c.life.Err() == nil:
		c.failed(srv)
	}
	srv.learnMu.Lock()
	srv.learning, srv.learnErr = nil, err
	srv.learnMu.Unlock()
	close(done)
}

// errClosedOnUs: the server (or the proxy in front of it) closed the connection instead of answering,
// which is how twemproxy refuses a command it does not know.
var errClosedOnUs = errors.New("connection closed before the reply")

// probeProtocol finds out what srv speaks, on connections of its own (never the pool's):
//
//  1. "stats settings" and "mn" in one write. A lease_window line means leases (and gives the window);
//     else MN means meta; else (ERROR, as memcached before 1.6 answers mn) classic.
//  2. If the connection was closed instead, "mn" alone on a new one: MN means meta.
//  3. If that was closed too, "version" on a new one: an answer means classic (the server is there, it
//     refuses the rest); anything else is the probe's error.
func (c *Client) probeProtocol(ctx context.Context, srv *server) (protocol, time.Duration, error) {
	var window time.Duration
	var leases, meta bool
	err := c.exchange(ctx, srv, "stats settings\r\nmn\r\n", func(r *bufio.Reader) error {
		for {
			line, err := probeLine(r)
			if err != nil {
				return err
			}
			stat, ok := bytes.CutPrefix(line, []byte("STAT "))
			if !ok { // END, or an error line from a server without stats settings
				break
			}
			if v, ok := bytes.CutPrefix(stat, []byte("lease_window ")); ok {
				leases, window = true, parseWindow(string(v))
			}
		}
		line, err := probeLine(r)
		meta = err == nil && string(line) == "MN"
		return err
	})
	switch {
	case err == nil && leases:
		return protoLeases, window, nil
	case err == nil && meta:
		return protoMeta, 0, nil
	case err == nil:
		return protoClassic, 0, nil
	case !errors.Is(err, errClosedOnUs):
		return protoUnknown, 0, err
	}
	err = c.exchange(ctx, srv, "mn\r\n", func(r *bufio.Reader) error {
		line, err := probeLine(r)
		meta = err == nil && string(line) == "MN"
		return err
	})
	switch {
	case err == nil && meta:
		return protoMeta, 0, nil
	case err != nil && !errors.Is(err, errClosedOnUs):
		return protoUnknown, 0, err
	}
	err = c.exchange(ctx, srv, "version\r\n", func(r *bufio.Reader) error {
		line, err := probeLine(r)
		if err == nil && !bytes.HasPrefix(line, []byte("VERSION ")) {
			err = &ServerError{Addr: srv.addr, Line: string(line), kind: ErrServerError}
		}
		return err
	})
	if err != nil {
		return protoUnknown, 0, err
	}
	return protoClassic, 0, nil
}

// exchange dials srv, writes req and runs read on the reply, within ctx. A connection the server closed
// before any reply byte arrived gives errClosedOnUs.
func (c *Client) exchange(ctx context.Context, srv *server, req string, read func(r *bufio.Reader) error) (err error) {
	if c.cfg.Observe != nil {
		start := time.Now()
		defer func() {
			c.cfg.Observe(ctx, Event{Op: "probe", Addr: srv.addr, Start: start, Duration: time.Since(start), Err: err})
		}()
	}
	nc, err := srv.pool.dialer.dial(ctx)
	if err != nil {
		if ae := (*authError)(nil); errors.As(err, &ae) {
			return ae
		}
		return &connError{addr: srv.addr, op: "dial", err: err}
	}
	defer nc.Close()
	if d, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(d)
	}
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(aLongTimeAgo) })
	defer stop()
	if _, err := nc.Write([]byte(req)); err != nil {
		return &connError{addr: srv.addr, op: "write", err: err}
	}
	cr := &countingReader{r: nc}
	err = read(bufio.NewReader(cr))
	if err != nil && cr.n == 0 && !isTimeout(err) && ctx.Err() == nil {
		return errClosedOnUs
	}
	if err != nil {
		return &connError{addr: srv.addr, op: "read", err: err}
	}
	return nil
}

// probeLine reads one reply line of a probe without its CRLF.
func probeLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	return bytes.TrimRight(line, "\r\n"), nil
}

// parseWindow reads stats settings' lease_window: a Go duration ("10s"), or whole seconds; 0 if neither.
func parseWindow(v string) time.Duration {
	if d, err := time.ParseDuration(v); err == nil {
		return d
	}
	if n, err := strconv.Atoi(v); err == nil {
		return time.Duration(n) * time.Second
	}
	return 0
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r interface{ Read([]byte) (int, error) }
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}
