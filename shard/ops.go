package shard

import (
	"strconv"

	"github.com/leasecached/leasecached/protocol"
	"github.com/leasecached/leasecached/slab"
)

// tooLarge applies memcached's -I check.
func (s *Store) tooLarge(klen, vlen int, flags uint32) bool {
	return protocol.ItemSize(klen, vlen, flags) > s.maxItemSize
}

func validKey(key []byte) bool { return len(key) > 0 && len(key) <= MaxKeyLen }

// Get appends key's value to dst (copied under the shard lock: the caller
// keeps dst) and reports its metadata.
func (s *Store) Get(dst, key []byte) ([]byte, Info, bool) {
	return s.get(dst, key, false, 0)
}

// GetAndTouch is gat/gats: Get plus setting a new exptime.
func (s *Store) GetAndTouch(dst, key []byte, exptime int64) ([]byte, Info, bool) {
	return s.get(dst, key, true, exptime)
}

func (s *Store) get(dst, key []byte, touch bool, exptime int64) ([]byte, Info, bool) {
	if !validKey(key) {
		return dst, Info{}, false
	}
	sh, h, now := s.lockKey(key)
	ref, b := sh.findForRead(Hashed{Sum: h}, key, now)
	if ref == slab.NilRef {
		sh.mu.Unlock()
		return dst, Info{}, false
	}
	if touch {
		if ref, b = sh.setExp(h, ref, b, absExptime(exptime, now), now); ref == slab.NilRef {
			sh.mu.Unlock()
			return dst, Info{}, false // no memory to give the item an exptime: it was dropped
		}
	}
	sh.bumpRead(ref, b, now)
	info := infoOf(b)
	dst = appendValue(sh.al, dst, b)
	sh.mu.Unlock()
	return dst, info, true
}

func infoOf(b []byte) Info {
	return Info{Flags: itemFlags(b), Cas: itemCas(b), Exptime: int64(itemExp(b)), Len: itemVlen(b)}
}

// Store runs a storage command. cas is compared for ModeCas and, when
// non-zero, for ModeAppend/ModePrepend (meta commands); other modes ignore it.
func (s *Store) Store(mode Mode, key []byte, flags uint32, exptime int64, value []byte, cas uint64) Result {
	return s.StoreHashed(mode, key, HashOf(key), flags, exptime, value, cas)
}

// StoreHashed is Store for a key whose Hashed is k.
func (s *Store) StoreHashed(mode Mode, key []byte, k Hashed, flags uint32, exptime int64, value []byte, cas uint64) Result {
	if !validKey(key) {
		return NotStored
	}
	sh, now := s.lockHashed(k.Sum)
	res, _ := sh.storeItem(k, key, value, &storeReq{mode: mode, flags: flags, exp: absExptime(exptime, now), cas: cas}, now)
	sh.mu.Unlock()
	return res
}

// storeReq is one store's parameters beyond the key and value.
type storeReq struct {
	mode  Mode
	flags uint32
	exp   uint32 // absolute
	cas   uint64
	// stale is ms's I flag in CAS mode: a CAS older than the item's still stores, keeping the item's
	// exptime and marking the new value stale (memcached's CAS_STALE).
	stale bool
	// meta are the meta bits of the new item (metaKeyBinary for ms with b). Append and prepend build
	// their item afresh as memcached does, without them.
	meta byte
}

// storeItem runs one store of key, whose Hashed is k, and reports its result and, when Stored, the new
// item's CAS.
func (sh *shard) storeItem(k Hashed, key, value []byte, rq *storeReq, now int64) (Result, uint64) {
	h := k.Sum
	// Every write command cancels the key's lease whatever its outcome: the writer changed the source
	// of truth, so a fill that started before it must not land (leases.md rule 3).
	sh.invalidateLeases(h, causeStore)
	mode, flags, exp, cas, meta := rq.mode, rq.flags, rq.exp, rq.cas, rq.meta
	if sh.st.tooLarge(len(key), len(value), flags) {
		if mode == ModeSet {
			sh.dropStale(h, key, now)
		}
		return TooLarge, 0
	}
	if sh.sums != nil {
		sh.prefetchNew(sealedLen(headerLen(layoutOf(flags, exp, len(value)), false) + len(key) + len(value)))
	}
	old, ob := sh.findHinted(k, key, now)
	vlen := len(value)
	switch mode {
	case ModeAdd:
		if old != slab.NilRef {
			ob[offState] |= flagVisited // memcached bumps the existing item
			return NotStored, 0
		}
	case ModeReplace:
		if old == slab.NilRef {
			return NotStored, 0
		}
	case ModeAppend, ModePrepend:
		if old == slab.NilRef {
			return NotStored, 0
		}
		if cas != 0 && cas != itemCas(ob) {
			return Exists, 0
		}
		flags, exp, meta = itemFlags(ob), itemExp(ob), 0
		vlen += itemVlen(ob)
		if sh.st.tooLarge(len(key), vlen, flags) {
			return NotStored, 0
		}
	case ModeCas:
		if old == slab.NilRef {
			return NotFound, 0
		}
		if cas != itemCas(ob) {
			if !rq.stale || cas == 0 || cas > itemCas(ob) {
				return Exists, 0
			}
			exp = itemExp(ob)
			meta |= metaStale | itemMeta(ob)&metaTokenSent
		}
	}

	lay := layoutOf(flags, exp, vlen)
	if old != slab.NilRef && mode != ModeAppend && mode != ModePrepend {
		n := headerLen(lay, false) + len(key) + vlen
		if sh.sums == nil {
			if id, ok := sh.inPlaceClass(ob, n); ok {
				return Stored, sh.overwrite(ob, id, key, value, flags, exp, meta, lay, now)
			}
		} else if n = sealedLen(n); n <= undoRoom {
			if id, ok := sh.inPlaceClass(ob, n); ok && sh.mayChangeInPlace(h, old, ob) && sh.saveUndo(ob, id, now) {
				newCas := sh.overwrite(ob, id, key, value, flags, exp, meta, lay, now)
				sh.sealInPlace(old, ob, id)
				return Stored, newCas
			}
		}
	}
	if old != slab.NilRef {
		ob[offState] |= flagPinned // eviction must not take it while we allocate
	}
	nu, nb, ok := sh.allocItem(len(key), vlen, lay, now)
	if old != slab.NilRef {
		ob[offState] &^= flagPinned
	}
	if !ok {
		switch mode {
		case ModeAppend, ModePrepend:
			return NotStored, 0 // memcached: the combined item could not be allocated
		case ModeSet:
			if old != slab.NilRef {
				sh.mutate(h, old, slab.NilRef, causeRejected, now)
			}
		}
		return NoMemory, 0
	}
	newCas := sh.st.cas.Add(1)
	writeHeader(nb, newCas, exp, uint32(now), flags, key, vlen, meta)
	if mode != ModeAppend && mode != ModePrepend && !itemChained(nb) {
		copy(nb[dataOff(nb):], value) // most stores: the value in the head chunk, no part to walk
	} else {
		w := newValueWriter(sh.al, nb)
		switch mode {
		case ModeAppend:
			copyValue(&w, sh.al, ob)
			w.write(value)
		case ModePrepend:
			w.write(value)
			copyValue(&w, sh.al, ob)
		default:
			w.write(value)
		}
	}
	nb[offState] &^= flagPinned
	sh.mutate(h, old, nu, causeStore, now)
	return Stored, newCas
}

func copyValue(w *valueWriter, al *slab.Allocator, head []byte) {
	r := newValueReader(al, head)
	for seg := r.segment(); seg != nil; seg = r.segment() {
		w.write(seg)
	}
}

// dropStale removes key after a failed set, as memcached does so that a
// client never reads the value it just tried to overwrite.
func (sh *shard) dropStale(h uint64, key []byte, now int64) {
	if old, _ := sh.find(h, key, now); old != slab.NilRef {
		sh.mutate(h, old, slab.NilRef, causeRejected, now)
	}
}

// Delete removes key: Deleted or NotFound.
func (s *Store) Delete(key []byte) Result {
	if !validKey(key) {
		return NotFound
	}
	sh, h, now := s.lockKey(key)
	defer sh.mu.Unlock()
	// A delete of a key that is not cached is the common case of the stale-set race (the reader that
	// holds the lease missed it): the lease must die even though no item does.
	sh.invalidateLeases(h, causeDelete)
	old, _ := sh.find(h, key, now)
	if old == slab.NilRef {
		return NotFound
	}
	sh.mutate(h, old, slab.NilRef, causeDelete, now)
	return Deleted
}

// Touch sets key's exptime without changing its value or CAS: Touched or
// NotFound.
func (s *Store) Touch(key []byte, exptime int64) Result {
	if !validKey(key) {
		return NotFound
	}
	sh, h, now := s.lockKey(key)
	defer sh.mu.Unlock()
	ref, b := sh.find(h, key, now)
	if ref == slab.NilRef {
		return NotFound
	}
	if ref, b = sh.setExp(h, ref, b, absExptime(exptime, now), now); ref == slab.NilRef {
		return NotFound // no memory to give the item an exptime: it was dropped
	}
	sh.bumpRead(ref, b, now)
	return Touched
}

// maxCounterDigits is the length of the largest uint64 in decimal.
const maxCounterDigits = 20

// Arith is incr/decr: Stored with the new value, NotFound, NonNumeric, or
// NoMemory. The value must read as a decimal uint64 the way memcached's
// safe_strtoull reads it; incr wraps at 2^64, decr stops at 0. A result no
// longer than the old value is written in place, padded with spaces (so a
// get returns e.g. "5  " after decr 100 by 95); a longer one makes a new
// item with the same flags and exptime. Both get a new CAS.
func (s *Store) Arith(key []byte, incr bool, delta uint64) (uint64, Result) {
	if !validKey(key) {
		return 0, NotFound
	}
	sh, h, now := s.lockKey(key)
	defer sh.mu.Unlock()
	sh.invalidateLeases(h, causeStore)
	ref, b := sh.find(h, key, now)
	if ref == slab.NilRef {
		return 0, NotFound
	}
	out := sh.arith(h, ref, b, incr, delta, itemExp(b), now)
	return out.value, out.res
}

// arithOutcome is what sh.arith did.
type arithOutcome struct {
	res   Result
	value uint64
	cas   uint64 // the CAS of the item now holding the value
}

// arith applies incr/decr to the live item ref (b its head chunk), under the shard lock. Like
// memcached's do_add_delta it leaves the fetched bit alone: an increment is not a read. A value whose
// digits fit is rewritten in its item, which then gets exptime exp in the same change (ma T, one change:
// doc/design/restart.md rule 2); a longer one goes into a new item with the old exptime, as memcached's
// ma leaves T off an item it had to replace.
func (sh *shard) arith(h uint64, ref slab.Ref, b []byte, incr bool, delta uint64, exp uint32, now int64) arithOutcome {
	if itemChained(b) {
		return arithOutcome{res: NonNumeric} // memcached refuses chunked items: far too long for a number
	}
	off, vlen := dataOff(b), itemVlen(b)
	v := b[off : off+vlen]
	n, ok := parseCounter(v)
	if !ok {
		return arithOutcome{res: NonNumeric}
	}
	switch {
	case incr:
		n += delta
	case delta > n:
		n = 0
	default:
		n -= delta
	}
	var buf [maxCounterDigits]byte
	digits := strconv.AppendUint(buf[:0], n, 10)
	b[offState] |= flagVisited
	if len(digits) <= vlen {
		cas := sh.st.cas.Add(1)
		write := func(b []byte) {
			o := dataOff(b) // a moved item may have another layout (moveItem)
			v := b[o : o+vlen]
			copy(v, digits)
			for i := len(digits); i < vlen; i++ {
				v[i] = ' '
			}
			setItemCas(b, cas)
			bumpIdle(b, now)
		}
		if ref, b = sh.changeExp(h, ref, b, exp, now, write); ref == slab.NilRef {
			return arithOutcome{res: NoMemory} // no memory for the new chunk a data directory needed (undo.go)
		}
		sh.mutate(h, ref, ref, causeStore, now)
		return arithOutcome{res: Stored, value: n, cas: cas}
	}
	b[offState] |= flagPinned
	nu, nb, ok := sh.allocItem(itemKlen(b), len(digits), layoutOf(itemFlags(b), itemExp(b), len(digits)), now)
	b[offState] &^= flagPinned
	if !ok {
		return arithOutcome{res: NoMemory}
	}
	cas := sh.st.cas.Add(1)
	writeHeader(nb, cas, itemExp(b), uint32(now), itemFlags(b), itemKey(b), len(digits), 0)
	copy(nb[dataOff(nb):], digits)
	nb[offState] &^= flagPinned
	sh.mutate(h, ref, nu, causeStore, now)
	return arithOutcome{res: Stored, value: n, cas: cas}
}

// parseCounter reads v the way memcached's safe_strtoull reads an item's
// data (value followed by "\r\n"): optional leading whitespace, an optional
// sign, decimal digits, then whitespace, NUL or the end. Overflow fails; a
// '-' is accepted only when the wrapped result still looks non-negative as
// a signed number (so "-0" is 0 and "-1" fails), exactly like glibc+memcached.
func parseCounter(v []byte) (uint64, bool) {
	i := 0
	for i < len(v) && isSpace(v[i]) {
		i++
	}
	neg := false
	if i < len(v) && (v[i] == '+' || v[i] == '-') {
		neg = v[i] == '-'
		i++
	}
	start := i
	var n uint64
	overflow := false
	for ; i < len(v) && v[i] >= '0' && v[i] <= '9'; i++ {
		d := uint64(v[i] - '0')
		if n > (^uint64(0)-d)/10 {
			overflow = true
		}
		n = n*10 + d
	}
	if i == start || overflow {
		return 0, false
	}
	if i < len(v) && !isSpace(v[i]) && v[i] != 0 {
		return 0, false
	}
	if neg {
		n = -n
		if int64(n) < 0 {
			return 0, false
		}
	}
	return n, true
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}
