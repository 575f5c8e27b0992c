package shard

import "github.com/leasecached/leasecached/slab"

// LeaseKind is what a lease-get found for one key (leases.md, "lease-get").
type LeaseKind uint8

const (
	LeaseHit     LeaseKind = iota // a fresh item: VALUE
	LeaseGranted                  // a miss, and this caller now holds the key's lease: LVALUE <token>
	LeaseHotMiss                  // a miss while another caller holds the lease: LVALUE 1
)

// LeaseResult describes a lease-get of one key. On a miss, Stale says whether the appended value is the
// key's stale value (with its flags in Info); without one nothing is appended and Info is zero.
type LeaseResult struct {
	Kind  LeaseKind
	Token uint64
	Info  Info
	Stale bool
}

// LeaseGet is lease-get for one key: on a hit it appends the value to dst like Get; on a miss it grants
// the key's lease or reports a hot miss, appending the stale value when one is held. The grant, the
// stale read and any concurrent write of the key are serialized by the shard lock.
func (s *Store) LeaseGet(dst, key []byte) ([]byte, LeaseResult) {
	if !validKey(key) {
		return dst, LeaseResult{Kind: LeaseHotMiss, Token: 1}
	}
	sh, h, now := s.lockKey(key)
	defer sh.mu.Unlock()
	kind, token, b := sh.leaseLookup(Hashed{Sum: h}, key, now)
	res := LeaseResult{Kind: kind, Token: token}
	if b != nil {
		res.Info, res.Stale = infoOf(b), kind != LeaseHit
		if res.Stale {
			res.Info.Exptime = 0 // the ghost's exptime is its stale deadline, not the item's
		}
		dst = appendValue(sh.al, dst, b)
	}
	return dst, res
}

// leaseLookup applies the lease-get rules to one key under the shard lock: a live item is a hit (and a
// read, so it is bumped); otherwise the key's lease is granted or the miss is hot, and the stale value, if
// one is held, is returned (and counted as served). b is the item to send, nil for a miss without one.
func (sh *shard) leaseLookup(k Hashed, key []byte, now int64) (kind LeaseKind, token uint64, b []byte) {
	h := k.Sum
	if ref, b := sh.findHinted(k, key, now); ref != slab.NilRef {
		sh.bumpRead(ref, b, now)
		return LeaseHit, 0, b
	}
	token, granted := sh.leases.Acquire(h, sh.st.nowNano())
	kind = LeaseHotMiss
	if granted {
		kind = LeaseGranted
	}
	if ref, g := sh.findGhost(h, key, now); ref != slab.NilRef {
		sh.leases.Counters.StaleServed++
		if granted {
			sh.claimGhost(g)
		}
		return kind, token, g
	}
	return kind, token, nil
}

// LeaseSet is lease-set: it stores the value as set does only if token is key's current valid lease,
// consuming it; otherwise NotStored and the cache is left exactly as it was.
func (s *Store) LeaseSet(key []byte, token uint64, flags uint32, exptime int64, value []byte) Result {
	if !validKey(key) {
		return NotStored
	}
	sh, h, now := s.lockKey(key)
	defer sh.mu.Unlock()
	if !sh.leases.Consume(h, token, s.nowNano()) {
		sh.leases.Counters.SetsRejected++
		return NotStored
	}
	res, _ := sh.storeItem(Hashed{Sum: h}, key, value, &storeReq{mode: ModeSet, flags: flags, exp: absExptime(exptime, now)}, now)
	if res == Stored {
		sh.leases.Counters.SetsStored++
	} else {
		sh.leases.Counters.SetsRejected++
	}
	return res
}

// Discard removes key's value without keeping it as a stale value: the server's answer to a set refused
// before it reached the store (too large), mirroring memcached's "avoid stale data" unlink.
func (s *Store) Discard(key []byte) {
	if !validKey(key) {
		return
	}
	sh, h, now := s.lockKey(key)
	sh.invalidateLeases(h, causeRejected)
	sh.dropStale(h, key, now)
	sh.mu.Unlock()
}
