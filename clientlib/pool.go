package clientlib

import (
	"context"
	"errors"
	"sync"
	"time"
)

// idleTimeout is how long a connection may sit unused in a pool before it is closed. Idle connections
// are kept up to the open count (MaxOpenPerAddr): a client under load reuses what it dialled instead of
// closing and dialling again, and a client whose load drops gives the server its connections back.
const idleTimeout = 30 * time.Second

// pool holds one server's connections. open counts connections in use plus idle ones; a slot in
// tokens is a right to use one connection, so at most cap(tokens) are in use and, because a new
// connection is dialled only when no idle one exists, at most cap(tokens) are open.
type pool struct {
	addr        string
	tokens      chan struct{}
	dialer      *dialer
	idleTimeout time.Duration

	mu      sync.Mutex
	idle    []*conn     // oldest first: get takes the newest, trim closes from the front
	sweep   *time.Timer // closes connections idle longer than idleTimeout; armed while idle is not empty
	armed   bool
	closed  bool
	retired bool // its server was removed (SetServers): connections are closed when put back
}

func newPool(addr string, cfg *Config) *pool {
	return &pool{
		addr:        addr,
		tokens:      make(chan struct{}, cfg.MaxOpenPerAddr),
		dialer:      newDialer(addr, cfg),
		idleTimeout: idleTimeout,
	}
}

// get returns a connection, waiting within ctx when MaxOpenPerAddr are busy.
func (p *pool) get(ctx context.Context, srv *server) (*conn, error) {
	select {
	case p.tokens <- struct{}{}:
	default:
		select {
		case p.tokens <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.tokens
		return nil, ErrClosed
	}
	if n := len(p.idle); n > 0 {
		cn := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return cn, nil
	}
	p.mu.Unlock()
	nc, err := p.dialer.dial(ctx)
	if err != nil {
		<-p.tokens
		var ae *authError
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.As(err, &ae):
			return nil, ae // the server answers: not a failure of its health
		}
		return nil, &connError{addr: p.addr, op: "dial", err: err}
	}
	return newConn(srv, nc), nil
}

// put returns a connection; reusable=false closes it (its request was interrupted or failed). A
// reusable one is always kept: the token it held bounds the idle list to MaxOpenPerAddr.
func (p *pool) put(cn *conn, reusable bool) {
	p.mu.Lock()
	if reusable && !p.closed && !p.retired {
		cn.idleSince = time.Now()
		p.idle = append(p.idle, cn)
		cn = nil
		if !p.armed {
			p.armed = true
			if p.sweep == nil {
				p.sweep = time.AfterFunc(p.idleTimeout, p.trim)
			} else {
				p.sweep.Reset(p.idleTimeout)
			}
		}
	}
	p.mu.Unlock()
	if cn != nil {
		cn.close()
	}
	<-p.tokens
}

// trim closes the connections idle for longer than idleTimeout and re-arms itself for the oldest of
// the others.
func (p *pool) trim() {
	cutoff := time.Now().Add(-p.idleTimeout)
	p.mu.Lock()
	n := 0
	for n < len(p.idle) && !p.idle[n].idleSince.After(cutoff) {
		n++
	}
	expired := make([]*conn, n)
	copy(expired, p.idle[:n])
	rest := copy(p.idle, p.idle[n:])
	clear(p.idle[rest:])
	p.idle = p.idle[:rest]
	p.armed = len(p.idle) > 0 && !p.closed
	if p.armed {
		p.sweep.Reset(time.Until(p.idle[0].idleSince.Add(p.idleTimeout)))
	}
	p.mu.Unlock()
	for _, cn := range expired {
		cn.close()
	}
}

// idleCount is the number of idle connections (for tests).
func (p *pool) idleCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

// drop closes every idle connection (used when the server is ejected, and on Close).
func (p *pool) drop(final bool) {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	if final {
		p.closed = true
		if p.sweep != nil {
			p.sweep.Stop()
		}
		p.armed = false
	}
	p.mu.Unlock()
	for _, cn := range idle {
		cn.close()
	}
}

// retire closes the idle connections of a server removed from the list, and every other one when its
// request ends (put); a request that picked the server just before it was removed still dials.
func (p *pool) retire() {
	p.mu.Lock()
	p.retired = true
	p.mu.Unlock()
	p.drop(false)
}
