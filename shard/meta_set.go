package shard

import "github.com/leasecached/leasecached/slab"

// MetaSetRequest is ms's item semantics. The server maps ms's M mode and C flag onto Mode the way
// memcached 1.6.18 does: set and replace with a CAS become ModeCas; add ignores the CAS; append and
// prepend compare it when non-zero.
type MetaSetRequest struct {
	Mode    Mode
	Flags   uint32
	Exptime int64  // protocol exptime (T), 0 when absent
	Cas     uint64 // C
	// Invalidate is I: in ModeCas a CAS older than the item's still stores, keeping the item's
	// exptime and marking the new value stale.
	Invalidate bool
	// KeyBinary is b: the key arrived base64-encoded, so k must show it encoded again.
	KeyBinary bool
}

// MetaSet is ms: it reports the result and, when Stored, the new item's CAS (0 otherwise).
func (s *Store) MetaSet(key, value []byte, req *MetaSetRequest) (Result, uint64) {
	if !validKey(key) {
		return NotStored, 0
	}
	h := Hash(key)
	sh := s.shardOf(h)
	now := s.now()
	rq := storeReq{mode: req.Mode, flags: req.Flags, exp: absExptime(req.Exptime, now), cas: req.Cas,
		stale: req.Invalidate && req.Mode == ModeCas}
	if req.KeyBinary {
		rq.meta = metaKeyBinary
	}
	sh.mu.Lock()
	res, cas := sh.storeItem(Hashed{Sum: h}, key, value, &rq, now)
	sh.mu.Unlock()
	return res, cas
}

// MetaDeleteRequest is md's item semantics.
type MetaDeleteRequest struct {
	HasCas bool   // C was given: delete only if the item's CAS equals Cas (C0 never matches)
	Cas    uint64 // C
	// Invalidate is I: instead of removing the item, mark it stale, give it a new CAS, release its
	// recache token and, with SetTTL, give it Exptime.
	Invalidate bool
	SetTTL     bool  // T was given
	Exptime    int64 // protocol exptime (T)
}

// MetaDelete is md: Deleted (removed, or marked stale with Invalidate), NotFound, or Exists (CAS
// mismatch). Like delete it cancels the key's lease whatever the outcome (leases.md rule 3), and a
// removed value is kept as a stale value for lease-get like any deleted one.
func (s *Store) MetaDelete(key []byte, req *MetaDeleteRequest) Result {
	if !validKey(key) {
		return NotFound
	}
	sh, h, now := s.lockKey(key)
	defer sh.mu.Unlock()
	sh.invalidateLeases(h, causeDelete)
	ref, b := sh.find(h, key, now)
	if ref == slab.NilRef {
		return NotFound
	}
	if req.HasCas && req.Cas != itemCas(b) {
		return Exists
	}
	if !req.Invalidate {
		sh.mutate(h, ref, slab.NilRef, causeDelete, now)
		return Deleted
	}
	exp := itemExp(b)
	if req.SetTTL {
		exp = absExptime(req.Exptime, now)
	}
	mark := func(b []byte) {
		setItemCas(b, s.cas.Add(1)) // first: the sealed CAS, so that the item is torn until sealed again (undo.go)
		b[offMeta] = b[offMeta]&^metaTokenSent | metaStale
	}
	// The mark and the exptime are one change: a kill never leaves the new exptime on an unmarked item.
	if ref, _ = sh.changeExp(h, ref, b, exp, now, mark); ref == slab.NilRef {
		return Deleted // no memory for the marked copy (or for an exptime field): dropped, which md I allows
	}
	sh.mutate(h, ref, ref, causeStore, now)
	return Deleted
}
