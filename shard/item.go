package shard

import (
	"encoding/binary"
	"slices"

	"github.com/leasecached/leasecached/slab"
)

// Item layout inside its head chunk (27 bytes of header where memcached
// spends 56), little endian:
//
//	0  cas      uint64  (while the chunk is free: slab's free-list link)
//	8  exptime  uint32  absolute unix seconds, 0 = never
//	12 time     uint32  unix seconds of the last store or access bump
//	                    (memcached's it->time: flush_all, mg l and me la= read it)
//	16 flags    uint32
//	20 vlen     uint32
//	24 state    uint8   kind + bits below (slab.StateOffset; 0 = free chunk)
//	25 klen     uint8
//	26 meta     uint8   meta-protocol bits (metaStale, ...)
//	27 [next    ref, 8 bytes, only when chained]
//	.. key, then value (no trailing \r\n)
//
// An item whose header+key+value exceeds slab.ChunkMax is a chain: the head
// chunk (largest class) holds the header, key and first part of the value
// and the ref of the next part; each part chunk holds
//
//	0  next ref (slab.NilRef at the end)
//	8  head ref (so eviction scanning a part can find its item)
//	24 state = kindPart
//	32 data
//
// and the last part comes from the smallest class that fits its remainder.
const (
	offCas     = 0
	offExp     = 8
	offTime    = 12
	offFlags   = 16
	offVlen    = 20
	offState   = slab.StateOffset
	offKlen    = 25
	offMeta    = 26
	headerSize = 27
	chainLink  = 8 // next-part ref after the header of a chained head

	offPartNext = 0
	offPartHead = 8
	partData    = 32

	// MaxKeyLen is memcached's key length limit (it also fits the klen byte).
	MaxKeyLen = 250
)

// State byte: the low two bits are the chunk kind, the rest are item bits.
const (
	kindMask    = 0x03
	kindHead    = 0x01 // first chunk of an item
	kindPart    = 0x02 // continuation chunk of a chained item
	flagChained = 0x04 // head: the value continues in part chunks
	flagVisited = 0x08 // CLOCK reference bit: set on hit, cleared by the hand
	flagFetched = 0x10 // read at least once (for *_unfetched stats)
	flagPinned  = 0x20 // in use by the operation holding the shard lock: never evict
	// flagGhost marks a stale value kept after a delete or an expiry for lease-get (leases.md rule 4).
	// A ghost is indexed in the shard's ghost index, never the main one, so no other command sees it;
	// its exptime holds the end of its stale window.
	flagGhost = 0x40
	// flagActive is memcached's ITEM_ACTIVE: read again after its first read since it was stored. Only
	// the cachedump listing (dump.go) looks at it, to tell which items memcached would hold in WARM.
	flagActive = 0x80
)

// Meta byte: memcached's item flags that only the meta commands read or write. They live apart from the
// state byte, which has no room left, and are never confused with lease stale values (flagGhost).
const (
	metaStale     = 0x01 // ITEM_STALE: md I marked it; mg shows X and hands out a token
	metaTokenSent = 0x02 // ITEM_TOKEN_SENT: a client won the recache token (W); others see Z
	metaKeyBinary = 0x04 // ITEM_KEY_BINARY: stored by ms with b, so k shows the key in base64
)

var le = binary.LittleEndian

func itemCas(b []byte) uint64       { return le.Uint64(b[offCas:]) }
func itemExp(b []byte) uint32       { return le.Uint32(b[offExp:]) }
func itemTime(b []byte) uint32      { return le.Uint32(b[offTime:]) }
func itemFlags(b []byte) uint32     { return le.Uint32(b[offFlags:]) }
func itemVlen(b []byte) int         { return int(le.Uint32(b[offVlen:])) }
func itemKlen(b []byte) int         { return int(b[offKlen]) }
func itemChained(b []byte) bool     { return b[offState]&flagChained != 0 }
func itemMeta(b []byte) byte        { return b[offMeta] }
func setItemCas(b []byte, v uint64) { le.PutUint64(b[offCas:], v) }
func setItemExp(b []byte, v uint32) { le.PutUint32(b[offExp:], v) }

func keyOff(b []byte) int {
	if itemChained(b) {
		return headerSize + chainLink
	}
	return headerSize
}

func itemKey(b []byte) []byte {
	o := keyOff(b)
	return b[o : o+itemKlen(b)]
}

func dataOff(b []byte) int { return keyOff(b) + itemKlen(b) }

// itemBytes is the memory an item accounts for in stats (memcached "bytes").
func itemBytes(klen, vlen int) int64 { return int64(headerSize + klen + vlen) }

// writeHeader fills a freshly allocated head chunk (state already set by
// allocItem, which knows whether it is chained).
func writeHeader(b []byte, cas uint64, exp, now uint32, flags uint32, key []byte, vlen int) {
	le.PutUint64(b[offCas:], cas)
	le.PutUint32(b[offExp:], exp)
	le.PutUint32(b[offTime:], now)
	le.PutUint32(b[offFlags:], flags)
	le.PutUint32(b[offVlen:], uint32(vlen))
	b[offKlen] = uint8(len(key))
	b[offMeta] = 0
	copy(b[keyOff(b):], key)
}

func readRef(b []byte) slab.Ref     { return slab.Ref(le.Uint64(b)) }
func writeRef(b []byte, r slab.Ref) { le.PutUint64(b, uint64(r)) }

// valueReader yields an item's value as the successive slices of its chunks.
type valueReader struct {
	al   *slab.Allocator
	cur  []byte // unread part of the current chunk's value bytes
	rem  int    // value bytes not yet returned, including cur
	next slab.Ref
}

func newValueReader(al *slab.Allocator, head []byte) valueReader {
	vlen, off := itemVlen(head), dataOff(head)
	r := valueReader{al: al, rem: vlen, next: slab.NilRef}
	if itemChained(head) {
		r.next = readRef(head[headerSize:])
	}
	r.cur = head[off:min(len(head), off+vlen)]
	return r
}

// segment returns the next slice of the value, nil at the end.
func (r *valueReader) segment() []byte {
	if r.rem == 0 {
		return nil
	}
	if len(r.cur) == 0 {
		c := r.al.Chunk(r.next)
		r.next = readRef(c[offPartNext:])
		r.cur = c[partData:min(len(c), partData+r.rem)]
	}
	s := r.cur
	r.cur = nil
	r.rem -= len(s)
	return s
}

// valueWriter streams a value into a freshly allocated item's chunks.
type valueWriter struct {
	al   *slab.Allocator
	buf  []byte
	next slab.Ref
}

func newValueWriter(al *slab.Allocator, head []byte) valueWriter {
	w := valueWriter{al: al, buf: head[dataOff(head):], next: slab.NilRef}
	if itemChained(head) {
		w.next = readRef(head[headerSize:])
	}
	return w
}

func (w *valueWriter) write(p []byte) {
	for len(p) > 0 {
		if len(w.buf) == 0 {
			c := w.al.Chunk(w.next)
			w.next = readRef(c[offPartNext:])
			w.buf = c[partData:]
		}
		n := copy(w.buf, p)
		w.buf, p = w.buf[n:], p[n:]
	}
}

// appendValue appends the item's whole value to dst.
func appendValue(al *slab.Allocator, dst, head []byte) []byte {
	r := newValueReader(al, head)
	dst = slices.Grow(dst, itemVlen(head))
	for s := r.segment(); s != nil; s = r.segment() {
		dst = append(dst, s...)
	}
	return dst
}
