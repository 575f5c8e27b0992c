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
	servers []*server // the configured servers, in order; guarded by ringMu (SetServers replaces it)
	ring    atomic.Pointer[ring]
	placed  atomic.Pointer[ring] // every configured server, ejected ones included: see internal/placement
	ringMu  sync.Mutex           // serialises ring rebuilds and changes of servers

	flights  flightGroup
	fills    fillTimes // how long each key's last fill took, for EarlyRefresh
	counters counters
	now      func() time.Time
	warned   atomic.Bool // the lease window warning was given (checkLeaseWindow)

	// life is cancelled by Close: it interrupts the client's own background I/O (drains, probes).
	life     context.Context
	stopLife context.CancelFunc

	closeOnce  sync.Once
	closed     chan struct{}  // closed once background refreshes are done: requests then fail with ErrClosed
	bgMu       sync.Mutex     // guards closing against spawn
	closing    bool           // Close has begun: no new background work
	refreshes  sync.WaitGroup // StaleWhileRefresh fills and early refreshes, which Close waits for
	background sync.WaitGroup // revivals, capability probes, drains: Close interrupts them and waits
}

// NewFromAddrs is New with default settings for the given "host:port" addresses, placing keys as
// gomemcache's memcache.New does (Distribution Modulo), so that a service moving from gomemcache finds
// its keys where they were. Use New with Distribution Ketama for consistent hashing.
func NewFromAddrs(addrs ...string) (*Client, error) {
	cfg := Config{Distribution: Modulo}
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
	if cfg.Username != "" {
		if err := validCredentials(cfg.Username, cfg.Password); err != nil {
			return nil, err
		}
	}
	c := &Client{cfg: cfg, now: time.Now, closed: make(chan struct{})}
	c.life, c.stopLife = context.WithCancel(context.Background())
	servers, err := c.serverList(cfg.Servers, nil)
	if err != nil {
		return nil, err
	}
	c.servers = servers
	c.ring.Store(newRing(cfg.Distribution, c.servers))
	c.placed.Store(newPlacement(cfg.Distribution, c.servers))
	c.flights.init()
	return c, nil
}

// serverList makes the servers of list, reusing those of old with the same address (their connections,
// health and what they speak) with the list's weight and name.
func (c *Client) serverList(list []Server, old map[string]*server) ([]*server, error) {
	seen := make(map[string]bool)
	var out []*server
	for _, s := range list {
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
		node := ketama.Node{Name: name, Weight: s.Weight}
		if srv := old[s.Addr]; srv != nil {
			srv.node = node // read only by newRing, under ringMu
			out = append(out, srv)
			continue
		}
		srv := &server{addr: s.Addr, node: node}
		srv.pool = newPool(s.Addr, &c.cfg)
		srv.pool.drain = func(cn *conn, t *ticket) bool { return c.spawn(&c.background, func() { c.drainConn(srv, cn, t) }) }
		out = append(out, srv)
	}
	return out, nil
}

// SetServers replaces the server list while the client is in use (gomemcache's ServerList.SetServers).
// Keys are placed over the new list by Config.Distribution from the next request on: under Modulo most
// keys move when the count changes, under Ketama about the share of the servers added or removed. A
// server that stays keeps its connections and health; a removed one takes no new requests, and its
// connections are closed as their requests in flight finish. An error (an empty list, an empty or
// repeated address, a closed client) changes nothing.
func (c *Client) SetServers(servers ...Server) error {
	if len(servers) == 0 {
		return ErrNoServers
	}
	c.ringMu.Lock()
	defer c.ringMu.Unlock()
	c.bgMu.Lock()
	closing := c.closing
	c.bgMu.Unlock()
	if closing {
		return ErrClosed
	}
	old := make(map[string]*server, len(c.servers))
	for _, s := range c.servers {
		old[s.addr] = s
	}
	next, err := c.serverList(servers, old)
	if err != nil {
		return err
	}
	for _, s := range next {
		delete(old, s.addr)
	}
	c.servers = next
	c.ring.Store(newRing(c.cfg.Distribution, next))
	c.placed.Store(newPlacement(c.cfg.Distribution, next))
	for _, s := range old {
		s.removed.Store(true)
		s.pool.retire()
	}
	return nil
}

// serverSnapshot returns the configured servers now.
func (c *Client) serverSnapshot() []*server {
	c.ringMu.Lock()
	defer c.ringMu.Unlock()
	return c.servers
}

// Close waits for background refreshes (StaleWhileRefresh, EarlyRefresh) to finish their fill and cache write, then
// closes the connections and stops health probes. Requests in flight finish; later ones fail with
// ErrClosed.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.bgMu.Lock()
		c.closing = true
		c.bgMu.Unlock()
		c.stopLife()
		c.refreshes.Wait()
		close(c.closed)
		for _, s := range c.serverSnapshot() {
			s.pool.drop(true)
		}
	})
	c.background.Wait()
	return nil
}

// spawn runs fn on a goroutine counted in wg, unless Close has begun (then it reports false).
func (c *Client) spawn(wg *sync.WaitGroup, fn func()) bool {
	c.bgMu.Lock()
	defer c.bgMu.Unlock()
	if c.closing {
		return false
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		fn()
	}()
	return true
}

// logf passes a notice to Config.Logf, if set.
func (c *Client) logf(format string, args ...any) {
	if c.cfg.Logf != nil {
		c.cfg.Logf(format, args...)
	}
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
// mid-reply is closed; a network failure not caused by ctx counts against srv's health, and so does a
// request its caller gave up on that the server then leaves unanswered for Config.Timeout (drain).
//
// op (the command) and keys (how many it carries) are for Config.Observe, which do calls after the
// request when it is set; unset, it costs a nil check.
func (c *Client) do(ctx context.Context, srv *server, op string, keys int, fn func(cn *conn) error) error {
	if c.cfg.Observe == nil {
		return c.do1(ctx, srv, fn)
	}
	start := time.Now()
	err := c.do1(ctx, srv, fn)
	c.cfg.Observe(ctx, Event{Op: op, Addr: srv.addr, Keys: keys, Start: start, Duration: time.Since(start), Err: failure(err)})
	return err
}

// failure is err unless it is an answer: a miss or a refused conditional write is the server answering.
func failure(err error) error {
	if err == ErrCacheMiss || err == ErrNotStored || err == ErrCASConflict {
		return nil
	}
	return err
}

// do1 is do without the observer. fn writes its request into cn.w, calls cn.send with the number of
// replies it expects, and reads them; do1 owns what happens to the connection afterwards.
func (c *Client) do1(ctx context.Context, srv *server, fn func(cn *conn) error) error {
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
	t := cn.begin(ctx)
	err = fn(cn)
	switch {
	case !t.sent:
		cn.unbegin(t)
		srv.pool.put(cn)
		return err
	case err == errAbandoned:
		// The reply is the drainer's now (drainConn), and so are t and the connection's slot.
		if ctxErr := callerDone(ctx); ctxErr != nil {
			return ctxErr
		}
		return context.Canceled
	case err == errPipelineBroken:
		// An earlier request on the connection failed; that failure was counted once, by its caller.
		cn.recycle(t)
		srv.pool.put(cn)
		return &connError{addr: srv.addr, op: "read", err: err}
	case resumable(err):
		cn.pass(t)
		srv.pool.put(cn)
		srv.succeeded()
		return err
	}
	cn.fail(err)
	cn.pass(t)
	srv.pool.put(cn)
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

// failed records a failure and ejects srv once FailureLimit are consecutive.
func (c *Client) failed(srv *server) {
	srv.errors.Add(1)
	if int(srv.failures.Add(1)) < c.cfg.FailureLimit || srv.removed.Load() {
		return
	}
	if !srv.dead.CompareAndSwap(false, true) {
		return
	}
	srv.ejects.Add(1)
	c.rebuildRing()
	srv.pool.drop(false)
	if c.spawn(&c.background, func() { c.revive(srv) }) {
		c.logf("clientlib: %s ejected after %d consecutive failures; probing it every %v", srv.addr,
			c.cfg.FailureLimit, c.cfg.RetryInterval)
	}
}

// revive probes an ejected server every RetryInterval and puts it back in the ring when it answers. What
// it speaks is learned again: the process that answers may not be the one that failed.
func (c *Client) revive(srv *server) {
	t := time.NewTimer(c.cfg.RetryInterval)
	defer t.Stop()
	for {
		select {
		case <-c.life.Done():
			return
		case <-t.C:
		}
		if srv.removed.Load() {
			return
		}
		start := time.Now()
		err := srv.probe(c.cfg.DialTimeout)
		if c.cfg.Observe != nil {
			c.cfg.Observe(c.life, Event{Op: "version", Addr: srv.addr, Start: start, Duration: time.Since(start), Err: err})
		}
		if err == nil {
			srv.proto.Store(int32(protoUnknown))
			srv.failures.Store(0)
			srv.dead.Store(false)
			c.rebuildRing()
			c.logf("clientlib: %s answers again; back in the ring", srv.addr)
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

// Ping asks every configured server, ejected ones included, for its version (gomemcache's Ping): nil
// when each answers; otherwise the joined errors, each naming its server.
func (c *Client) Ping(ctx context.Context) error {
	servers := c.serverSnapshot()
	errs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i, srv := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.versionOf(ctx, srv); err != nil {
				errs[i] = fmt.Errorf("clientlib: ping %s: %w", srv.addr, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
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
