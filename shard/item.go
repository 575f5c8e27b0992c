package shard

import (
	"encoding/binary"
	"slices"

	"github.com/leasecached/leasecached/protocol"
	"github.com/leasecached/leasecached/slab"
)

// Item layout inside its head chunk, little endian. The header is 11 bytes
// plus only the fields an item needs: 16 bytes for an item with no flags and
// no exptime, 20 for the benchmark's (flags, no exptime, 100-byte value), at
// most 27 (memcached spends 48-56):
//
//	0  cas      uint64  (while the chunk is free: slab's free-list link)
//	8  state    uint8   kind + bits below (slab.StateOffset; 0 = free chunk)
//	9  meta     uint8   meta-protocol bits (metaStale, ...) + layout bits (metaHasExp, ...)
//	10 klen     uint8
//	11 time     uint32  unix seconds of the last store or access bump
//	                    (memcached's it->time: flush_all, mg l and me la= read it);
//	                    a stale value (ghost.go) keeps the end of its window here
//	15 [exptime uint32] absolute unix seconds, only when metaHasExp (none = never)
//	.. [flags   uint32] only when metaHasFlags (none = 0)
//	.. vlen     1, 2 or 4 bytes (metaVlenMask says which)
//	.. [next    ref, 8 bytes, only when chained]
//	.. key, then value (no trailing \r\n)
//	.. [seal    uint32, in a data directory: at the next multiple of 4 after the value (sealAt)]
//
// Why these choices (bytes per item measured with the benchmark's 14-byte
// keys and 100-byte values, so every byte here is about 1% of an item):
//   - CAS stays a full 8 bytes: memcached's CAS uniques are 64-bit.
//   - Flags and exptime cost 4 bytes each only when non-zero. Flags never
//     change in place (a store that reuses an item's chunk, overwrite, writes
//     a whole new header and layout). An exptime set in place on an item
//     stored without one (touch, gat, mg T, ma T, md I T) moves the item to
//     a chunk with the field (relocate, rare: once per item at most).
//   - A value under 256 bytes needs one length byte, under 64 KiB two. The
//     length never grows in place (incr writes in place only when the digits
//     fit), so the width chosen at store time stays right.
//   - Lengths and presence bits fit in the meta byte next to memcached's
//     meta flags, so the layout costs no byte of its own.
//
// An item whose header+key+value (and seal, in a data directory: sealedLen)
// exceeds slab.ChunkMax is a chain: the head
// chunk (largest class) holds the header, key and first part of the value
// and the ref of the next part; each part chunk holds
//
//	0  next ref (slab.NilRef at the end)
//	8  state = kindPart
//	16 head ref (so eviction scanning a part can find its item)
//	24 data
//
// and the last part comes from the smallest class that fits its remainder. A chained head's last
// sealLen bytes are its seal's, with or without a data directory, so a chain's geometry is one.
const (
	offCas   = 0
	offState = slab.StateOffset
	offMeta  = offState + 1
	offKlen  = offMeta + 1
	offTime  = offKlen + 1
	offExp   = offTime + 4 // when present; flags and vlen follow what is present
	// headerFixed is the part of the header every item has (cas, state, meta, klen, time).
	headerFixed = offExp
	// headerMax is the largest header: every optional field, a 4-byte length, a chain link.
	headerMax = headerFixed + 4 + 4 + 4 + chainLink
	chainLink = 8 // next-part ref after the header of a chained head

	// sealLen is an item's seal (shard/persist.go): it follows the value in the item's own chunk, whose
	// bytes a store writes anyway, so sealing touches no other cache line (doc/design/restart.md rule 1).
	sealLen = 4

	offPartNext = 0
	offPartHead = 16
	partData    = 24

	// MaxKeyLen is memcached's key length limit (it also fits the klen byte).
	MaxKeyLen = protocol.KeyMaxLength
)

// State byte: the low two bits are the chunk kind, the rest are item bits.
const (
	kindMask    = 0x03
	kindHead    = 0x01 // first chunk of an item
	kindPart    = 0x02 // continuation chunk of a chained item
	kindUndo    = 0x03 // an undo chunk between changes in place (undo.go), or a kept version (keep.go): no item
	flagChained = 0x04 // head: the value continues in part chunks
	flagVisited = 0x08 // CLOCK reference bit: set on hit, cleared by the hand
	flagFetched = 0x10 // read at least once (for *_unfetched stats)
	flagPinned  = 0x20 // in use by the operation holding the shard lock: never evict
	// flagGhost marks a stale value kept after a delete or an expiry for lease-get (leases.md rule 4).
	// A ghost is indexed in the shard's ghost index, never the main one, so no other command sees it;
	// its time field holds the end of its stale window.
	flagGhost = 0x40
	// flagActive is memcached's ITEM_ACTIVE: read again after its first read since it was stored. Only
	// the cachedump listing (dump.go) looks at it, to tell which items memcached would hold in WARM.
	flagActive = 0x80
)

// Meta byte: memcached's item flags that only the meta commands read or write (low three bits), and the
// header layout bits, fixed when the item is allocated. They live apart from the state byte, which has no
// room left, and are never confused with lease stale values (flagGhost).
const (
	metaStale     = 0x01 // ITEM_STALE: md I marked it; mg shows X and hands out a token
	metaTokenSent = 0x02 // ITEM_TOKEN_SENT: a client won the recache token (W); others see Z
	metaKeyBinary = 0x04 // ITEM_KEY_BINARY: stored by ms with b, so k shows the key in base64
	metaProtoMask = metaStale | metaTokenSent | metaKeyBinary

	metaHasExp    = 0x08 // the header has an exptime field
	metaHasFlags  = 0x10 // the header has a flags field
	metaVlenShift = 5
	metaVlenMask  = 0x60 // value length width: 0 one byte, 1 two bytes, 2 four bytes
	metaLayout    = metaHasExp | metaHasFlags | metaVlenMask

	// metaGrace marks a stale value kept after its item expired (ghost.go), which plain reads may see
	// while it is in grace; one kept after a delete never is. The meta protocol's bits mean something
	// else on a stale value (grace.go): metaTokenSent, a refill lease was handed out for it
	// (grace_lease_lapses); metaStale, a delete ended its grace.
	metaGrace = 0x80
	// metaKept marks a kept version (keep.go), whose state is kindUndo: a chunk no ghost can be.
	metaKept = metaGrace
)

// Value lengths that fit the one- and two-byte length fields.
const (
	vlen1Max = 1<<8 - 1
	vlen2Max = 1<<16 - 1
)

var le = binary.LittleEndian

// layoutOf is the layout bits of an item with these fields.
func layoutOf(flags, exp uint32, vlen int) byte {
	var m byte
	if exp != 0 {
		m |= metaHasExp
	}
	if flags != 0 {
		m |= metaHasFlags
	}
	switch {
	case vlen > vlen2Max:
		m |= 2 << metaVlenShift
	case vlen > vlen1Max:
		m |= 1 << metaVlenShift
	}
	return m
}

// vlenWidth is the size of the length field of layout m.
func vlenWidth(m byte) int { return 1 << ((m & metaVlenMask) >> metaVlenShift) }

func offFlagsOf(m byte) int { return offExp + int(m&metaHasExp)>>1 } // metaHasExp>>1 == 4
func offVlenOf(m byte) int  { return offFlagsOf(m) + int(m&metaHasFlags)>>2 }

// headerLen is the header size of layout m, chain link included when chained.
func headerLen(m byte, chained bool) int {
	n := offVlenOf(m) + vlenWidth(m)
	if chained {
		n += chainLink
	}
	return n
}

func itemCas(b []byte) uint64  { return le.Uint64(b[offCas:]) }
func itemTime(b []byte) uint32 { return le.Uint32(b[offTime:]) }
func itemExp(b []byte) uint32 {
	if b[offMeta]&metaHasExp == 0 {
		return 0
	}
	return le.Uint32(b[offExp:])
}
func itemFlags(b []byte) uint32 {
	if b[offMeta]&metaHasFlags == 0 {
		return 0
	}
	return le.Uint32(b[offFlagsOf(b[offMeta]):])
}
func itemVlen(b []byte) int {
	m := b[offMeta]
	o := offVlenOf(m)
	switch m & metaVlenMask {
	case 0:
		return int(b[o])
	case 1 << metaVlenShift:
		return int(le.Uint16(b[o:]))
	}
	return int(le.Uint32(b[o:]))
}

// valueFields is what a VALUE block needs of head chunk b, from one read of its layout: the flags, the
// value's length, and where the value starts in b unless the item is chained (appendChainedValue). Reading
// them one accessor at a time reread the meta byte and rechecked b's length for each.
//
// The length field is read as four bytes and masked to its width: a chunk always has those bytes, because
// the smallest item of each layout (a one-byte key and an empty value) ends at most two bytes short of
// them and chunks come in slab.ChunkAlign steps (TestValueFieldsSmallestChunks).
func valueFields(b []byte) (flags uint32, vlen, data int) {
	m := b[offMeta]
	o := offFlagsOf(m)
	if m&metaHasFlags != 0 {
		flags = le.Uint32(b[o:])
		o += 4
	}
	vlen = int(le.Uint32(b[o:]) & vlenMasks[m>>metaVlenShift&3])
	return flags, vlen, int(keyOffsets[m]) + int(b[offKlen])
}

// vlenMasks[w] keeps the bytes of a length field of width code w (metaVlenMask) from a four-byte read.
var vlenMasks = [4]uint32{0xff, 0xffff, 0xffffffff, 0xffffffff}

// Any chunk holds a four-byte read of the length field whatever its meta byte (valueFields, sealOf).
const _ = uint(slab.MinChunk - (headerMax - chainLink))

func itemKlen(b []byte) int          { return int(b[offKlen]) }
func itemChained(b []byte) bool      { return b[offState]&flagChained != 0 }
func itemMeta(b []byte) byte         { return b[offMeta] & metaProtoMask }
func setItemCas(b []byte, v uint64)  { le.PutUint64(b[offCas:], v) }
func setItemTime(b []byte, v uint32) { le.PutUint32(b[offTime:], v) }

// setItemMeta replaces the meta-protocol bits, keeping the layout.
func setItemMeta(b []byte, m byte) { b[offMeta] = b[offMeta]&metaLayout | m&metaProtoMask }

// canSetExp says whether exptime v can be written in place: the item has the field, or v is "never"
// and the item has no field (which already means never).
func canSetExp(b []byte, v uint32) bool { return b[offMeta]&metaHasExp != 0 || v == 0 }

// setItemExp writes exptime v in place; the caller checked canSetExp.
func setItemExp(b []byte, v uint32) {
	if b[offMeta]&metaHasExp != 0 {
		le.PutUint32(b[offExp:], v)
	}
}

// chainOff is where a chained head keeps its next-part ref.
func chainOff(b []byte) int {
	m := b[offMeta]
	return offVlenOf(m) + vlenWidth(m)
}

// keyOff is where the key starts: headerLen, looked up rather than computed, because every key compare and
// every stats update of every request asks (a store about six times).
func keyOff(b []byte) int {
	return int(keyOffsets[b[offMeta]]) + int(b[offState]&flagChained)*chainLinkPerFlag
}

// keyOffsets[m] is headerLen(m, false) for every meta byte m.
var keyOffsets = func() (t [256]uint8) {
	for m := range t {
		t[m] = uint8(headerLen(byte(m), false))
	}
	return t
}()

// chainLinkPerFlag turns the state byte's flagChained bit into the chain link's size.
const chainLinkPerFlag = chainLink / flagChained

func itemKey(b []byte) []byte {
	o := keyOff(b)
	return b[o : o+itemKlen(b)]
}

func dataOff(b []byte) int { return keyOff(b) + itemKlen(b) }

// itemBytes is the memory an item accounts for in stats (memcached "bytes"): header, key and value.
func itemBytes(b []byte) int64 { return int64(dataOff(b) + itemVlen(b)) }

// sealedLen is the chunk room an item of n bytes (header, key and value) takes with its seal: the seal is
// 4-byte aligned (chunks are slab.ChunkAlign aligned), so that it can be stored atomically where a plain
// store is not ordered (slab/seal_*.go).
func sealedLen(n int) int { return (n+sealLen-1)&^(sealLen-1) + sealLen }

// sealAt is where head chunk b keeps its seal: after the value (sealedLen), or where a chained head's
// value bytes end (valueEnd).
func sealAt(b []byte) int {
	if itemChained(b) {
		return valueEnd(b)
	}
	return sealedLen(dataOff(b)+itemVlen(b)) - sealLen
}

// valueEnd is where head chunk b's value bytes may end: its chunk's end, less a chained head's seal.
func valueEnd(b []byte) int {
	if itemChained(b) {
		return len(b) - sealLen
	}
	return len(b)
}

// writeHeader fills a freshly allocated head chunk, whose state and layout allocItem set (flags, exp and
// vlen must be the ones the layout was computed from), and sets the meta-protocol bits to meta.
func writeHeader(b []byte, cas uint64, exp, now uint32, flags uint32, key []byte, vlen int, meta byte) {
	m := b[offMeta]&metaLayout | meta&metaProtoMask
	if m&metaLayout != layoutOf(flags, exp, vlen) {
		panic("shard: item header written with fields its layout has no room for") // programming error
	}
	b[offMeta] = m
	le.PutUint64(b[offCas:], cas)
	le.PutUint32(b[offTime:], now)
	if m&metaHasExp != 0 {
		le.PutUint32(b[offExp:], exp)
	}
	if m&metaHasFlags != 0 {
		le.PutUint32(b[offFlagsOf(m):], flags)
	}
	o := offVlenOf(m)
	switch m & metaVlenMask {
	case 0:
		b[o] = uint8(vlen)
	case 1 << metaVlenShift:
		le.PutUint16(b[o:], uint16(vlen))
	default:
		le.PutUint32(b[o:], uint32(vlen))
	}
	b[offKlen] = uint8(len(key))
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
		r.next = readRef(head[chainOff(head):])
	}
	r.cur = head[off:min(valueEnd(head), off+vlen)]
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
	w := valueWriter{al: al, buf: head[dataOff(head):valueEnd(head)], next: slab.NilRef}
	if itemChained(head) {
		w.next = readRef(head[chainOff(head):])
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
