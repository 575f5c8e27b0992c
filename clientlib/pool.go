package clientlib

import (
	"context"
	"sync"
)

// pool holds one server's connections. open counts connections in use plus idle ones; a slot in
// tokens is a right to use one connection, so at most cap(tokens) are in use and, because a new
// connection is dialled only when no idle one exists, at most cap(tokens) are open.
type pool struct {
	addr    string
	maxIdle int
	tokens  chan struct{}
	dialer  *dialer

	mu     sync.Mutex
	idle   []*conn
	closed bool
}

func newPool(addr string, cfg *Config) *pool {
	return &pool{
		addr:    addr,
		maxIdle: cfg.MaxIdlePerAddr,
		tokens:  make(chan struct{}, cfg.MaxOpenPerAddr),
		dialer:  newDialer(addr, cfg),
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
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &connError{addr: p.addr, op: "dial", err: err}
	}
	return newConn(srv, nc), nil
}

// put returns a connection; reusable=false closes it (its request was interrupted or failed).
func (p *pool) put(cn *conn, reusable bool) {
	p.mu.Lock()
	if reusable && !p.closed && len(p.idle) < p.maxIdle {
		p.idle = append(p.idle, cn)
		cn = nil
	}
	p.mu.Unlock()
	if cn != nil {
		cn.close()
	}
	<-p.tokens
}

// drop closes every idle connection (used when the server is ejected, and on Close).
func (p *pool) drop(final bool) {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	if final {
		p.closed = true
	}
	p.mu.Unlock()
	for _, cn := range idle {
		cn.close()
	}
}
