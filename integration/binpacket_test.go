package integration

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A small builder and reader of memcached's binary protocol packets for the binary differential
// tests (differential_binary_test.go, fuzzdiff_binary_test.go). Written from the protocol's
// description (memcached's protocol_binary.h and doc/protocol-binary.xml): a packet is a 24-byte
// header, then extras, key and value; every multi-byte field is big-endian.
//
//	request:  magic 0x80 | opcode | keylen(2) | extlen | datatype | vbucket(2) | bodylen(4) | opaque(4) | cas(8)
//	response: magic 0x81 | opcode | keylen(2) | extlen | datatype | status(2)  | bodylen(4) | opaque(4) | cas(8)

const (
	binReqMagic = 0x80
	binResMagic = 0x81
	binHdrLen   = 24
)

// Opcodes memcached 1.6.18 dispatches (and a few it does not, for the error cases).
const (
	opGet        = 0x00
	opSet        = 0x01
	opAdd        = 0x02
	opReplace    = 0x03
	opDelete     = 0x04
	opIncrement  = 0x05
	opDecrement  = 0x06
	opQuit       = 0x07
	opFlush      = 0x08
	opGetQ       = 0x09
	opNoop       = 0x0a
	opVersion    = 0x0b
	opGetK       = 0x0c
	opGetKQ      = 0x0d
	opAppend     = 0x0e
	opPrepend    = 0x0f
	opStat       = 0x10
	opSetQ       = 0x11
	opAddQ       = 0x12
	opReplaceQ   = 0x13
	opDeleteQ    = 0x14
	opIncrementQ = 0x15
	opDecrementQ = 0x16
	opQuitQ      = 0x17
	opFlushQ     = 0x18
	opAppendQ    = 0x19
	opPrependQ   = 0x1a
	opTouch      = 0x1c
	opGAT        = 0x1d
	opGATQ       = 0x1e
	opSASLList   = 0x20
	opSASLAuth   = 0x21
	opSASLStep   = 0x22
	opGATK       = 0x23
	opGATKQ      = 0x24
	// The range opcodes (RGET 0x30 .. RDECRQ 0x3c) are defined by the protocol, never implemented.
	opRGet   = 0x30
	opRDecrQ = 0x3c
)

// Response status codes.
const (
	stSuccess      = 0x00
	stKeyENOENT    = 0x01
	stKeyEEXISTS   = 0x02
	stE2BIG        = 0x03
	stEINVAL       = 0x04
	stNotStored    = 0x05
	stDeltaBadval  = 0x06
	stAuthError    = 0x20
	stAuthContinue = 0x21
	stUnknownCmd   = 0x81
	stENOMEM       = 0x82
)

// casRef says which CAS a request carries when it is expanded for one server: its own field, or the
// CAS of that server's last reply that had one (its own uniques, as $cas in the text scripts).
type casRef int

const (
	casOwn       casRef = iota // the request's cas field
	casLast                    // the last non-zero CAS this connection was sent
	casLastWrong               // the last one plus casWrongDelta: a mismatch on that server
)

// casWrongDelta turns a server's real CAS into one that is certainly not an item's current one.
const casWrongDelta = 1 << 40

// binReq is one request packet (or raw bytes) of a binary script. Keys and values may hold the
// placeholder $k (the run's key prefix, as in the text scripts).
type binReq struct {
	raw      string // when set, sent as is ($k expanded) instead of a packet
	magic    byte   // sent when magicSet, else binReqMagic
	magicSet bool
	op       byte
	datatype byte
	vbucket  uint16
	opaque   uint32 // 0: the runner numbers the request (binAutoOpaque + its index)
	cas      uint64
	casRef   casRef
	extras   []byte
	key      string
	value    string
	// Header fields that lie: when set, sent instead of the lengths of extras, key and body.
	keyLen, extLen, bodyLen *uint32
}

// binAutoOpaque is the base of the opaque values the runner gives requests without one, so that
// every reply shows which request it answers.
const binAutoOpaque = 0x0a000000

func u32p(v uint32) *uint32 { return &v }

// be32 is vs as consecutive big-endian 32-bit words (flags and exptime extras).
func be32(vs ...uint32) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.BigEndian.AppendUint32(b, v)
	}
	return b
}

// Request constructors.

func bGet(op byte, key string) binReq { return binReq{op: op, key: key} }

func bStore(op byte, key, value string, flags, exptime uint32) binReq {
	return binReq{op: op, key: key, value: value, extras: be32(flags, exptime)}
}

func bArith(op byte, key string, delta, initial uint64, exptime uint32) binReq {
	ex := make([]byte, 20)
	binary.BigEndian.PutUint64(ex, delta)
	binary.BigEndian.PutUint64(ex[8:], initial)
	binary.BigEndian.PutUint32(ex[16:], exptime)
	return binReq{op: op, key: key, extras: ex}
}

func bTouch(op byte, key string, exptime uint32) binReq {
	return binReq{op: op, key: key, extras: be32(exptime)}
}

func bKey(op byte, key string) binReq { return binReq{op: op, key: key} }

func bValue(op byte, key, value string) binReq { return binReq{op: op, key: key, value: value} }

func bSimple(op byte) binReq { return binReq{op: op} }

func bFlushDelay(op byte, delay uint32) binReq { return binReq{op: op, extras: be32(delay)} }

func bRaw(s string) binReq { return binReq{raw: s} }

func (r binReq) withCAS(c uint64) binReq        { r.cas = c; return r }
func (r binReq) withCASRef(c casRef) binReq     { r.casRef = c; return r }
func (r binReq) withOpaque(o uint32) binReq     { r.opaque = o; return r }
func (r binReq) withDatatype(d byte) binReq     { r.datatype = d; return r }
func (r binReq) withVbucket(v uint16) binReq    { r.vbucket = v; return r }
func (r binReq) withMagic(m byte) binReq        { r.magic, r.magicSet = m, true; return r }
func (r binReq) withKeyLen(n uint32) binReq     { r.keyLen = u32p(n); return r }
func (r binReq) withExtLen(n uint32) binReq     { r.extLen = u32p(n); return r }
func (r binReq) withBodyLen(n uint32) binReq    { r.bodyLen = u32p(n); return r }
func (r binReq) withExtras(e ...byte) binReq    { r.extras = e; return r }
func (r binReq) withValue(v string) binReq      { r.value = v; return r }
func binOne(reqs ...binReq) [][]binReq          { return [][]binReq{reqs} }
func (r binReq) expandKey(prefix string) string { return strings.ReplaceAll(r.key, phPrefix, prefix) }

// encode renders the request for one run: $k replaced by prefix, the opaque numbered if unset,
// the CAS taken from lastCAS when casRef asks for it.
func (r binReq) encode(prefix string, autoOpaque uint32, lastCAS uint64) []byte {
	if r.raw != "" {
		return []byte(strings.ReplaceAll(r.raw, phPrefix, prefix))
	}
	key := []byte(r.expandKey(prefix))
	value := []byte(strings.ReplaceAll(r.value, phPrefix, prefix))
	keyLen, extLen := uint32(len(key)), uint32(len(r.extras))
	bodyLen := keyLen + extLen + uint32(len(value))
	if r.keyLen != nil {
		keyLen = *r.keyLen
	}
	if r.extLen != nil {
		extLen = *r.extLen
	}
	if r.bodyLen != nil {
		bodyLen = *r.bodyLen
	}
	magic := byte(binReqMagic)
	if r.magicSet {
		magic = r.magic
	}
	opaque := r.opaque
	if opaque == 0 {
		opaque = autoOpaque
	}
	cas := r.cas
	switch r.casRef {
	case casLast:
		cas = lastCAS
	case casLastWrong:
		cas = lastCAS + casWrongDelta
	}
	b := make([]byte, binHdrLen, binHdrLen+len(r.extras)+len(key)+len(value))
	b[0], b[1] = magic, r.op
	binary.BigEndian.PutUint16(b[2:], uint16(keyLen))
	b[4], b[5] = byte(extLen), r.datatype
	binary.BigEndian.PutUint16(b[6:], r.vbucket)
	binary.BigEndian.PutUint32(b[8:], bodyLen)
	binary.BigEndian.PutUint32(b[12:], opaque)
	binary.BigEndian.PutUint64(b[16:], cas)
	b = append(b, r.extras...)
	b = append(b, key...)
	return append(b, value...)
}

// binPkt is one reply packet.
type binPkt struct {
	hdr  []byte // binHdrLen bytes
	body []byte
}

func (p binPkt) magic() byte      { return p.hdr[0] }
func (p binPkt) op() byte         { return p.hdr[1] }
func (p binPkt) keyLen() int      { return int(binary.BigEndian.Uint16(p.hdr[2:])) }
func (p binPkt) extLen() int      { return int(p.hdr[4]) }
func (p binPkt) datatype() byte   { return p.hdr[5] }
func (p binPkt) status() uint16   { return binary.BigEndian.Uint16(p.hdr[6:]) }
func (p binPkt) bodyLen() int     { return int(binary.BigEndian.Uint32(p.hdr[8:])) }
func (p binPkt) opaque() uint32   { return binary.BigEndian.Uint32(p.hdr[12:]) }
func (p binPkt) cas() uint64      { return binary.BigEndian.Uint64(p.hdr[16:]) }
func (p binPkt) wellFormed() bool { return p.extLen()+p.keyLen() <= len(p.body) }
func (p binPkt) extras() []byte {
	if !p.wellFormed() {
		return nil
	}
	return p.body[:p.extLen()]
}
func (p binPkt) key() []byte {
	if !p.wellFormed() {
		return nil
	}
	return p.body[p.extLen() : p.extLen()+p.keyLen()]
}
func (p binPkt) value() []byte {
	if !p.wellFormed() {
		return p.body
	}
	return p.body[p.extLen()+p.keyLen():]
}

// splitBinReplies cuts b into whole packets (a header and its bodylen bytes); rest is what is left
// over, a packet not (yet) complete.
func splitBinReplies(b []byte) (pkts []binPkt, rest []byte) {
	for len(b) >= binHdrLen {
		n := binHdrLen + int(binary.BigEndian.Uint32(b[8:]))
		if n < binHdrLen || len(b) < n {
			break
		}
		pkts = append(pkts, binPkt{hdr: b[:binHdrLen], body: b[binHdrLen:n]})
		b = b[n:]
	}
	return pkts, b
}

// lastBinCAS is the CAS of the last reply packet in b that carries one (0: none).
func lastBinCAS(b []byte) uint64 {
	pkts, _ := splitBinReplies(b)
	var cas uint64
	for _, p := range pkts {
		if c := p.cas(); c != 0 {
			cas = c
		}
	}
	return cas
}

// binNormalizer renders reply packets as text lines, one per packet, keeping every byte except
// what legitimately differs between two servers:
//   - CAS values: each distinct non-zero CAS becomes #1, #2, ... in order of first appearance
//     (over the whole connection: the same item's CAS is the same ordinal in later replies);
//   - VERSION's value (its bodylen with it);
//   - STAT packets: the value (and bodylen) of every stat; the names are kept, except the stats
//     leasecached adds (leasecachedStatExtension), which are dropped, and slab class numbers in
//     "items:N:..." and "N:..." names, which become "N" (the two servers size their classes
//     differently);
//   - the run's key prefix becomes $k.
type binNormalizer struct {
	prefix string
	cas    map[uint64]int
}

func newBinNormalizer(prefix string) *binNormalizer {
	return &binNormalizer{prefix: prefix, cas: map[uint64]int{}}
}

// leasecachedStatExtension reports the stat names leasecached sends and memcached does not, by design
// (the README lists them): leases, grace/hold, huge pages, its own version, hot keys.
func leasecachedStatExtension(name string) bool {
	for _, p := range []string{"lease_", "leasecached_", "stale_window", "huge_page_bytes", "grace", "hold", "hot_keys"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// statsPerClassNotCompared are per-class names of `stats items` and `stats slabs` that only one of
// the two servers sends, or sends with another meaning, by design: memcached's segmented LRU
// (hot/warm/cold, the maintainer's moves) and per-class command counters, which leasecached sends as 0
// (it does not count by class). They are the text protocol's difference as well (server/stats.go); every
// other name, and the order of all names, is compared.
var statsPerClassNotCompared = map[string]bool{}

func init() {
	for _, n := range []string{"number_hot", "number_warm", "number_cold", "age_hot", "age_warm", "tailrepairs",
		"evicted_active", "crawler_items_checked", "lrutail_reflocked", "moves_to_cold", "moves_to_warm",
		"moves_within_lru", "direct_reclaims", "hits_to_hot", "hits_to_warm", "hits_to_cold", "hits_to_temp"} {
		statsPerClassNotCompared["items:N:"+n] = true
	}
	for _, n := range []string{"get_hits", "cmd_set", "delete_hits", "incr_hits", "decr_hits", "cas_hits", "cas_badval",
		"touch_hits"} {
		statsPerClassNotCompared["N:"+n] = true
	}
}

func statNotCompared(normalisedName string) bool { return statsPerClassNotCompared[normalisedName] }

// statClassName replaces a slab class number in a stat name ("items:3:number", "3:chunk_size")
// with N.
func statClassName(name string) string {
	f := strings.Split(name, ":")
	for i, s := range f {
		if s != "" && strings.Trim(s, "0123456789") == "" && i < len(f)-1 {
			f[i] = "N"
		}
	}
	return strings.Join(f, ":")
}

func (n *binNormalizer) casOrdinal(c uint64) string {
	if c == 0 {
		return "0"
	}
	o, ok := n.cas[c]
	if !ok {
		o = len(n.cas) + 1
		n.cas[c] = o
	}
	return fmt.Sprintf("#%d", o)
}

func (n *binNormalizer) unprefix(b []byte) string {
	s := string(b)
	if n.prefix != "" {
		s = strings.ReplaceAll(s, n.prefix, phPrefix)
	}
	return s
}

// render returns the normalised text of b, one line per packet, then any bytes that are not a
// whole packet.
func (n *binNormalizer) render(b []byte) string {
	pkts, rest := splitBinReplies(b)
	var out strings.Builder
	for _, p := range pkts {
		if p.magic() == binResMagic && p.op() == opStat && p.status() == stSuccess && p.keyLen() > 0 && p.wellFormed() {
			name := string(p.key())
			if leasecachedStatExtension(name) || statNotCompared(statClassName(name)) {
				continue
			}
			value := "<v>"
			if name == "detailed" {
				// stats detail dump: per-prefix counts, compared; memcached lists the prefixes in the
				// order of its prefix hash table, leasecached in its own, so the lines are sorted.
				lines := strings.SplitAfter(n.unprefix(p.value()), "\r\n")
				slices.Sort(lines)
				value = fmt.Sprintf("%q", strings.Join(lines, ""))
			}
			fmt.Fprintf(&out, "STAT %02x %02x kl=%d el=%d dt=%02x opq=%08x cas=%s name=%q value=%s\n",
				p.magic(), p.op(), p.keyLen(), p.extLen(), p.datatype(), p.opaque(), n.casOrdinal(p.cas()), statClassName(name), value)
			continue
		}
		bodyLen := fmt.Sprint(p.bodyLen())
		value := n.unprefix(p.value())
		if p.magic() == binResMagic && p.op() == opVersion && p.status() == stSuccess {
			bodyLen, value = "<version>", "<version>"
		}
		fmt.Fprintf(&out, "%02x %02x kl=%d el=%d dt=%02x st=%04x bl=%s opq=%08x cas=%s ext=%x key=%q val=%q\n",
			p.magic(), p.op(), p.keyLen(), p.extLen(), p.datatype(), p.status(), bodyLen, p.opaque(), n.casOrdinal(p.cas()),
			p.extras(), n.unprefix(p.key()), truncate([]byte(value), 200))
	}
	if len(rest) > 0 {
		fmt.Fprintf(&out, "<partial %s>\n", hexTrunc(rest, 200))
	}
	return out.String()
}

// hexDump renders bytes as hex for reports, a packet header per line where b splits into packets.
func hexDump(b []byte) string {
	pkts, rest := splitBinReplies(b)
	var out strings.Builder
	for _, p := range pkts {
		fmt.Fprintf(&out, "%x %s\n", p.hdr, hexTrunc(p.body, 256))
	}
	if len(rest) > 0 {
		fmt.Fprintf(&out, "%s\n", hexTrunc(rest, 256))
	}
	return out.String()
}

// hexTrunc is b in hex, cut after n bytes.
func hexTrunc(b []byte, n int) string {
	if len(b) <= n {
		return fmt.Sprintf("%x", b)
	}
	return fmt.Sprintf("%x...(%d more bytes)", b[:n], len(b)-n)
}

// binSentinel is the NOOP that ends every step of a binary script: its reply (below) marks the end
// of everything sent before it. Its opaque is one no other request uses.
var (
	binSentinelReq   = bSimple(opNoop).withOpaque(0x5e5e5e5e).encode("", 0, 0)
	binSentinelReply = func() []byte {
		b := make([]byte, binHdrLen)
		b[0], b[1] = binResMagic, opNoop
		binary.BigEndian.PutUint32(b[12:], 0x5e5e5e5e)
		return b
	}()
)

// endsWithBinSentinel reports whether b's packets end with the sentinel's reply (a whole packet,
// not bytes of a value that happen to look like one).
func endsWithBinSentinel(b []byte) bool {
	if !bytes.HasSuffix(b, binSentinelReply) {
		return false
	}
	pkts, rest := splitBinReplies(b)
	return len(rest) == 0 && len(pkts) > 0 && bytes.Equal(pkts[len(pkts)-1].hdr, binSentinelReply) && len(pkts[len(pkts)-1].body) == 0
}

// TestBinPacketHelpers checks the builder and the normaliser on hand-written bytes (no server).
func TestBinPacketHelpers(t *testing.T) {
	set := bStore(opSet, "$ka", "v", 0xdeadbeef, 100).withCAS(0x0102030405060708).withOpaque(9).withVbucket(0xbeef).withDatatype(1)
	assert.Equal(t, "80"+"01"+"0004"+"08"+"01"+"beef"+"0000000d"+"00000009"+"0102030405060708"+"deadbeef00000064"+"70317861"+"76",
		fmt.Sprintf("%x", set.encode("p1x", 0, 0)))
	// Lying lengths, the CAS of the last reply, an opaque numbered by the runner, a bad magic.
	assert.Equal(t, "81"+"00"+"012c"+"00"+"00"+"0000"+"00000001"+"00000007"+"000000000000002a"+"6162",
		fmt.Sprintf("%x", bGet(opGet, "ab").withKeyLen(300).withBodyLen(1).withCASRef(casLast).withMagic(0x81).encode("", 7, 42)))
	assert.Equal(t, uint64(42+casWrongDelta), binary.BigEndian.Uint64(bGet(opGet, "a").withCASRef(casLastWrong).encode("", 1, 42)[16:]))
	assert.Equal(t, "get p1x\r\n", string(bRaw("get $k\r\n").encode("p1x", 1, 1)))

	// Replies: a GET hit, a SET reply with the same CAS, a STAT pair and terminator, half a packet.
	hit := []byte("\x81\x00\x00\x00\x04\x00\x00\x00\x00\x00\x00\x05\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x10\x00" + "\x00\x00\x00\x07" + "x")
	set2 := []byte("\x81\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x20\x00")
	stat := func(name, value string) []byte {
		b := make([]byte, binHdrLen)
		b[0], b[1] = binResMagic, opStat
		binary.BigEndian.PutUint16(b[2:], uint16(len(name)))
		binary.BigEndian.PutUint32(b[8:], uint32(len(name)+len(value)))
		return append(append(b, name...), value...)
	}
	var all []byte
	for _, b := range [][]byte{hit, set2, hit, stat("pid", "123"), stat("lease_grants", "0"), stat("items:12:number", "1"), stat("", "")} {
		all = append(all, b...)
	}
	all = append(all, hit[:20]...)
	pkts, rest := splitBinReplies(all)
	require.Len(t, pkts, 7)
	assert.Len(t, rest, 20)
	assert.Equal(t, uint64(lastBinCAS(all)), uint64(0x1000))
	norm := newBinNormalizer("p1x").render(all)
	assert.Equal(t, `81 00 kl=0 el=4 dt=00 st=0000 bl=5 opq=00000001 cas=#1 ext=00000007 key="" val="x"
81 01 kl=0 el=0 dt=00 st=0000 bl=0 opq=00000002 cas=#2 ext= key="" val=""
81 00 kl=0 el=4 dt=00 st=0000 bl=5 opq=00000001 cas=#1 ext=00000007 key="" val="x"
STAT 81 10 kl=3 el=0 dt=00 opq=00000000 cas=0 name="pid" value=<v>
STAT 81 10 kl=15 el=0 dt=00 opq=00000000 cas=0 name="items:N:number" value=<v>
81 10 kl=0 el=0 dt=00 st=0000 bl=0 opq=00000000 cas=0 ext= key="" val=""
<partial `+fmt.Sprintf("%x", hit[:20])+`>
`, norm)
	assert.True(t, endsWithBinSentinel(append(append([]byte(nil), hit...), binSentinelReply...)))
	assert.False(t, endsWithBinSentinel(binSentinelReply[1:]))
}
