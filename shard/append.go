package shard

import (
	"slices"

	"github.com/leasecached/leasecached/slab"
)

// Reply-building reads: the server's get, gets and lease-get paths. They do what Get and LeaseGet do (same lookup, expiry, bump, lease and stale-value rules, same counters), but
// append the whole reply block "<header line><value>\r\n" to the caller's output buffer under the shard
// lock instead of copying the value into a scratch buffer that the caller then copies again. The header
// line is written by the caller's encoder (the shard knows nothing of the protocol), which must be a plain
// function value so passing it allocates nothing.

// ValueHeader appends the line that precedes a value of n bytes ("VALUE <key> <flags> <n>[ <cas>]\r\n");
// protocol.AppendValueHeader has this signature.
type ValueHeader func(dst, key []byte, flags uint32, n int, cas uint64, withCas bool) []byte

// LValueHeader appends the line that precedes a lease-get miss block ("LVALUE <key> <token> <flags> <n>\r\n");
// protocol.AppendLValueHeader has this signature.
type LValueHeader func(dst, key []byte, token uint64, flags uint32, n int) []byte

// blockTrailer ends every value block.
const blockTrailer = "\r\n"

// maxHeaderLine bounds a VALUE/LVALUE line: the words, the key and three 20-digit numbers. It only sizes
// the single up-front growth of dst, so an underestimate costs a second growth, never correctness.
const maxHeaderLine = len("LVALUE ") + MaxKeyLen + 3*(1+20) + len(blockTrailer)

// AppendGet is Get that appends key's reply block to dst: hdr's line (with the CAS when withCas), the
// value, "\r\n". On a miss dst is returned unchanged. gat/gats stay on GetAndTouch: they are rare, and
// giving an item an exptime may move it, which only get() knows how to do.
func (s *Store) AppendGet(dst, key []byte, withCas bool, hdr ValueHeader) ([]byte, bool) {
	return s.AppendGetHashed(dst, key, HashOf(key), withCas, hdr)
}

// AppendGetHashed is AppendGet for a key whose Hashed is k.
func (s *Store) AppendGetHashed(dst, key []byte, k Hashed, withCas bool, hdr ValueHeader) ([]byte, bool) {
	if !validKey(key) {
		return dst, false
	}
	sh, now := s.lockHashed(k.Sum)
	ref, b := sh.findForRead(k, key, now)
	if ref == slab.NilRef {
		sh.mu.Unlock()
		return dst, false
	}
	sh.bumpRead(ref, b, now)
	dst = appendBlock(sh.al, dst, key, b, withCas, hdr)
	sh.mu.Unlock()
	return dst, true
}

// appendBlock appends item b's VALUE block (hdr's header line, the value, "\r\n") to dst, under the shard
// lock.
func appendBlock(al *slab.Allocator, dst, key, b []byte, withCas bool, hdr ValueHeader) []byte {
	flags, vlen, data := valueFields(b)
	dst = slices.Grow(dst, maxHeaderLine+vlen)
	dst = hdr(dst, key, flags, vlen, itemCas(b), withCas)
	if !itemChained(b) { // one copy, inlined here
		dst = append(dst, b[data:data+vlen]...)
	} else {
		dst = appendChainedValue(al, dst, b)
	}
	return append(dst, blockTrailer...)
}

// AppendLeaseGet is LeaseGet that appends key's reply block to dst: on a hit hit's VALUE line, on a miss
// miss's LVALUE line with the granted or hot-miss token, then the value (the stale one on a miss, if held,
// else nothing) and "\r\n".
func (s *Store) AppendLeaseGet(dst, key []byte, hit ValueHeader, miss LValueHeader) ([]byte, LeaseKind) {
	return s.AppendLeaseGetHashed(dst, key, HashOf(key), hit, miss)
}

// AppendLeaseGetHashed is AppendLeaseGet for a key whose Hashed is k.
func (s *Store) AppendLeaseGetHashed(dst, key []byte, k Hashed, hit ValueHeader,
	miss LValueHeader) ([]byte, LeaseKind) {
	if !validKey(key) {
		return append(miss(dst, key, 1, 0, 0), blockTrailer...), LeaseHotMiss
	}
	sh, now := s.lockHashed(k.Sum)
	kind, token, b := sh.leaseLookup(k, key, now)
	var flags uint32
	vlen, data := 0, 0
	if b != nil {
		flags, vlen, data = valueFields(b)
		dst = slices.Grow(dst, maxHeaderLine+vlen)
	}
	if kind == LeaseHit {
		dst = hit(dst, key, flags, vlen, 0, false)
	} else {
		dst = miss(dst, key, token, flags, vlen)
	}
	if b != nil {
		if !itemChained(b) { // as in AppendGetHashed
			dst = append(dst, b[data:data+vlen]...)
		} else {
			dst = appendChainedValue(sh.al, dst, b)
		}
	}
	sh.mu.Unlock()
	return append(dst, blockTrailer...), kind
}

// appendChainedValue appends a chained item's value to dst (already grown by the caller), read part by part.
func appendChainedValue(al *slab.Allocator, dst, head []byte) []byte {
	r := newValueReader(al, head)
	for s := r.segment(); s != nil; s = r.segment() {
		dst = append(dst, s...)
	}
	return dst
}
