package clientlib

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// Defaults and limits of GetOrFill.
const (
	defaultFillTTL = 5 * time.Minute
	// defaultFillTimeout: keep FillTimeout below leasecached's lease window (10 s by default); the client
	// warns once, through Config.Logf, when it is not.
	defaultFillTimeout = 5 * time.Second
	// backoffStart, backoffCap: hot-miss waits start near 2 ms and double up to the cap, each sleep
	// drawn uniformly from [0, current] ("full jitter") so waiting processes do not retry in step.
	backoffStart = 2 * time.Millisecond
	backoffCap   = 100 * time.Millisecond
	// cacheWriteTimeout bounds the cache write after a fill, or the give-back after a failed one: it runs
	// even if every caller has left.
	cacheWriteTimeout = 1 * time.Second
	// NeverExpire as FillOptions.TTL stores filled values without expiry.
	NeverExpire time.Duration = -1
	// maxRecacheSeconds is the largest R an early refresh sends: memcached reads a time over 30 days as
	// an absolute Unix time.
	maxRecacheSeconds = 30 * 24 * 60 * 60
	// maxFillTimes bounds the fill durations a client remembers for early refresh (fillTimes).
	maxFillTimes = 1 << 14
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
// timeout. Its error is returned to every coalesced caller and is never cached, except ErrNotFound with
// FillOptions.NegativeTTL.
type FillFunc func(ctx context.Context, key string) ([]byte, error)

// FillOptions tune GetOrFill. Zero fields take the client's defaults (Config.Fill), and those take
// the package defaults (so a call cannot turn off a boolean, or pick FallbackFill, that the client's
// defaults turned on). When callers coalesce, the options of the caller that started the fill apply.
type FillOptions struct {
	// TTL of the value written after a fill; 0 means 5 minutes, NeverExpire means no expiry.
	TTL time.Duration
	// TTLJitter shortens each written TTL by a random amount in [0, TTLJitter], so keys filled
	// together do not all expire together.
	TTLJitter time.Duration
	// Flags are the client flags stored with filled values.
	Flags uint32
	// FillTimeout bounds one fill call; 0 means 5 s. Keep it below leasecached's lease window (10 s by
	// default): the client warns once, through Config.Logf, when it is not.
	FillTimeout time.Duration
	// MaxWait bounds the time spent waiting (with backoff) for another process's fill. 0 means
	// FillTimeout plus one second: the longest that fill and its cache write may take, so that waiting
	// outlasts a slow fill instead of giving up on it.
	MaxWait time.Duration
	// AcceptStale returns the key's stale value at once on a hot miss instead of waiting.
	AcceptStale bool
	// Fallback is what to do when waiting runs out or the cache fails.
	Fallback FallbackMode
	// StaleWhileRefresh: when this caller is granted the lease and a stale value exists, return the
	// stale value at once and run the fill and cache write in the background (Close waits for it).
	// Implies AcceptStale.
	StaleWhileRefresh bool
	// NegativeTTL, when positive, caches a fill's ErrNotFound for this long: until it expires, GetOrFill
	// returns ErrNotFound for the key without calling fill. 0: "not found" is an error like any other.
	NegativeTTL time.Duration
	// EarlyRefresh, when positive, refreshes a value before it expires, so that readers of a hot key never
	// miss: probabilistic early expiration (XFetch, Vattani et al., VLDB 2015) with EarlyRefresh as its
	// beta (1 is the paper's choice; larger refreshes earlier). A reader refreshes when
	// now + delta*beta*(-ln(rand)) reaches the value's expiry, delta being how long the key's last fill in
	// this process took (for a key another process filled, the mean of this process's fills); the server, which holds the expiry, decides (memcached's mg R<seconds>, on
	// leasecached too) and hands the refresh to exactly one reader in the fleet. That reader, like
	// every other, gets the current value at once; the fill and its conditional write run in the
	// background (FillTimeout bounds the fill; Close waits). Expiry is counted in whole seconds, so a key
	// read at least once a second is refreshed within its last second at the latest. Off behind a proxy
	// that speaks only the classic commands (doc/leases.md, "A client's side"). 0: off.
	EarlyRefresh float64
}

func (o FillOptions) withDefaults() FillOptions {
	if o.TTL == 0 {
		o.TTL = defaultFillTTL
	}
	if o.FillTimeout <= 0 {
		o.FillTimeout = defaultFillTimeout
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
	if o.NegativeTTL == 0 {
		o.NegativeTTL = def.NegativeTTL
	}
	if o.EarlyRefresh == 0 {
		o.EarlyRefresh = def.EarlyRefresh
	}
	o.AcceptStale = o.AcceptStale || def.AcceptStale
	o.StaleWhileRefresh = o.StaleWhileRefresh || def.StaleWhileRefresh
	if o.Fallback == FallbackFill {
		o.Fallback = def.Fallback
	}
	return o
}

// maxWait is MaxWait, or by default the longest another process's fill and cache write may take.
func (o *FillOptions) maxWait() time.Duration {
	if o.MaxWait > 0 {
		return o.MaxWait
	}
	return o.FillTimeout + cacheWriteTimeout
}

// vivifySeconds is the TTL of the empty item memcached's "mg N" creates for the caller that wins the
// key: it must outlive the fill and its write, or a second caller would win while the first still fills.
func (o *FillOptions) vivifySeconds() int64 {
	return int64((o.FillTimeout+cacheWriteTimeout+time.Second-1)/time.Second) + 1
}

// recacheSeconds is the R<seconds> of an early refresh (EarlyRefresh): XFetch's random lookahead
// x = delta*beta*(-ln(rand)), in the whole seconds the server counts expiry in. The server hands the
// refresh out when the item's remaining time in its whole seconds, r, is below R; the real remaining time
// is at most r, so R = floor(x) + 1 refreshes no earlier than XFetch would, up to a second later. R is at
// least 2, the item's last second: a key read at least once a second then never expires under its
// readers, however short its fills (and with no fill measured yet, that is when it is refreshed).
func (o *FillOptions) recacheSeconds(delta time.Duration) int64 {
	x := delta.Seconds() * o.EarlyRefresh * -math.Log(1-rand.Float64())
	if x >= maxRecacheSeconds {
		return maxRecacheSeconds
	}
	return max(int64(x)+1, 2)
}

// fillTimes remembers how long each key's last fill took in this process (XFetch's delta), for early
// refresh, and a moving mean of all of them: a key this process has not filled (another process did)
// is taken to fill like the others, which is better than 0 for a slow source. Bounded by maxFillTimes
// keys (when full it starts again; the mean stays).
type fillTimes struct {
	mu   sync.Mutex
	m    map[string]time.Duration
	mean time.Duration // exponentially weighted, 1/8 to each new fill
}

func (f *fillTimes) get(key string) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if d, ok := f.m[key]; ok {
		return d
	}
	return f.mean
}

func (f *fillTimes) put(key string, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil || len(f.m) >= maxFillTimes {
		f.m = make(map[string]time.Duration)
	}
	f.m[key] = d
	if f.mean == 0 {
		f.mean = d
	} else {
		f.mean += (d - f.mean) / 8
	}
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
	SourceFill                       // this process's fill (cached unless the cache refused the write)
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

// ErrFillPanicked wraps a panic raised by a FillFunc: the panic is recovered on the fill's goroutine, the
// key is given back as for any failed fill, and every coalesced caller gets this error.
var ErrFillPanicked = errors.New("clientlib: fill panicked")

// ErrNotFound is what a FillFunc returns (or wraps) when the source of truth has no value for the key.
// GetOrFill returns it when the fill says so, and, with FillOptions.NegativeTTL, when a cached "not found"
// is read.
var ErrNotFound = errors.New("clientlib: not found")

// A cached "not found" (FillOptions.NegativeTTL) is this value stored with these client flags. GetOrFill
// reads the pair as ErrNotFound and never caches a filled value equal to it, so no value it stored is
// mistaken for one; other writers must not store this pair (doc/leases.md, "A client's side").
const negativeFlags uint32 = 0xFFFFFFFF

var negativeValue = []byte("\x00clientlib:not-found\x00")

func isNegative(data []byte, flags uint32) bool {
	return flags == negativeFlags && bytes.Equal(data, negativeValue)
}

// GetOrFill returns key's value from the cache or, on a miss, from fill, so that a fleet of processes runs
// one fill per key per expiry. It speaks what the key's server offers, learned once per server
// (doc/leases.md, "A client's side"): leasecached's leases (lease-get, lease-set), memcached 1.6's meta
// commands (mg with N, ms with C), or, through twemproxy or an older memcached, gets and set, which
// protect the source within this process only:
//
//  1. Concurrent callers in this process share one execution (single-flight) and all get its result
//     or its error.
//  2. A hit is returned.
//  3. This process won the key (a lease, or meta's W flag): run fill under FillTimeout, write the result
//     conditionally (lease-set with the token, ms with the CAS), return it. A refused write (the key was
//     written or deleted meanwhile) still returns the value, uncached. A fill that fails, panics (the
//     panic is recovered: ErrFillPanicked), times out, or returns a value the cache cannot hold gives the
//     key back at once, so that the next caller, in any process, fills without waiting.
//  4. Another process holds the key: return the stale value if AcceptStale and there is one; else sleep
//     with jittered exponential backoff and ask again, for at most MaxWait, then apply the Fallback mode.
//
// ctx bounds this caller's wait. Each cache request of the execution is bounded by half the time its
// first caller had left (and by Config.Timeout), so that when the cache does not answer, the fallback fill
// still has time within the caller's deadline. Once started, a fill runs to completion (bounded by
// FillTimeout) even if its callers leave, because it holds the key for every other process.
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
	budget := c.cfg.Timeout
	if d, ok := ctx.Deadline(); ok {
		budget = min(budget, time.Until(d)/2)
	}
	v, joined, err := c.flights.do(ctx, key, func(fctx context.Context) (Value, error) {
		x := &execution{c: c, ctx: fctx, budget: budget, key: key, fill: fill, o: &o}
		return x.run()
	})
	if joined {
		c.counters.callersCoalesced.Add(1)
	}
	return v, err
}

// execution is one single-flight run of GetOrFill for a key.
type execution struct {
	c      *Client
	ctx    context.Context // cancelled when every caller has left
	budget time.Duration   // bound of each cache request (see GetOrFill)
	srv    *server
	key    string
	fill   FillFunc
	o      *FillOptions
}

// claim is an execution's right to refill its key: a lease token (leases), the CAS of the item whose
// recache flag W it won (meta; stale when that item was marked stale, X; early when it is a live value
// won for an early refresh, on memcached or leasecached), or nothing (classic).
type claim struct {
	proto protocol
	token uint64
	stale bool
	early bool
}

func (x *execution) run() (Value, error) {
	srv, err := x.c.pick(x.key)
	if err != nil {
		return x.fallback(err)
	}
	x.srv = srv
	cctx, cancel := x.cacheCtx()
	p, err := x.c.capabilities(cctx, srv)
	cancel()
	switch {
	case err != nil:
		return x.cacheFailed(err)
	case p == protoLeases:
		return x.leases()
	case p == protoMeta:
		return x.meta()
	}
	return x.classic()
}

// cacheCtx bounds one cache request by the execution's budget (do applies Config.Timeout itself).
func (x *execution) cacheCtx() (context.Context, context.CancelFunc) {
	if x.budget >= x.c.cfg.Timeout {
		return x.ctx, func() {}
	}
	return context.WithTimeout(x.ctx, x.budget)
}

// leases is GetOrFill on leasecached: lease-get, and lease-set with the granted token. With
// EarlyRefresh, a hit is read with mg first (lease-get grants nothing on a hit): see early.
func (x *execution) leases() (Value, error) {
	c, o := x.c, x.o
	if o.EarlyRefresh > 0 {
		if done, v, err := x.early(); done {
			return v, err
		}
	}
	w := x.waiter()
	for {
		cctx, cancel := x.cacheCtx()
		res, err := c.leaseGet(cctx, x.srv, x.key)
		cancel()
		switch {
		case errors.Is(err, ErrLeasesUnsupported):
			// Another server answers on this address now: learn what it speaks next time.
			x.srv.proto.CompareAndSwap(int32(protoLeases), int32(protoUnknown))
			return x.classic()
		case err != nil:
			return x.cacheFailed(err)
		}
		switch res.Status {
		case LeaseHit:
			c.counters.cacheHits.Add(1)
			return cached(res.Item.Value, res.Item.Flags, SourceCache)
		case LeaseGranted:
			c.checkLeaseWindow(x.srv, o)
			cl := claim{proto: protoLeases, token: res.Token}
			if res.Item != nil && o.StaleWhileRefresh && x.refreshInBackground(cl) {
				return x.stale(res.Item.Value, res.Item.Flags)
			}
			return x.fillAndWrite(cl)
		}
		// Hot miss: someone else is filling.
		if res.Item != nil && (o.AcceptStale || o.StaleWhileRefresh) {
			return x.stale(res.Item.Value, res.Item.Flags)
		}
		if done, v, err := w.wait(x); done {
			return v, err
		}
	}
}

// early is the hit path of a leasecached GetOrFill with EarlyRefresh: "mg <key> v f c R<s>" returns a
// live value and, to the one reader the server picks, the recache flag W (later readers see Z with the
// value): that reader refreshes in the background. done is false on a miss: the caller then asks with
// lease-get.
func (x *execution) early() (done bool, v Value, err error) {
	c := x.c
	get := MetaFlags{}.ReturnValue().ReturnFlags().ReturnCAS().Recache(x.o.recacheSeconds(c.fills.get(x.key)))
	cctx, cancel := x.cacheCtx()
	res, err := c.metaOn(cctx, x.srv, "mg", x.key, nil, false, get, "EN")
	cancel()
	switch {
	case errors.Is(err, ErrCacheMiss), errors.Is(err, ErrClientError):
		return false, Value{}, nil
	case err != nil:
		v, err = x.cacheFailed(err)
		return true, v, err
	}
	c.counters.cacheHits.Add(1)
	if res.Won() {
		x.refreshEarly(res.CAS())
	}
	v, err = cached(res.Value, res.ClientFlags(), SourceCache)
	return true, v, err
}

// refreshEarly starts the background refresh of a live value whose recache flag this reader won.
func (x *execution) refreshEarly(cas uint64) {
	if x.refreshInBackground(claim{proto: protoMeta, token: cas, early: true}) {
		x.c.counters.earlyRefreshes.Add(1)
	}
}

// placeholder reports whether an mg reply is the empty item "mg ... N" created (and not a value): empty,
// with flags 0, not marked stale. A value stored empty with flags 0 looks the same, and is then treated
// as one: its readers wait for the refill, or its winner refills in the foreground.
func placeholder(res *MetaResult) bool {
	return len(res.Value) == 0 && res.ClientFlags() == 0 && !res.Stale()
}

// meta is GetOrFill on memcached 1.6: "mg <key> v f c N<ttl>" creates an empty item on a miss and gives
// its first reader the recache flag W (later readers see Z, and X on an item marked stale); the winner
// fills and writes with "ms <key> <len> C<cas> T<ttl> F<flags>", which a write or delete since refuses.
// With EarlyRefresh the read also carries R<s>: a live value's reader that wins W returns the value and
// refreshes it in the background. Readers that see Z with a live value return it, with or without
// EarlyRefresh (another process may be refreshing it early).
func (x *execution) meta() (Value, error) {
	c, o := x.c, x.o
	get := MetaFlags{}.ReturnValue().ReturnFlags().ReturnCAS().Vivify(o.vivifySeconds())
	if o.EarlyRefresh > 0 {
		get = get.Recache(o.recacheSeconds(c.fills.get(x.key)))
	}
	w := x.waiter()
	for {
		cctx, cancel := x.cacheCtx()
		res, err := c.metaOn(cctx, x.srv, "mg", x.key, nil, false, get, "EN")
		cancel()
		if err != nil {
			if errors.Is(err, ErrClientError) { // mg refused: learn what the server speaks next time
				x.srv.proto.CompareAndSwap(int32(protoMeta), int32(protoUnknown))
			}
			// A miss (EN) means the server could not create the item: nobody holds the key.
			return x.cacheFailed(err)
		}
		switch {
		case !res.Stale() && !placeholder(res):
			// A live value: the answer. W: this reader won its early refresh (only R hands W out for a
			// live value); Z: another reader's early refresh runs, this process's or not.
			c.counters.cacheHits.Add(1)
			if res.Won() {
				x.refreshEarly(res.CAS())
			}
			return cached(res.Value, res.ClientFlags(), SourceCache)
		case res.Won():
			cl := claim{proto: protoMeta, token: res.CAS(), stale: res.Stale()}
			if cl.stale && o.StaleWhileRefresh && x.refreshInBackground(cl) {
				return x.stale(res.Value, res.ClientFlags())
			}
			return x.fillAndWrite(cl)
		case !res.AlreadyWon():
			c.counters.cacheHits.Add(1)
			return cached(res.Value, res.ClientFlags(), SourceCache)
		}
		// Z: someone else is filling. X: the value is stale (without X it is the empty placeholder).
		if res.Stale() && (o.AcceptStale || o.StaleWhileRefresh) {
			return x.stale(res.Value, res.ClientFlags())
		}
		if done, v, err := w.wait(x); done {
			return v, err
		}
	}
}

// classic is GetOrFill on a server with neither leases nor meta commands: gets, else fill and set.
func (x *execution) classic() (Value, error) {
	cctx, cancel := x.cacheCtx()
	it, err := x.c.getOn(cctx, x.srv, "gets ", x.key, false, 0)
	cancel()
	switch {
	case err == nil:
		x.c.counters.cacheHits.Add(1)
		return cached(it.Value, it.Flags, SourceCache)
	case !errors.Is(err, ErrCacheMiss):
		return x.cacheFailed(err)
	}
	return x.fillAndWrite(claim{proto: protoClassic})
}

// waiter paces the hot-miss waits of one execution.
type waiter struct {
	until   time.Time
	backoff time.Duration
}

func (x *execution) waiter() *waiter {
	return &waiter{until: time.Now().Add(x.o.maxWait()), backoff: backoffStart}
}

// wait sleeps before the next try. When the wait has run out it applies the fallback mode instead, and
// when every caller has left it stops: either way done is true and v, err are the execution's result.
func (w *waiter) wait(x *execution) (done bool, v Value, err error) {
	left := time.Until(w.until)
	if left <= 0 {
		v, err = x.fallback(ErrLeaseWaitExhausted)
		return true, v, err
	}
	sleep := min(rand.N(w.backoff+1), left)
	w.backoff = min(w.backoff*2, backoffCap)
	x.c.counters.hotMissWaits.Add(1)
	if err := sleepCtx(x.ctx, sleep); err != nil {
		return true, Value{}, err
	}
	return false, Value{}, nil
}

// cached is the result of a value read from the cache: a cached "not found" is ErrNotFound.
func cached(data []byte, flags uint32, src Source) (Value, error) {
	if isNegative(data, flags) {
		return Value{Source: src}, ErrNotFound
	}
	return Value{Data: data, Flags: flags, Source: src}, nil
}

func (x *execution) stale(data []byte, flags uint32) (Value, error) {
	x.c.counters.staleServed.Add(1)
	return cached(data, flags, SourceStale)
}

// refreshInBackground runs the fill and write of cl on a goroutine Close waits for; false if the client
// is closing (the caller then fills in the foreground).
func (x *execution) refreshInBackground(cl claim) bool {
	bg := *x
	bg.ctx = context.WithoutCancel(x.ctx) // the refresh outlives this execution's callers
	if !x.c.spawn(&x.c.refreshes, func() { _, _ = bg.fillAndWrite(cl) }) {
		return false
	}
	x.c.counters.backgroundRefreshes.Add(1)
	return true
}

// fillAndWrite runs fill as the key's holder and caches the result under cl: the value, or with
// NegativeTTL a "not found"; a fill that failed gives the key back.
func (x *execution) fillAndWrite(cl claim) (Value, error) {
	c, o := x.c, x.o
	start := time.Now()
	data, err := c.runFill(x.ctx, x.key, x.fill, o)
	if err == nil && o.EarlyRefresh > 0 {
		c.fills.put(x.key, time.Since(start))
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(x.ctx), cacheWriteTimeout)
	defer cancel()
	switch {
	case err != nil && o.NegativeTTL > 0 && errors.Is(err, ErrNotFound):
		x.write(wctx, cl, &Item{Key: x.key, Value: negativeValue, Flags: negativeFlags, TTL: o.NegativeTTL})
		return Value{Source: SourceFill}, err
	case err != nil:
		x.giveBack(wctx, cl)
		return Value{}, err
	case isNegative(data, o.Flags):
		x.giveBack(wctx, cl) // it would read back as "not found"
	default:
		x.write(wctx, cl, &Item{Key: x.key, Value: data, Flags: o.Flags, TTL: o.ttl()})
	}
	return Value{Data: data, Flags: o.Flags, Source: SourceFill}, nil
}

// write caches it under cl and counts the outcome. A write refused because cl was lost (the key was
// written or deleted meanwhile, or the claim lapsed) changes nothing; any other failure (too large for
// the cache, a server or network error) may leave cl held, so it is given back. Errors are not the
// caller's problem: it has its value.
func (x *execution) write(ctx context.Context, cl claim, it *Item) {
	c := x.c
	var err error
	switch cl.proto {
	case protoLeases:
		err = c.leaseSet(ctx, x.srv, it, cl.token)
	case protoMeta:
		if len(it.Value) > c.cfg.MaxValueSize {
			err = ErrValueTooLarge
			break
		}
		f := MetaFlags{}.CompareCAS(cl.token).SetTTL(exptime(it.TTL, c.now)).SetClientFlags(it.Flags)
		_, err = c.metaOn(ctx, x.srv, "ms", it.Key, it.Value, true, f, "HD")
	default:
		_ = c.storeOn(ctx, x.srv, "set", it, 0)
		return
	}
	switch {
	case err == nil:
		c.counters.leaseSetsStored.Add(1)
	case errors.Is(err, ErrNotStored), errors.Is(err, ErrCASConflict), errors.Is(err, ErrCacheMiss):
		c.counters.leaseSetsRejected.Add(1)
	default:
		x.giveBack(ctx, cl)
	}
}

// giveBack releases cl at once, so that the next caller, in any process, fills without waiting for it
// to lapse (doc/leases.md, "A client's side"):
//   - leases: "delete <key>", which cancels the key's lease whatever its outcome (rule 3) and leaves its
//     stale value in place (rule 4);
//   - meta: "md <key> C<cas>" removes the empty item mg created; for a key won on an item marked stale,
//     "md <key> I C<cas>" keeps the stale value and lets the next reader win. The CAS makes either a
//     no-op if the key was written meanwhile;
//   - classic: nothing is held;
//   - an early refresh: nothing either. Its value stays and expires as any other; the recache flag it
//     won stays on that item, so the key is refilled through the miss path after it expires.
func (x *execution) giveBack(ctx context.Context, cl claim) {
	c := x.c
	if cl.early {
		return
	}
	switch cl.proto {
	case protoLeases:
		_ = c.simpleOn(ctx, x.srv, x.key, "delete ", false, 0, replyDeleted)
	case protoMeta:
		f := MetaFlags{}.CompareCAS(cl.token)
		if cl.stale {
			f = f.Invalidate()
		}
		_, _ = c.metaOn(ctx, x.srv, "md", x.key, nil, false, f, "HD")
	}
}

// cacheFailed handles a cache request that failed: the error itself if every caller has left, else the
// fallback mode.
func (x *execution) cacheFailed(err error) (Value, error) {
	if x.ctx.Err() != nil {
		return Value{}, err
	}
	return x.fallback(err)
}

// fallback applies the fallback mode after cause (waiting ran out, or the cache failed).
func (x *execution) fallback(cause error) (Value, error) {
	x.c.counters.fallbacks.Add(1)
	if x.o.Fallback == FallbackError {
		return Value{}, cause
	}
	data, err := x.c.runFill(x.ctx, x.key, x.fill, x.o)
	if err != nil {
		return Value{}, err
	}
	return Value{Data: data, Flags: x.o.Flags, Source: SourceFallback}, nil
}

// checkLeaseWindow warns once, through Config.Logf, when a fill may outlast the lease it holds: its
// lease-set would then be refused, and another process may be granted the key meanwhile.
func (c *Client) checkLeaseWindow(srv *server, o *FillOptions) {
	w := time.Duration(srv.leaseWindow.Load())
	if w <= 0 || o.FillTimeout <= w || c.cfg.Logf == nil || c.warned.Swap(true) {
		return
	}
	c.cfg.Logf("clientlib: FillTimeout %v exceeds the lease window %v of %s: a fill slower than the window "+
		"is not cached and the key may be filled twice; keep FillTimeout below it (doc/leases.md)", o.FillTimeout, w, srv.addr)
}

// runFill calls fill under FillTimeout, detached from cancellation (the fill serves every coalesced
// caller, and holds the key for the fleet). A fill that ignores its context is abandoned at the timeout:
// its goroutine finishes on its own and its result is dropped. A panic is recovered on that goroutine.
func (c *Client) runFill(ctx context.Context, key string, fill FillFunc, o *FillOptions) ([]byte, error) {
	c.counters.fillsStarted.Add(1)
	start := time.Now()
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
				ch <- result{err: fmt.Errorf("%w: fill of %q: %v", ErrFillPanicked, key, p)}
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
	if r.err != nil && !errors.Is(r.err, ErrNotFound) {
		c.counters.fillErrors.Add(1)
	}
	c.observeFill(ctx, 1, start, r.err)
	return r.data, r.err
}

// observeFill tells Config.Observe about a fill of n keys that began at start.
func (c *Client) observeFill(ctx context.Context, n int, start time.Time, err error) {
	if c.cfg.Observe == nil {
		return
	}
	if errors.Is(err, ErrNotFound) {
		err = nil // an answer
	}
	c.cfg.Observe(ctx, Event{Op: "fill", Keys: n, Start: start, Duration: time.Since(start), Err: err})
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
