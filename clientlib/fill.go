package clientlib

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Defaults and limits of GetOrFill.
const (
	DefaultFillTTL     = 5 * time.Minute
	DefaultFillTimeout = 5 * time.Second // keep it below the server's lease window (10 s by default)
	DefaultMaxWait     = 1 * time.Second
	// backoffStart, backoffCap: hot-miss waits start near 2 ms and double up to the cap, each sleep
	// drawn uniformly from [0, current] ("full jitter") so waiting processes do not retry in step.
	backoffStart = 2 * time.Millisecond
	backoffCap   = 100 * time.Millisecond
	// leaseSetTimeout bounds the cache write after a fill, which runs even if every caller has left.
	leaseSetTimeout = 1 * time.Second
	// NeverExpire as FillOptions.TTL stores filled values without expiry.
	NeverExpire time.Duration = -1
)

// FallbackMode says what GetOrFill does when it cannot get the value through the cache: another
// process held the lease for MaxWait without filling, or the cache server failed.
type FallbackMode int

const (
	// FallbackFill calls fill directly (uncached). Single-flight still limits this to one call per key
	// per process.
	FallbackFill FallbackMode = iota
	// FallbackError returns the error (ErrLeaseWaitExhausted, or the cache error) and leaves the source
	// alone.
	FallbackError
)

// FillFunc reads key's value from the source of truth. It must honour ctx, which carries the fill
// timeout. Its error is returned to every coalesced caller and is never cached.
type FillFunc func(ctx context.Context, key string) ([]byte, error)

// FillOptions tune GetOrFill. Zero fields take the client's defaults (Config.Fill), and those take
// the package defaults (so a call cannot turn off a boolean, or pick FallbackFill, that the client's
// defaults turned on). When callers coalesce, the options of the caller that started the fill apply.
type FillOptions struct {
	// TTL of the value written after a fill; 0 means DefaultFillTTL, NeverExpire means no expiry.
	TTL time.Duration
	// TTLJitter shortens each written TTL by a random amount in [0, TTLJitter], so keys filled
	// together do not all expire together.
	TTLJitter time.Duration
	// Flags are the client flags stored with filled values.
	Flags uint32
	// FillTimeout bounds one fill call.
	FillTimeout time.Duration
	// MaxWait bounds the time spent waiting (with backoff) for another process's fill.
	MaxWait time.Duration
	// AcceptStale returns the key's stale value at once on a hot miss instead of waiting.
	AcceptStale bool
	// Fallback is what to do when waiting runs out or the cache fails.
	Fallback FallbackMode
	// StaleWhileRefresh: when this caller is granted the lease and a stale value exists, return the
	// stale value at once and run the fill and lease-set in the background. Implies AcceptStale.
	StaleWhileRefresh bool
}

func (o FillOptions) withDefaults() FillOptions {
	if o.TTL == 0 {
		o.TTL = DefaultFillTTL
	}
	if o.FillTimeout <= 0 {
		o.FillTimeout = DefaultFillTimeout
	}
	if o.MaxWait <= 0 {
		o.MaxWait = DefaultMaxWait
	}
	return o
}

func (o FillOptions) merge(def FillOptions) FillOptions {
	if o.TTL == 0 {
		o.TTL = def.TTL
	}
	if o.TTLJitter == 0 {
		o.TTLJitter = def.TTLJitter
	}
	if o.Flags == 0 {
		o.Flags = def.Flags
	}
	if o.FillTimeout == 0 {
		o.FillTimeout = def.FillTimeout
	}
	if o.MaxWait == 0 {
		o.MaxWait = def.MaxWait
	}
	o.AcceptStale = o.AcceptStale || def.AcceptStale
	o.StaleWhileRefresh = o.StaleWhileRefresh || def.StaleWhileRefresh
	if o.Fallback == FallbackFill {
		o.Fallback = def.Fallback
	}
	return o
}

// ttl is the TTL for one write: TTL less a random jitter, never below one second.
func (o *FillOptions) ttl() time.Duration {
	if o.TTL == NeverExpire {
		return 0
	}
	t := o.TTL
	if o.TTLJitter > 0 {
		t -= rand.N(o.TTLJitter + 1)
		if t < time.Second {
			t = time.Second
		}
	}
	return t
}

// Source says where a GetOrFill value came from.
type Source int

const (
	SourceCache    Source = iota + 1 // a fresh cached value
	SourceFill                       // this process's fill (cached unless the lease-set was refused)
	SourceStale                      // the key's stale value (AcceptStale or StaleWhileRefresh)
	SourceFallback                   // fill called directly after waiting ran out or the cache failed
)

func (s Source) String() string {
	switch s {
	case SourceCache:
		return "cache"
	case SourceFill:
		return "fill"
	case SourceStale:
		return "stale"
	case SourceFallback:
		return "fallback"
	}
	return "unknown"
}

// Value is GetOrFill's result. Coalesced callers share Data: treat it as read-only.
type Value struct {
	Data   []byte
	Flags  uint32
	Source Source
}

// ErrFillPanicked wraps a panic raised by a FillFunc; the panic does not cross into other goroutines.
var ErrFillPanicked = errors.New("clientlib: fill panicked")

// GetOrFill returns key's value from the cache or, on a miss, from fill, doing the client side of
// leasecached's lease contract so that a fleet of processes runs one fill per key per expiry:
//
//  1. Concurrent callers in this process share one execution (single-flight) and all get its result
//     or its error.
//  2. lease-get. A hit is returned.
//  3. Lease granted: run fill under FillTimeout, lease-set the result, return it. A refused lease-set
//     (NOT_STORED: the key was written or deleted meanwhile) still returns the value, uncached.
//  4. Hot miss: return the stale value if AcceptStale and there is one; else sleep with jittered
//     exponential backoff and lease-get again, for at most MaxWait, then apply the Fallback mode.
//
// ctx bounds this caller's wait only. Once started, a fill runs to completion (bounded by FillTimeout)
// even if its callers leave, because it holds the key's lease for every other process. Against a
// server without lease-get (plain memcached) GetOrFill degrades to get, fill, set, still single-flight.
func (c *Client) GetOrFill(ctx context.Context, key string, fill FillFunc, opts *FillOptions) (Value, error) {
	if !validKey(key) {
		return Value{}, ErrMalformedKey
	}
	if err := ctx.Err(); err != nil {
		return Value{}, err // do not start a fill nobody is waiting for
	}
	o := c.cfg.Fill
	if opts != nil {
		o = opts.merge(c.cfg.Fill)
	}
	v, joined, err := c.flights.do(ctx, key, func(fctx context.Context) (Value, error) {
		return c.leaseFill(fctx, key, fill, &o)
	})
	if joined {
		c.counters.callersCoalesced.Add(1)
	}
	return v, err
}

// leaseFill is one single-flight execution. ctx is cancelled when every caller has left.
func (c *Client) leaseFill(ctx context.Context, key string, fill FillFunc, o *FillOptions) (Value, error) {
	deadline := time.Now().Add(o.MaxWait)
	backoff := backoffStart
	for {
		res, err := c.LeaseGet(ctx, key)
		switch {
		case errors.Is(err, ErrLeasesUnsupported):
			return c.plainFill(ctx, key, fill, o)
		case err != nil:
			if ctx.Err() != nil {
				return Value{}, err
			}
			return c.fallback(ctx, key, fill, o, err)
		}
		switch res.Status {
		case LeaseHit:
			c.counters.cacheHits.Add(1)
			return Value{Data: res.Item.Value, Flags: res.Item.Flags, Source: SourceCache}, nil
		case LeaseGranted:
			if o.StaleWhileRefresh && res.Item != nil {
				c.counters.staleServed.Add(1)
				c.counters.backgroundRefreshes.Add(1)
				go c.fillAndSet(context.WithoutCancel(ctx), key, fill, o, res.Token)
				return Value{Data: res.Item.Value, Flags: res.Item.Flags, Source: SourceStale}, nil
			}
			return c.fillAndSet(ctx, key, fill, o, res.Token)
		}
		// Hot miss: someone else is filling.
		if (o.AcceptStale || o.StaleWhileRefresh) && res.Item != nil {
			c.counters.staleServed.Add(1)
			return Value{Data: res.Item.Value, Flags: res.Item.Flags, Source: SourceStale}, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return c.fallback(ctx, key, fill, o, ErrLeaseWaitExhausted)
		}
		sleep := min(rand.N(backoff+1), left)
		backoff = min(backoff*2, backoffCap)
		c.counters.hotMissWaits.Add(1)
		if err := sleepCtx(ctx, sleep); err != nil {
			return Value{}, err
		}
	}
}

// fillAndSet runs fill as the lease holder and caches the result with lease-set.
func (c *Client) fillAndSet(ctx context.Context, key string, fill FillFunc, o *FillOptions, token uint64) (Value, error) {
	data, err := c.runFill(ctx, key, fill, o)
	if err != nil {
		// The lease stays outstanding until the server's lease window passes: other processes keep
		// waiting or serving stale values rather than all hitting a source that just failed.
		return Value{}, err
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaseSetTimeout)
	defer cancel()
	err = c.LeaseSet(sctx, &Item{Key: key, Value: data, Flags: o.Flags, TTL: o.ttl()}, token)
	switch {
	case err == nil:
		c.counters.leaseSetsStored.Add(1)
	case errors.Is(err, ErrNotStored):
		c.counters.leaseSetsRejected.Add(1)
	}
	// Any other cache error is not the caller's problem: it has its value.
	return Value{Data: data, Flags: o.Flags, Source: SourceFill}, nil
}

// fallback applies the fallback mode after cause (waiting ran out, or the cache failed).
func (c *Client) fallback(ctx context.Context, key string, fill FillFunc, o *FillOptions, cause error) (Value, error) {
	c.counters.fallbacks.Add(1)
	if o.Fallback == FallbackError {
		return Value{}, cause
	}
	data, err := c.runFill(ctx, key, fill, o)
	if err != nil {
		return Value{}, err
	}
	return Value{Data: data, Flags: o.Flags, Source: SourceFallback}, nil
}

// plainFill is GetOrFill against a server without leases: get, else fill and set.
func (c *Client) plainFill(ctx context.Context, key string, fill FillFunc, o *FillOptions) (Value, error) {
	it, err := c.Get(ctx, key)
	if err == nil {
		c.counters.cacheHits.Add(1)
		return Value{Data: it.Value, Flags: it.Flags, Source: SourceCache}, nil
	}
	if !errors.Is(err, ErrCacheMiss) {
		if ctx.Err() != nil {
			return Value{}, err
		}
		return c.fallback(ctx, key, fill, o, err)
	}
	data, err := c.runFill(ctx, key, fill, o)
	if err != nil {
		return Value{}, err
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaseSetTimeout)
	defer cancel()
	_ = c.Set(sctx, &Item{Key: key, Value: data, Flags: o.Flags, TTL: o.ttl()})
	return Value{Data: data, Flags: o.Flags, Source: SourceFill}, nil
}

// runFill calls fill under FillTimeout, detached from cancellation (the fill serves every coalesced
// caller, and holds the fleet's lease). A fill that ignores its context is abandoned at the timeout:
// its goroutine finishes on its own and its result is dropped.
func (c *Client) runFill(ctx context.Context, key string, fill FillFunc, o *FillOptions) ([]byte, error) {
	c.counters.fillsStarted.Add(1)
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.FillTimeout)
	defer cancel()
	type result struct {
		data []byte
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				ch <- result{err: fmt.Errorf("%w: %v", ErrFillPanicked, p)}
			}
		}()
		d, err := fill(fctx, key)
		ch <- result{d, err}
	}()
	var r result
	select {
	case r = <-ch:
	case <-fctx.Done():
		r.err = fmt.Errorf("clientlib: fill of %q: %w", key, fctx.Err())
	}
	if r.err != nil {
		c.counters.fillErrors.Add(1)
	}
	return r.data, r.err
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
