package shard

import "github.com/leasecached/leasecached/slab"

// MetaGetRequest is mg's item semantics (the reply flags are the server's business).
type MetaGetRequest struct {
	// Ops are the T, N and R flags in request order, up to the first over-long opaque if any.
	Ops ExpOps
	// Vivify is N anywhere in the request: on a miss, link an empty item (flags 0) and hand this
	// caller the recache token.
	Vivify bool
	// NoUpdate is u: leave the fetched bit, last-access time and CLOCK bit alone.
	NoUpdate bool
	// Locked says a flag made memcached take the item lock (T, N, R, l, h): it then bumps the item
	// only after building the reply, so h and l show the state before this read, and an aborted
	// request bumps nothing.
	Locked bool
	// Aborted says the reply will be an error (an opaque over memcached's limit): the ops still
	// apply, as memcached applies the flags met before the bad one, but no token is handed out.
	Aborted bool
	// Value asks for the value to be appended to dst.
	Value bool
}

// MetaGetResult describes the item an mg found or created.
type MetaGetResult struct {
	Hit     bool // an item was found or created
	Created bool // N created it
	Info    Info // after the ops
	TTL     TTLs
	// State before this request touched it, as h, l, Z and X report it.
	Fetched   bool   // h
	Idle      uint32 // l: seconds since the last access
	TokenSent bool   // Z: someone already holds the recache token
	Stale     bool   // X: md I marked the item stale
	KeyBinary bool   // the key was stored with b: k shows it in base64
	Won       bool   // W: this caller gets the recache token
}

// MetaGet is mg: look key up (creating it with Vivify), apply the exptime ops in order, decide the
// recache token (W/Z/X), bump the item unless NoUpdate, and append the value to dst if asked. A
// vivified item is a read, not a write: it leaves the key's lease alone.
func (s *Store) MetaGet(dst, key []byte, req *MetaGetRequest) ([]byte, MetaGetResult) {
	var res MetaGetResult
	if !validKey(key) {
		return dst, res
	}
	sh, h, now := s.lockKey(key)
	defer sh.mu.Unlock()
	ref, b := sh.find(h, key, now)
	if ref == slab.NilRef {
		sh.countMissCause()
		if !req.Vivify {
			return dst, res
		}
		if ref, b = sh.vivify(h, key, req.Ops.applied(0, true, now), now); ref == slab.NilRef {
			return dst, res // no memory: memcached answers a plain miss
		}
		res.Created = true
	}
	res.Hit = true
	meta := itemMeta(b)
	res.Fetched = b[offState]&flagFetched != 0
	res.Idle = s.rel(now) - s.rel(int64(itemTime(b)))
	res.TokenSent = meta&metaTokenSent != 0
	res.Stale = meta&metaStale != 0
	res.KeyBinary = meta&metaKeyBinary != 0

	exp := itemExp(b)
	if res.Created {
		exp = 0 // t before the ops: the item as N makes it, which the ops then give its exptime
	}
	won := false
	res.TTL[0] = s.ttl(exp, now)
	for i, op := range req.Ops.ops[:req.Ops.n] {
		switch op.Kind {
		case ExpTouch:
			exp = absExptime(op.Exptime, now)
		case ExpVivify:
			if res.Created {
				exp = absExptime(op.Exptime, now)
				won = true
				if s.Herd() && sh.leases.Valid(h, s.nowNano()) {
					// With grace or hold, the key's refiller holds its lease (a plain reader or a
					// lease-get): the creator is told someone else refills (Z), as a second reader of
					// the item would be (doc/leases.md, "Grace and hold").
					won, res.TokenSent = false, true
					sh.setTokenSent(ref, b)
				}
			}
		case ExpRecache:
			// Only an item that expires before the recache time, and whose token nobody holds yet.
			if !res.TokenSent && !res.Created && exp != 0 && s.rel(int64(exp)) < s.rel(int64(absExptime(op.Exptime, now))) {
				won = true
			}
		}
		res.TTL[i+1] = s.ttl(exp, now)
	}
	if exp != itemExp(b) {
		if ref, b = sh.setExp(h, ref, b, exp, now); ref == slab.NilRef {
			return dst, MetaGetResult{} // no memory to give the item an exptime: it was dropped
		}
		sh.mutate(h, ref, ref, causeTouch, now)
	}
	if res.Stale && !res.TokenSent {
		won = true // a stale item hands its first reader the token to refresh it
	}
	if !req.Aborted {
		res.Won = won
		if won {
			sh.setTokenSent(ref, b)
		}
	}
	if !req.NoUpdate && !(req.Aborted && req.Locked) {
		sh.bumpRead(ref, b, now)
	}
	res.Info = infoOf(b)
	if req.Value {
		dst = appendValue(sh.al, dst, b)
	}
	return dst, res
}

// vivify links an empty item for key with exptime exp (mg N after a miss; ExpOps.applied) and returns it, or
// NilRef without memory.
func (sh *shard) vivify(h uint64, key []byte, exp uint32, now int64) (slab.Ref, []byte) {
	nu, nb, ok := sh.allocItem(len(key), 0, layoutOf(0, exp, 0), now)
	if !ok {
		return slab.NilRef, nil
	}
	writeHeader(nb, sh.st.cas.Add(1), exp, uint32(now), 0, key, 0, 0)
	nb[offState] &^= flagPinned
	sh.mutate(h, slab.NilRef, nu, causeVivify, now)
	return nu, nb
}

// setTokenSent records that a reader of live item ref (head chunk b) was handed its token (W; the next see
// Z). The bit is outside the seal and written in place, as memcached's ITEM_TOKEN_SENT is; a live copy's
// sync must still take it to DIR, or a reboot hands the token out again (doc/design/restart-live.md rule 10).
func (sh *shard) setTokenSent(ref slab.Ref, b []byte) {
	b[offMeta] |= metaTokenSent
	sh.al.Wrote(ref, offMeta+1)
}
