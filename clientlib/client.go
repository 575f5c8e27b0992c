package clientlib

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasecached/leasecached/clientlib/ketama"
)

// Client talks to a fleet of servers. Create it with New or NewFromAddrs; share it; Close it when done.
type Client struct {
	cfg     Config
	servers []*server
	ring    atomic.Pointer[ring]
	ringMu  sync.Mutex // serialises ring rebuilds

	flights  flightGroup
	counters counters
	now      func() time.Time

	closeOnce sync.Once
	closed    chan struct{}
	probes    sync.WaitGroup
}

// NewFromAddrs is New with default settings for the given "host:port" addresses.
func NewFromAddrs(addrs ...string) (*Client, error) {
	cfg := Config{}
	for _, a := range addrs {
		cfg.Servers = append(cfg.Servers, Server{Addr: a})
	}
	return New(cfg)
}

// New returns a Client for cfg. It does not connect: connections are dialled on first use.
func New(cfg Config) (*Client, error) {
	cfg = cfg.withDefaults()
	if len(cfg.Servers) == 0 {
		return nil, ErrNoServers
	}
	c := &Client{cfg: cfg, now: time.Now, closed: make(chan struct{})}
	seen := make(map[string]bool)
	for _, s := range cfg.Servers {
		if s.Addr == "" {
			return nil, fmt.Errorf("clientlib: server with empty address")
		}
		if seen[s.Addr] {
			return nil, fmt.Errorf("clientlib: server %s listed twice", s.Addr)
		}
		seen[s.Addr] = true
		name := s.Name
		if name == "" {
			name = ketama.NodeName(s.Addr)
		}
		srv := &server{addr: s.Addr, node: ketama.Node{Name: name, Weight: s.Weight}}
		srv.pool = newPool(s.Addr, &c.cfg)
		c.servers = append(c.servers, srv)
	}
	c.ring.Store(newRing(cfg.Distribution, c.servers))
	c.flights.init()
	return c, nil
}

// Close closes idle connections and stops health probes. Requests in flight finish; later ones fail
// with ErrClosed.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		for _, s := range c.servers {
			s.pool.drop(true)
		}
	})
	c.probes.Wait()
	return nil
}

// ServerFor returns the address of the server that key maps to now (ejected servers excluded).
func (c *Client) ServerFor(key string) (string, error) {
	if !validKey(key) {
		return "", ErrMalformedKey
	}
	s, err := c.ring.Load().pick(key)
	if err != nil {
		return "", err
	}
	return s.addr, nil
}

func (c *Client) pick(key string) (*server, error) {
	if !validKey(key) {
		return nil, ErrMalformedKey
	}
	return c.ring.Load().pick(key)
}

// do runs one request on a pooled connection to srv. It owns the rules about connections: the
// request is bounded by ctx and Config.Timeout; a connection whose request was interrupted or failed
// mid-reply is closed; a network failure not caused by ctx counts against srv's health.
func (c *Client) do(ctx context.Context, srv *server, fn func(cn *conn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case <-c.closed:
		return ErrClosed
	default:
	}
	cn, err := srv.pool.get(ctx, srv)
	if err != nil {
		if !resumable(err) {
			if ctxErr := callerDone(ctx); ctxErr != nil {
				return ctxErr
			}
			c.failed(srv)
		}
		return err
	}
	disarm := cn.arm(ctx, c.cfg.Timeout)
	err = fn(cn)
	undisturbed := disarm()
	if resumable(err) {
		srv.pool.put(cn, undisturbed)
		srv.succeeded()
		return err
	}
	srv.pool.put(cn, false)
	if ctxErr := callerDone(ctx); ctxErr != nil || !undisturbed {
		if ctxErr == nil {
			ctxErr = context.Canceled
		}
		return ctxErr
	}
	c.failed(srv)
	return err
}

// callerDone reports the context's error, counting a deadline that has passed as expired even
// before the context's own timer has fired: the socket deadline set from it can fire first, and that
// timeout is the caller's, not the server's.
func callerDone(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// failed records a network failure and ejects srv once FailureLimit are consecutive.
func (c *Client) failed(srv *server) {
	srv.errors.Add(1)
	if int(srv.failures.Add(1)) < c.cfg.FailureLimit {
		return
	}
	if !srv.dead.CompareAndSwap(false, true) {
		return
	}
	srv.ejects.Add(1)
	c.rebuildRing()
	srv.pool.drop(false)
	select {
	case <-c.closed:
		return
	default:
	}
	c.probes.Add(1)
	go c.revive(srv)
}

// revive probes an ejected server every RetryInterval and puts it back in the ring when it answers.
func (c *Client) revive(srv *server) {
	defer c.probes.Done()
	t := time.NewTimer(c.cfg.RetryInterval)
	defer t.Stop()
	for {
		select {
		case <-c.closed:
			return
		case <-t.C:
		}
		if srv.probe(c.cfg.DialTimeout) == nil {
			srv.failures.Store(0)
			srv.dead.Store(false)
			c.rebuildRing()
			return
		}
		t.Reset(c.cfg.RetryInterval)
	}
}

func (c *Client) rebuildRing() {
	c.ringMu.Lock()
	c.ring.Store(newRing(c.cfg.Distribution, c.servers))
	c.ringMu.Unlock()
}

// eachServer runs fn against every live server in parallel and joins the errors.
func (c *Client) eachServer(ctx context.Context, fn func(srv *server) error) error {
	live := c.ring.Load().live
	if len(live) == 0 {
		return ErrNoServers
	}
	errs := make([]error, len(live))
	var wg sync.WaitGroup
	for i, s := range live {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(s)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
