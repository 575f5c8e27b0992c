package clientlib

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// idleTimeout is how long a connection may sit without requests before it is closed. Connections are
// kept up to the open count (MaxOpenPerAddr): a client under load reuses what it dialled instead of
// closing and dialling again, and a client whose load drops gives the server its connections back.
const idleTimeout = 30 * time.Second

// maxPipeline bounds the requests outstanding on one connection; callers beyond MaxOpenPerAddr times
// this many wait within their context.
const maxPipeline = 128

// pool holds one server's connections, each shared by pipelined requests. A request takes the least
// loaded connection; a new one is dialled only when every open one is busy and fewer than
// MaxOpenPerAddr are open, so one connection serves a lone caller and MaxOpenPerAddr serve a crowd.
type pool struct {
	addr        string
	dialer      *dialer
	max         int
	timeout     time.Duration
	idleTimeout time.Duration
	drain       func(cn *conn, t *ticket) bool // starts the client's drainer on cn; false if the client is closing

	waiters atomic.Int32 // callers waiting in get: put wakes them
	ending  atomic.Bool  // closed or retired: connections close when their last request ends

	mu      sync.Mutex
	conns   []*conn // open and usable (not broken)
	open    int     // conns plus dials under way
	wake    chan struct{}
	sweep   *time.Timer // closes connections idle longer than idleTimeout; armed while conns is not empty
	armed   bool
	closed  bool
	retired bool // its server was removed (SetServers)
}

func newPool(addr string, cfg *Config) *pool {
	return &pool{
		addr:        addr,
		dialer:      newDialer(addr, cfg),
		max:         cfg.MaxOpenPerAddr,
		timeout:     cfg.Timeout,
		idleTimeout: idleTimeout,
		drain:       func(*conn, *ticket) bool { return false },
	}
}

// get returns a connection for one request, waiting within ctx when every connection is full.
func (p *pool) get(ctx context.Context, srv *server) (*conn, error) {
	for {
		p.waiters.Add(1) // before looking at the connections' load: put reads it after lowering a load
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			p.waiters.Add(-1)
			return nil, ErrClosed
		}
		var best *conn
		var load int32
		for _, cn := range p.conns {
			if cn.draining.Load() {
				continue
			}
			if n := cn.inflight.Load(); best == nil || n < load {
				best, load = cn, n
			}
		}
		switch {
		case best != nil && (load == 0 || p.open >= p.max && load < maxPipeline):
			best.inflight.Add(1)
			p.mu.Unlock()
			p.waiters.Add(-1)
			return best, nil
		case p.open < p.max:
			p.open++
			p.mu.Unlock()
			p.waiters.Add(-1)
			return p.dial(ctx, srv)
		}
		wake := p.wake
		if wake == nil {
			wake = make(chan struct{})
			p.wake = wake
		}
		p.mu.Unlock()
		select {
		case <-wake:
			p.waiters.Add(-1)
		case <-ctx.Done():
			p.waiters.Add(-1)
			return nil, ctx.Err()
		}
	}
}

// dial opens a connection for get, which counted it in open.
func (p *pool) dial(ctx context.Context, srv *server) (*conn, error) {
	nc, err := p.dialer.dial(ctx)
	if err != nil {
		p.mu.Lock()
		p.open--
		p.wakeLocked()
		p.mu.Unlock()
		var ae *authError
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.As(err, &ae):
			return nil, ae // the server answers: not a failure of its health
		}
		return nil, &connError{addr: p.addr, op: "dial", err: err}
	}
	cn := newConn(srv, p, nc, p.timeout)
	cn.inflight.Store(1)
	p.mu.Lock()
	if p.closed {
		p.open--
		p.mu.Unlock()
		cn.close()
		return nil, ErrClosed
	}
	p.conns = append(p.conns, cn)
	if !p.armed {
		p.armed = true
		if p.sweep == nil {
			p.sweep = time.AfterFunc(p.idleTimeout, p.trim)
		} else {
			p.sweep.Reset(p.idleTimeout)
		}
	}
	p.mu.Unlock()
	return cn, nil
}

// put ends one request's use of cn (its reply read, or drained, or its connection broken).
func (p *pool) put(cn *conn) {
	if cn.inflight.Add(-1) == 0 {
		cn.lastUsed.Store(int64(time.Since(epoch)))
		if p.ending.Load() {
			p.mu.Lock()
			if (p.closed || p.retired) && cn.inflight.Load() == 0 {
				p.removeLocked(cn)
			}
			p.mu.Unlock()
		}
	}
	if p.waiters.Load() > 0 {
		p.mu.Lock()
		p.wakeLocked()
		p.mu.Unlock()
	}
}

// woke tells waiting callers that a connection's load changed (its drainer finished).
func (p *pool) woke() {
	if p.waiters.Load() > 0 {
		p.mu.Lock()
		p.wakeLocked()
		p.mu.Unlock()
	}
}

func (p *pool) wakeLocked() {
	if p.wake != nil {
		close(p.wake)
		p.wake = nil
	}
}

// remove closes cn and takes it out of the pool (it broke, or it is no longer wanted).
func (p *pool) remove(cn *conn) {
	p.mu.Lock()
	p.removeLocked(cn)
	p.mu.Unlock()
}

func (p *pool) removeLocked(cn *conn) {
	for i, c := range p.conns {
		if c == cn {
			p.conns = append(p.conns[:i], p.conns[i+1:]...)
			p.conns[len(p.conns):cap(p.conns)][0] = nil
			p.open--
			p.wakeLocked()
			break
		}
	}
	cn.close()
}

// trim closes the connections idle for longer than idleTimeout and re-arms itself while any is open.
func (p *pool) trim() {
	p.mu.Lock()
	var expired []*conn
	next := p.idleTimeout
	for _, cn := range p.conns {
		if cn.inflight.Load() != 0 || cn.draining.Load() {
			continue
		}
		if idle := cn.idleFor(); idle >= p.idleTimeout {
			expired = append(expired, cn)
		} else if left := p.idleTimeout - idle; left < next {
			next = left
		}
	}
	for _, cn := range expired {
		p.removeLocked(cn)
	}
	p.armed = len(p.conns) > 0 && !p.closed
	if p.armed {
		p.sweep.Reset(next)
	}
	p.mu.Unlock()
}

// idleCount is the number of open connections without requests (for tests).
func (p *pool) idleCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, cn := range p.conns {
		if cn.inflight.Load() == 0 {
			n++
		}
	}
	return n
}

// drop closes every connection without requests (used when the server is ejected, and on Close, after
// which the others close as their last request ends).
func (p *pool) drop(final bool) {
	p.mu.Lock()
	if final {
		p.closed = true
		p.ending.Store(true)
		if p.sweep != nil {
			p.sweep.Stop()
		}
		p.armed = false
		p.wakeLocked()
	}
	for i := 0; i < len(p.conns); {
		if cn := p.conns[i]; cn.inflight.Load() == 0 && !cn.draining.Load() {
			p.removeLocked(cn)
			continue
		}
		i++
	}
	p.mu.Unlock()
}

// retire closes the idle connections of a server removed from the list, and every other one when its
// last request ends (put); a request that picked the server just before it was removed still runs.
func (p *pool) retire() {
	p.mu.Lock()
	p.retired = true
	p.ending.Store(true)
	p.mu.Unlock()
	p.drop(false)
}
