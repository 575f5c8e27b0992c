package shard

import (
	"strconv"

	"github.com/leasecached/leasecached/slab"
)

// MetaArithRequest is ma's item semantics.
type MetaArithRequest struct {
	Incr  bool   // mode I/+ (else D/-)
	Delta uint64 // D, default 1 (the server fills it in)
	// Cas is C: when non-zero, a different item CAS answers Exists (memcached ignores C0).
	Cas uint64
	// Vivify is N: on a miss, create the item with Initial (J) as its value.
	Vivify  bool
	Initial uint64
	// Ops are the T and N flags in request order, up to the first over-long opaque if any.
	Ops ExpOps
}

// MetaArithResult is what ma did.
type MetaArithResult struct {
	// Result is Stored (the value changed, or was created with Created), NotFound, Exists,
	// NonNumeric or NoMemory.
	Result  Result
	Found   bool // the key existed (tells a failed vivify from a failed resize on NoMemory)
	Created bool
	Value   uint64
	Cas     uint64
	TTL     TTLs
}

// MetaArith is ma. It mirrors memcached 1.6.18 closely, quirks included: T and N apply in request
// order; when the new number is longer than the old value a new item replaces the old one and T is
// applied to the old one, so t shows the new TTL but the stored item keeps its exptime.
func (s *Store) MetaArith(key []byte, req *MetaArithRequest) MetaArithResult {
	var res MetaArithResult
	if !validKey(key) {
		res.Result = NotFound
		return res
	}
	sh, h, now := s.lockKey(key)
	defer sh.mu.Unlock()
	sh.invalidateLeases(h, causeStore)
	ref, b := sh.find(h, key, now)
	res.Found = ref != slab.NilRef
	var exp0 uint32 // the exptime before the ops, for t
	if res.Found {
		exp0 = itemExp(b)
	}
	switch {
	case ref == slab.NilRef && !req.Vivify:
		res.Result = NotFound
		return res
	case ref == slab.NilRef:
		if ref, b = sh.vivifyCounter(h, key, req.Initial, req.Ops.applied(0, true, now), now); ref == slab.NilRef {
			res.Result = NoMemory
			return res
		}
		res.Result, res.Created, res.Value, res.Cas = Stored, true, req.Initial, itemCas(b)
	default:
		// memcached checks for an empty or chunked value before the CAS.
		if itemVlen(b) == 0 || itemChained(b) {
			res.Result = NonNumeric
			return res
		}
		if req.Cas != 0 && req.Cas != itemCas(b) {
			res.Result = Exists
			return res
		}
		out := sh.arith(h, ref, b, req.Incr, req.Delta, req.Ops.applied(exp0, false, now), now)
		res.Result, res.Value, res.Cas = out.res, out.value, out.cas
		if out.res != Stored {
			return res
		}
	}
	exp := exp0
	res.TTL[0] = s.ttl(exp, now)
	for i, op := range req.Ops.ops[:req.Ops.n] {
		switch op.Kind {
		case ExpTouch:
			exp = absExptime(op.Exptime, now)
		case ExpVivify:
			if res.Created {
				exp = absExptime(op.Exptime, now)
			}
		}
		res.TTL[i+1] = s.ttl(exp, now)
	}
	return res
}

// vivifyCounter links a new item holding initial in decimal (ma N after a miss), flags 0, exptime exp
// (ExpOps.applied).
func (sh *shard) vivifyCounter(h uint64, key []byte, initial uint64, exp uint32, now int64) (slab.Ref, []byte) {
	var buf [maxCounterDigits]byte
	digits := strconv.AppendUint(buf[:0], initial, 10)
	nu, nb, ok := sh.allocItem(len(key), len(digits), layoutOf(0, exp, len(digits)), now)
	if !ok {
		return slab.NilRef, nil
	}
	writeHeader(nb, sh.st.cas.Add(1), exp, uint32(now), 0, key, len(digits), 0)
	copy(nb[dataOff(nb):], digits)
	nb[offState] &^= flagPinned
	sh.mutate(h, slab.NilRef, nu, causeStore, now)
	return nu, nb
}
