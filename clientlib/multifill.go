package clientlib

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// MultiFillFunc reads many keys' values from the source of truth at once (one query for many rows). It
// returns the values it found; a key it leaves out of the map is not found (ErrNotFound: absent from
// GetMultiOrFill's result, and cached as such with FillOptions.NegativeTTL). An error fails every key of
// the call and is never cached. It must honour ctx, which carries the fill timeout.
type MultiFillFunc func(ctx context.Context, keys []string) (map[string][]byte, error)

// GetMultiOrFill is GetOrFill for many keys at once: per server, one request for all its keys (a
// multi-key lease-get on leasecached, one "mg <key> v f c N<s>" per key written back to back on
// memcached 1.6, one gets behind twemproxy), servers in parallel; then one call of fill with every key
// this process won (or must fill after a cache failure), and the conditional writes, per server again
// in one round trip. Keys another process is filling are waited for, with the same backoff and MaxWait
// as GetOrFill, and asked for again together; any of them won then is filled by a further call of fill.
// Stale values, NegativeTTL and the Fallback mode apply per key as in GetOrFill. Keys that are being
// filled in this process already (by GetOrFill or another GetMultiOrFill) are not asked for again:
// their callers share the result, and concurrent callers of GetOrFill for a key of this batch share it
// too. EarlyRefresh does not apply here, and StaleWhileRefresh is AcceptStale (the key won on a stale
// value is filled before the call returns).
//
// The result maps each key that has a value to it; keys that are not found are absent. The error joins
// the distinct failures of the other keys (a fill's error once, however many keys it failed), or is the
// context's error if ctx ended first, with what had arrived by then in the map.
func (c *Client) GetMultiOrFill(ctx context.Context, keys []string, fill MultiFillFunc, opts *FillOptions) (map[string]Value, error) {
	for _, k := range keys {
		if !validKey(k) {
			return nil, ErrMalformedKey
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	o := c.cfg.Fill
	if opts != nil {
		o = opts.merge(c.cfg.Fill)
	}
	budget := c.cfg.Timeout
	if d, ok := ctx.Deadline(); ok {
		budget = min(budget, time.Until(d)/2)
	}

	g := &c.flights
	flights := make(map[string]*flight, len(keys))
	b := &batch{c: c, budget: budget, fill: fill, o: &o, own: make(map[string]*flight)}
	var run *flightRun
	g.mu.Lock()
	for _, k := range keys {
		if flights[k] != nil {
			continue
		}
		f, joined := g.m[k]
		if joined {
			c.counters.callersCoalesced.Add(1)
		} else {
			if run == nil {
				run = newRun(ctx)
			}
			f = g.add(k, run)
			b.own[k] = f
		}
		f.waiters++
		flights[k] = f
	}
	g.mu.Unlock()
	if run != nil {
		b.ctx = run.ctx
		owned := make([]string, 0, len(b.own))
		for k := range b.own {
			owned = append(owned, k)
		}
		go func() {
			defer run.cancel()
			b.run(owned)
		}()
	}

	out := make(map[string]Value, len(flights))
	var errs []error
	for k, f := range flights {
		select {
		case <-f.done:
		case <-ctx.Done():
			for k, f := range flights {
				g.leave(k, f)
			}
			return out, ctx.Err()
		}
		switch {
		case f.err == nil:
			out[k] = f.val
		case errors.Is(f.err, ErrNotFound):
		default:
			errs = appendNew(errs, f.err)
		}
	}
	return out, errors.Join(errs...)
}

// appendNew appends err unless errs holds it already.
func appendNew(errs []error, err error) []error {
	for _, e := range errs {
		if e == err {
			return errs
		}
	}
	return append(errs, err)
}

// batch is one GetMultiOrFill execution: it resolves the flights of the keys it owns.
type batch struct {
	c      *Client
	ctx    context.Context // cancelled when every caller of its keys has left
	budget time.Duration   // bound of each cache request (see GetOrFill)
	fill   MultiFillFunc
	o      *FillOptions

	mu  sync.Mutex
	own map[string]*flight // flights not resolved yet
}

// resolve hands key's flight its result.
func (b *batch) resolve(key string, v Value, err error) {
	b.mu.Lock()
	f := b.own[key]
	delete(b.own, key)
	b.mu.Unlock()
	if f != nil {
		b.c.flights.finish(key, f, v, err)
	}
}

// owns reports whether key still waits for its result from b.
func (b *batch) owns(key string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.own[key] != nil
}

// pend is a key of the batch between a lookup and its result.
type pend struct {
	key  string
	srv  *server
	cl   claim
	wait bool  // another process fills it: ask again
	err  error // why the cache could not be used (a fallback)
}

// run asks the cache for keys, fills what this process won or must fill, and waits for what another
// process fills, until every key has its result.
func (b *batch) run(keys []string) {
	defer func() {
		// Whatever is left (every caller left, or the client closed) ends with why.
		err := b.ctx.Err()
		if err == nil {
			err = ErrClosed
		}
		b.mu.Lock()
		left := make([]string, 0, len(b.own))
		for k := range b.own {
			left = append(left, k)
		}
		b.mu.Unlock()
		for _, k := range left {
			b.resolve(k, Value{}, err)
		}
	}()
	w := &waiter{until: time.Now().Add(b.o.maxWait()), backoff: backoffStart}
	for len(keys) > 0 {
		won, waiting, failed := b.lookup(keys)
		b.fillAndWrite(won, failed)
		if len(waiting) == 0 || b.ctx.Err() != nil {
			return
		}
		left := time.Until(w.until)
		if left <= 0 {
			for i := range waiting {
				waiting[i].err = ErrLeaseWaitExhausted
			}
			b.fillAndWrite(nil, waiting)
			return
		}
		sleep := min(rand.N(w.backoff+1), left)
		w.backoff = min(w.backoff*2, backoffCap)
		b.c.counters.hotMissWaits.Add(1)
		if sleepCtx(b.ctx, sleep) != nil {
			return
		}
		keys = keys[:0]
		for _, p := range waiting {
			keys = append(keys, p.key)
		}
	}
}

// lookup asks each key's server for keys, all of a server's keys in one round trip, servers in parallel.
// Hits and stale values are resolved; won keys are to be filled and written, waiting ones asked for
// again, failed ones (the cache could not be used) go to the fallback.
func (b *batch) lookup(keys []string) (won, waiting, failed []pend) {
	c := b.c
	r := c.ring.Load()
	byServer := make(map[*server][]string)
	for _, k := range keys {
		srv, err := r.pick(k)
		if err != nil {
			failed = append(failed, pend{key: k, err: err})
			continue
		}
		byServer[srv] = append(byServer[srv], k)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for srv, ks := range byServer {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ps []pend
			cctx, cancel := b.cacheCtx()
			p, err := c.capabilities(cctx, srv)
			if err == nil {
				switch p {
				case protoLeases:
					ps, err = b.lookupLeases(cctx, srv, ks)
				case protoMeta:
					ps, err = b.lookupMeta(cctx, srv, ks)
				default:
					ps, err = b.lookupClassic(cctx, srv, ks)
				}
			}
			cancel()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				// Keys already resolved (hits read before the failure) are left alone.
				for _, k := range ks {
					if b.owns(k) {
						failed = append(failed, pend{key: k, srv: srv, err: err})
					}
				}
				return
			}
			for _, p := range ps {
				switch {
				case p.err != nil:
					failed = append(failed, p)
				case p.wait:
					waiting = append(waiting, p)
				default:
					won = append(won, p)
				}
			}
		}()
	}
	wg.Wait()
	return won, waiting, failed
}

func (b *batch) cacheCtx() (context.Context, context.CancelFunc) {
	if b.budget >= b.c.cfg.Timeout {
		return b.ctx, func() {}
	}
	return context.WithTimeout(b.ctx, b.budget)
}

// hit resolves a key read from the cache (a cached "not found" is ErrNotFound).
func (b *batch) hit(key string, data []byte, flags uint32) {
	b.c.counters.cacheHits.Add(1)
	v, err := cached(data, flags, SourceCache)
	b.resolve(key, v, err)
}

// staleOK resolves a key with its stale value if the options accept one.
func (b *batch) staleOK(key string, data []byte, flags uint32) bool {
	if !b.o.AcceptStale && !b.o.StaleWhileRefresh {
		return false
	}
	b.c.counters.staleServed.Add(1)
	v, err := cached(data, flags, SourceStale)
	b.resolve(key, v, err)
	return true
}

// lookupLeases sends one "lease-get k1 k2 ..." (a line per maxKeysPerGet keys, written together) and
// reads a block per key, in order.
func (b *batch) lookupLeases(ctx context.Context, srv *server, keys []string) ([]pend, error) {
	c := b.c
	var out []pend
	err := c.do(ctx, srv, "lease-get", len(keys), func(cn *conn) error {
		out = out[:0]
		lines, unsupported := 0, false
		for start := 0; start < len(keys); start += maxKeysPerGet {
			cn.w.WriteString("lease-get")
			for _, k := range keys[start:min(start+maxKeysPerGet, len(keys))] {
				cn.w.WriteByte(' ')
				cn.w.WriteString(k)
			}
			cn.w.Write(crlf)
			lines++
		}
		if err := cn.send(lines); err != nil {
			return err
		}
		next := 0
		for ; lines > 0; lines-- {
			for {
				line, err := cn.readLine()
				if err != nil {
					return err
				}
				if bytes.Equal(line, replyEnd) {
					break
				}
				if bytes.Equal(line, lineError) { // this line's whole reply; the other lines' follow
					unsupported = true
					break
				}
				h, err := cn.parseValue(line, c.cfg.MaxValueSize)
				if err != nil {
					return err
				}
				if next >= len(keys) || string(h.key) != keys[next] {
					return cn.protoErr("lease-get reply out of order", line)
				}
				key := keys[next]
				next++
				h.key = nil
				data, err := cn.readData(h.size)
				if err != nil {
					return err
				}
				switch {
				case !h.lease:
					b.hit(key, data, h.flags)
				case h.cas > hotMissToken:
					out = append(out, pend{key: key, srv: srv, cl: claim{proto: protoLeases, token: h.cas}})
				case h.cas == hotMissToken:
					if h.size == 0 || !b.staleOK(key, data, h.flags) {
						out = append(out, pend{key: key, srv: srv, wait: true})
					}
				default:
					return cn.protoErr("lease-get token 0", line)
				}
			}
		}
		if unsupported {
			return ErrLeasesUnsupported
		}
		if next != len(keys) {
			return cn.protoErr("lease-get reply without a block for every key", nil)
		}
		return nil
	})
	if errors.Is(err, ErrLeasesUnsupported) {
		srv.proto.CompareAndSwap(int32(protoLeases), int32(protoUnknown))
	}
	return out, err
}

// lookupMeta sends "mg <key> v f c N<s>" for each key, back to back, and reads the replies in order.
func (b *batch) lookupMeta(ctx context.Context, srv *server, keys []string) ([]pend, error) {
	c := b.c
	flags := MetaFlags{}.ReturnValue().ReturnFlags().ReturnCAS().Vivify(b.o.vivifySeconds())
	var out []pend
	err := c.do(ctx, srv, "mg", len(keys), func(cn *conn) error {
		out = out[:0]
		for _, k := range keys {
			cn.w.WriteString("mg ")
			cn.w.WriteString(k)
			for _, t := range flags.toks {
				cn.w.WriteByte(' ')
				cn.w.WriteString(t)
			}
			cn.w.Write(crlf)
		}
		if err := cn.send(len(keys)); err != nil {
			return err
		}
		for _, k := range keys {
			res := &MetaResult{}
			if err := cn.readMeta(res, false, "", c.cfg.MaxValueSize); err != nil {
				if resumable(err) { // an error line for this key; the others still follow
					if errors.Is(err, ErrClientError) { // mg refused: learn what the server speaks next time
						srv.proto.CompareAndSwap(int32(protoMeta), int32(protoUnknown))
					}
					out = append(out, pend{key: k, srv: srv, err: err})
					continue
				}
				return err
			}
			switch {
			case res.Status != "VA":
				// EN: the server could not create the item, so nobody holds the key: the fallback.
				out = append(out, pend{key: k, srv: srv, err: ErrCacheMiss})
			case !res.Stale() && !placeholder(res), !res.Won() && !res.AlreadyWon():
				b.hit(k, res.Value, res.ClientFlags())
			case res.Won():
				out = append(out, pend{key: k, srv: srv, cl: claim{proto: protoMeta, token: res.CAS(), stale: res.Stale()}})
			case res.Stale() && b.staleOK(k, res.Value, res.ClientFlags()):
			default:
				out = append(out, pend{key: k, srv: srv, wait: true})
			}
		}
		return nil
	})
	return out, err
}

// lookupClassic sends gets for the keys; every miss is filled (nothing is held across processes).
func (b *batch) lookupClassic(ctx context.Context, srv *server, keys []string) ([]pend, error) {
	c := b.c
	got := make(map[string]*Item, len(keys))
	var mu sync.Mutex
	err := c.do(ctx, srv, "gets", len(keys), func(cn *conn) error {
		clear(got)
		return c.getBatch(cn, keys, got, &mu)
	})
	if err != nil {
		return nil, err
	}
	var out []pend
	for _, k := range keys {
		if it := got[k]; it != nil {
			b.hit(k, it.Value, it.Flags)
			continue
		}
		out = append(out, pend{key: k, srv: srv, cl: claim{proto: protoClassic}})
	}
	return out, nil
}

// fillAndWrite calls fill once for the keys won and the keys whose cache failed (the latter per the
// Fallback mode), writes what the won keys got (with their claims, a round trip per server), gives back
// the claims of keys that got nothing cacheable, and resolves every key.
func (b *batch) fillAndWrite(won, failed []pend) {
	c, o := b.c, b.o
	if len(failed) > 0 {
		c.counters.fallbacks.Add(uint64(len(failed)))
	}
	var toFill []pend
	toFill = append(toFill, won...)
	for _, p := range failed {
		if o.Fallback == FallbackError {
			b.resolve(p.key, Value{}, p.err)
			continue
		}
		p.cl = claim{} // not cached
		toFill = append(toFill, p)
	}
	if len(toFill) == 0 {
		return
	}
	keys := make([]string, len(toFill))
	for i, p := range toFill {
		keys[i] = p.key
	}
	data, err := c.runMultiFill(b.ctx, keys, b.fill, o)
	wctx, cancel := context.WithTimeout(context.WithoutCancel(b.ctx), cacheWriteTimeout)
	defer cancel()
	type result struct {
		v   Value
		err error
	}
	results := make(map[string]result, len(toFill))
	writes := make(map[*server][]write)
	var giveBack []pend
	for _, p := range toFill {
		d, found := data[p.key]
		src := SourceFill
		if p.cl.proto == protoUnknown {
			src = SourceFallback
		}
		switch {
		case err != nil:
			results[p.key] = result{err: err}
			giveBack = append(giveBack, p)
			continue
		case !found:
			results[p.key] = result{v: Value{Source: src}, err: ErrNotFound}
			if o.NegativeTTL > 0 && p.cl.proto != protoUnknown {
				writes[p.srv] = append(writes[p.srv], write{p: p, it: Item{Key: p.key, Value: negativeValue, Flags: negativeFlags, TTL: o.NegativeTTL}})
			} else {
				giveBack = append(giveBack, p)
			}
			continue
		}
		results[p.key] = result{v: Value{Data: d, Flags: o.Flags, Source: src}}
		switch {
		case p.cl.proto == protoUnknown:
		case isNegative(d, o.Flags), len(d) > c.cfg.MaxValueSize:
			giveBack = append(giveBack, p)
		default:
			writes[p.srv] = append(writes[p.srv], write{p: p, it: Item{Key: p.key, Value: d, Flags: o.Flags, TTL: o.ttl()}})
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for srv, ws := range writes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lost := b.writeAll(wctx, srv, ws)
			mu.Lock()
			giveBack = append(giveBack, lost...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, p := range giveBack {
		if p.cl.proto == protoLeases || p.cl.proto == protoMeta {
			x := &execution{c: c, ctx: wctx, srv: p.srv, key: p.key, o: o}
			x.giveBack(wctx, p.cl)
		}
	}
	for k, r := range results {
		b.resolve(k, r.v, r.err)
	}
}

// write is one conditional cache write of a batch.
type write struct {
	p  pend
	it Item
}

// writeAll writes ws to srv in one round trip: lease-set with each token, ms with each CAS, or set. It
// returns the writes whose claim may still be held (a failure other than the claim being lost).
func (b *batch) writeAll(ctx context.Context, srv *server, ws []write) (lost []pend) {
	c := b.c
	op := "set"
	switch ws[0].p.cl.proto {
	case protoLeases:
		op = "lease-set"
	case protoMeta:
		op = "ms"
	}
	errs := make([]error, len(ws))
	err := c.do(ctx, srv, op, len(ws), func(cn *conn) error {
		for _, w := range ws {
			it := &w.it
			exp := exptime(it.TTL, c.now)
			switch w.p.cl.proto {
			case protoLeases:
				cn.writeStorageLine("lease-set", it.Key, w.p.cl.token, it.Flags, exp, len(it.Value))
			case protoMeta:
				cn.w.WriteString("ms ")
				cn.w.WriteString(it.Key)
				cn.w.WriteByte(' ')
				cn.writeUint(uint64(len(it.Value)))
				cn.w.WriteString(" C")
				cn.writeUint(w.p.cl.token)
				cn.w.WriteString(" T")
				cn.writeInt(exp)
				cn.w.WriteString(" F")
				cn.writeUint(uint64(it.Flags))
			default:
				cn.writeStorageLine("set", it.Key, 0, it.Flags, exp, len(it.Value))
			}
			cn.w.Write(crlf)
			cn.writeData(it.Value)
		}
		if err := cn.send(len(ws)); err != nil {
			return err
		}
		for i, w := range ws {
			var err error
			if w.p.cl.proto == protoMeta {
				res := &MetaResult{}
				if err = cn.readMeta(res, false, "", c.cfg.MaxValueSize); err == nil {
					err = metaStatusError(res.Status)
				}
			} else {
				err = cn.readStoreReply()
			}
			if !resumable(err) {
				return err
			}
			errs[i] = err
		}
		return nil
	})
	for i, w := range ws {
		e := errs[i]
		if err != nil {
			e = err
		}
		switch {
		case w.p.cl.proto == protoClassic:
		case e == nil:
			c.counters.leaseSetsStored.Add(1)
		case errors.Is(e, ErrNotStored), errors.Is(e, ErrCASConflict), errors.Is(e, ErrCacheMiss):
			c.counters.leaseSetsRejected.Add(1)
		default:
			lost = append(lost, w.p)
		}
	}
	return lost
}

// runMultiFill calls fill for keys under FillTimeout, as runFill calls a FillFunc: detached from
// cancellation, abandoned at the timeout, a panic recovered.
func (c *Client) runMultiFill(ctx context.Context, keys []string, fill MultiFillFunc, o *FillOptions) (map[string][]byte, error) {
	c.counters.fillsStarted.Add(1)
	start := time.Now()
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.FillTimeout)
	defer cancel()
	type result struct {
		data map[string][]byte
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				ch <- result{err: fmt.Errorf("%w: fill of %d keys: %v", ErrFillPanicked, len(keys), p)}
			}
		}()
		d, err := fill(fctx, keys)
		ch <- result{d, err}
	}()
	var r result
	select {
	case r = <-ch:
	case <-fctx.Done():
		r.err = fmt.Errorf("clientlib: fill of %d keys: %w", len(keys), fctx.Err())
	}
	if r.err != nil {
		c.counters.fillErrors.Add(1)
	}
	c.observeFill(ctx, len(keys), start, r.err)
	return r.data, r.err
}
