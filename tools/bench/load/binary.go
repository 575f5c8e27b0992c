package load

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// memcached's binary protocol, the part the generator speaks (-binary): GET for single gets, GETKQ for
// every key of a multi-get closed by a NOOP (as Dalli and libmemcached fetch many keys), and SET. A
// packet is a 24-byte header, then extras, key and value; every number is big-endian.
//
// The generator checks every reply against its request: magic, opcode, opaque (each packet of a batch gets
// its own), status, the lengths of extras, key and value, and for a hit the flags, key and value byte for
// byte. A reply that is wrong but still framed (a wrong status, a wrong value) counts as an error and the
// run goes on; one that loses the framing or the correlation (bad magic, an opaque that matches no request
// outstanding, an absurd body length) ends the connection's run, as a text protocol error does.

// Header layout and magic bytes.
const (
	binHeaderLen = 24
	binReqMagic  = 0x80
	binResMagic  = 0x81
)

// Opcodes the generator sends.
const (
	binOpGet   = 0x00
	binOpSet   = 0x01
	binOpNoop  = 0x0a
	binOpGetKQ = 0x0d
)

// Status codes a reply may carry (memcached's protocol_binary_response_status).
const (
	binStatusOK             = 0x00
	binStatusKeyENOENT      = 0x01
	binStatusKeyEEXISTS     = 0x02
	binStatusE2BIG          = 0x03
	binStatusEINVAL         = 0x04
	binStatusNotStored      = 0x05
	binStatusDeltaBadval    = 0x06
	binStatusAuthError      = 0x20
	binStatusAuthContinue   = 0x21
	binStatusUnknownCommand = 0x81
	binStatusENOMEM         = 0x82
)

// binStatusName names a status code for error messages.
func binStatusName(s uint16) string {
	switch s {
	case binStatusOK:
		return "OK"
	case binStatusKeyENOENT:
		return "KEY_ENOENT"
	case binStatusKeyEEXISTS:
		return "KEY_EEXISTS"
	case binStatusE2BIG:
		return "E2BIG"
	case binStatusEINVAL:
		return "EINVAL"
	case binStatusNotStored:
		return "NOT_STORED"
	case binStatusDeltaBadval:
		return "DELTA_BADVAL"
	case binStatusAuthError:
		return "AUTH_ERROR"
	case binStatusAuthContinue:
		return "AUTH_CONTINUE"
	case binStatusUnknownCommand:
		return "UNKNOWN_COMMAND"
	case binStatusENOMEM:
		return "ENOMEM"
	}
	return fmt.Sprintf("0x%02x", s)
}

// binSetExtras is the length of SET's extras: flags and expiry.
const binSetExtras = 8

// binMaxBody bounds a reply's declared body length: anything larger than the largest value the generator
// writes (and an error message) means the framing is lost.
const binMaxBody = 4*maxValueSize + 1024

// appendBinHeader appends a request header.
func appendBinHeader(dst []byte, op byte, keyLen, extLen, bodyLen int, opaque uint32) []byte {
	var h [binHeaderLen]byte
	h[0], h[1] = binReqMagic, op
	binary.BigEndian.PutUint16(h[2:], uint16(keyLen))
	h[4] = byte(extLen)
	// h[5] data type 0 (raw bytes), h[6:8] vbucket 0
	binary.BigEndian.PutUint32(h[8:], uint32(bodyLen))
	binary.BigEndian.PutUint32(h[12:], opaque)
	// h[16:24] CAS 0
	return append(dst, h[:]...)
}

// appendBinGet appends a GET (or GETKQ: op) of index i's key; it allocates nothing when dst has room.
func appendBinGet(dst []byte, op byte, ks keySpace, i uint64, opaque uint32) []byte {
	dst = appendBinHeader(dst, op, ks.size, 0, ks.size, opaque)
	return ks.appendKey(dst, i)
}

// appendBinSet appends a SET of index i's key with its deterministic flags and value, no expiry, CAS 0.
func appendBinSet(dst []byte, ks keySpace, vs *valueSource, i uint64, opaque uint32) []byte {
	dst = appendBinHeader(dst, binOpSet, ks.size, binSetExtras, binSetExtras+ks.size+vs.size, opaque)
	dst = binary.BigEndian.AppendUint32(dst, vs.flags(i))
	dst = binary.BigEndian.AppendUint32(dst, 0) // expiry: never
	dst = ks.appendKey(dst, i)
	return append(dst, vs.value(i)...)
}

// appendBinNoop appends a NOOP, which closes a batch of quiet requests: its reply comes after theirs.
func appendBinNoop(dst []byte, opaque uint32) []byte {
	return appendBinHeader(dst, binOpNoop, 0, 0, 0, opaque)
}

// binHeader is a reply header.
type binHeader struct {
	magic, op  byte
	keyLen     int
	extLen     int
	dataType   byte
	status     uint16
	bodyLen    int
	opaque     uint32
	cas        uint64
	raw        [binHeaderLen]byte // for error messages
	rawPresent bool
}

func parseBinHeader(b []byte) binHeader {
	h := binHeader{magic: b[0], op: b[1], keyLen: int(binary.BigEndian.Uint16(b[2:])), extLen: int(b[4]),
		dataType: b[5], status: binary.BigEndian.Uint16(b[6:]), bodyLen: int(binary.BigEndian.Uint32(b[8:])),
		opaque: binary.BigEndian.Uint32(b[12:]), cas: binary.BigEndian.Uint64(b[16:])}
	copy(h.raw[:], b[:binHeaderLen])
	h.rawPresent = true
	return h
}

// binExpect is one request packet of a batch whose reply the parser waits for.
type binExpect struct {
	op     byte
	opaque uint32
	idx    uint64 // the key's index (GET, GETKQ, SET)
}

// quiet says whether the server answers the packet only when it has something to say (a GETKQ hit).
func (e binExpect) quiet() bool { return e.op == binOpGetKQ }

// binParser is replyParser's counterpart for the binary protocol: fed whatever bytes have arrived, it
// consumes every whole reply header and every body byte among them (bodies are checked as they stream
// through, never buffered) and says how many bytes it used; the caller keeps the rest, at most a partial
// header. A batch's packets are in exp, in the order they were written, each with its own opaque. Parsing
// allocates nothing but the message of the first error.
type binParser struct {
	ks keySpace
	vs *valueSource

	exp  []binExpect
	next int // index in exp of the packet whose reply is due

	// The reply whose body is streaming: body bytes still to come, of a body bodyLen long; when verify,
	// the body must be flags, key (keyed replies) and value, compared as they arrive; bad records a
	// mismatch. hit counts it as a hit once its body checks out.
	inBody  bool
	body    int
	off     int
	verify  bool
	bad     bool
	hit     bool
	cur     binHeader
	flags   [4]byte
	key     []byte
	keyBuf  [maxKeyLen]byte
	value   []byte
	current binExpect
	// Where the first mismatch of the body was, and the body bytes from there (up to 32 of them).
	badOff      int
	badBytes    []byte
	badBytesBuf [32]byte

	// What the replies said, over all batches since the parser was made.
	hits, sets, setFailed, errors uint64
	firstErr                      string
}

func newBinParser(ks keySpace, vs *valueSource, packets int) *binParser {
	return &binParser{ks: ks, vs: vs, exp: make([]binExpect, 0, packets)}
}

// reset starts a new batch; the caller then adds its packets with expect.
func (p *binParser) reset() {
	p.exp, p.next, p.inBody = p.exp[:0], 0, false
}

// expect adds the next packet of the batch.
func (p *binParser) expect(op byte, opaque uint32, idx uint64) {
	p.exp = append(p.exp, binExpect{op: op, opaque: opaque, idx: idx})
}

// done reports whether the last reply of the batch has been parsed.
func (p *binParser) done() bool { return p.next == len(p.exp) && !p.inBody }

// fail counts a reply that is wrong but framed; the first one's description is kept.
func (p *binParser) fail(format string, args ...any) {
	p.errors++
	if p.firstErr == "" {
		p.firstErr = fmt.Sprintf(format, args...)
	}
}

// fatalf is an error that ends the connection's run, with the header's bytes.
func fatalf(h *binHeader, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if h != nil && h.rawPresent {
		msg += " (header " + hex.EncodeToString(h.raw[:]) + ")"
	}
	return fmt.Errorf("binary reply: %s", msg)
}

// feed parses the replies in b, from where the previous feed stopped, and returns how many leading bytes
// of b it consumed; the caller passes the unconsumed rest again, with whatever arrives next appended. It
// stops after the batch's last reply. An error means the framing is lost and ends the connection's run.
func (p *binParser) feed(b []byte) (used int, err error) {
	i := 0
	for {
		if p.inBody {
			n := min(p.body, len(b)-i)
			if p.verify && !p.bad && n > 0 {
				p.check(b[i : i+n])
			}
			i += n
			p.body -= n
			p.off += n
			if p.body > 0 {
				return i, nil
			}
			p.endBody()
			continue
		}
		if p.next == len(p.exp) {
			return i, nil
		}
		if len(b)-i < binHeaderLen {
			return i, nil
		}
		h := parseBinHeader(b[i:])
		i += binHeaderLen
		if err := p.header(&h); err != nil {
			return i, err
		}
	}
}

// header matches a reply header with the packet it answers and decides what its body must be.
func (p *binParser) header(h *binHeader) error {
	if h.magic != binResMagic {
		return fatalf(h, "magic 0x%02x, want 0x%02x", h.magic, binResMagic)
	}
	if h.bodyLen > binMaxBody || h.keyLen+h.extLen > h.bodyLen {
		return fatalf(h, "body of %d bytes with %d bytes of extras and %d of key", h.bodyLen, h.extLen, h.keyLen)
	}
	// Quiet packets with no reply before this one are misses (a GETKQ miss is silent).
	for p.next < len(p.exp) && p.exp[p.next].opaque != h.opaque && p.exp[p.next].quiet() {
		p.next++
	}
	if p.next == len(p.exp) || p.exp[p.next].opaque != h.opaque {
		want := "none"
		if p.next < len(p.exp) {
			want = fmt.Sprintf("0x%08x (opcode 0x%02x)", p.exp[p.next].opaque, p.exp[p.next].op)
		}
		return fatalf(h, "opaque 0x%08x (opcode 0x%02x, status %s) answers no outstanding request; next reply due: %s",
			h.opaque, h.op, binStatusName(h.status), want)
	}
	e := p.exp[p.next]
	p.next++
	p.cur, p.current = *h, e
	p.inBody, p.body, p.off, p.verify, p.bad, p.hit = true, h.bodyLen, 0, false, false, false
	switch {
	case h.op != e.op:
		p.fail("opcode 0x%02x in the reply to opcode 0x%02x (header %x)", h.op, e.op, h.raw)
		return nil
	case h.dataType != 0:
		p.fail("data type 0x%02x in the reply to opcode 0x%02x (header %x)", h.dataType, e.op, h.raw)
		return nil
	}
	switch e.op {
	case binOpGet, binOpGetKQ:
		if h.status == binStatusKeyENOENT && e.op == binOpGet {
			return nil // a miss; its body is a message
		}
		if h.status != binStatusOK {
			p.fail("status %s in the reply to opcode 0x%02x (header %x)", binStatusName(h.status), e.op, h.raw)
			return nil
		}
		keyLen := 0
		if e.op == binOpGetKQ {
			keyLen = p.ks.size
		}
		if h.extLen != 4 || h.keyLen != keyLen || h.bodyLen != 4+keyLen+p.vs.size {
			p.fail("hit of opcode 0x%02x with %d bytes of extras, %d of key and a %d-byte body; want 4, %d and %d (header %x)",
				e.op, h.extLen, h.keyLen, h.bodyLen, keyLen, 4+keyLen+p.vs.size, h.raw)
			return nil
		}
		binary.BigEndian.PutUint32(p.flags[:], p.vs.flags(e.idx))
		p.key = p.keyBuf[:0]
		if keyLen > 0 {
			p.key = p.ks.appendKey(p.key, e.idx)
		}
		p.value = p.vs.value(e.idx)
		p.verify, p.hit = true, true
	case binOpSet:
		p.sets++
		if h.status != binStatusOK {
			p.setFailed++
			p.fail("status %s in the reply to a set (header %x)", binStatusName(h.status), h.raw)
			return nil
		}
		if h.bodyLen != 0 || h.cas == 0 {
			p.fail("set reply with a %d-byte body and CAS %d (header %x)", h.bodyLen, h.cas, h.raw)
		}
	case binOpNoop:
		if h.status != binStatusOK || h.bodyLen != 0 {
			p.fail("noop reply with status %s and a %d-byte body (header %x)", binStatusName(h.status), h.bodyLen, h.raw)
		}
	}
	return nil
}

// check compares the next body bytes with what they must be: flags, then the key, then the value.
func (p *binParser) check(chunk []byte) {
	off := p.off
	for len(chunk) > 0 {
		var seg []byte
		switch k := len(p.key); {
		case off < 4:
			seg = p.flags[off:]
		case off < 4+k:
			seg = p.key[off-4:]
		default:
			seg = p.value[off-4-k:]
		}
		n := min(len(seg), len(chunk))
		if string(seg[:n]) != string(chunk[:n]) {
			j := 0
			for seg[j] == chunk[j] {
				j++
			}
			p.bad, p.badOff = true, off+j
			p.badBytes = p.badBytesBuf[:copy(p.badBytesBuf[:], chunk[j:])]
			return
		}
		chunk, off = chunk[n:], off+n
	}
}

// endBody accounts for the reply whose body has just ended.
func (p *binParser) endBody() {
	p.inBody = false
	if !p.hit {
		return
	}
	if p.bad {
		p.fail("hit of opcode 0x%02x for key %s: body byte %d on differs from what was stored (flags, key, value), from there %x (header %x)",
			p.current.op, p.ks.appendKey(nil, p.current.idx), p.badOff, p.badBytes, p.cur.raw)
		return
	}
	p.hits++
}

// binOpVersion is the opcode BinaryPing asks with.
const binOpVersion = 0x0b

// binPingOpaque is BinaryPing's opaque ("bin!"), which the reply must echo.
const binPingOpaque = 0x62696e21

// BinaryPing checks that the server at addr speaks the binary protocol: a VERSION request must get a
// VERSION reply with status OK, the opaque echoed and a version string, within timeout. A server that
// speaks only text waits for a line end that never comes: that is a timeout, said as such. The error
// carries the bytes the server sent.
func BinaryPing(addr string, timeout time.Duration) error {
	c, err := dialConn(addr, timeout, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	if _, err := c.Write(appendBinHeader(nil, binOpVersion, 0, 0, 0, binPingOpaque)); err != nil {
		return fmt.Errorf("binary VERSION: %w", err)
	}
	var buf [binHeaderLen + 256]byte
	n, err := io.ReadAtLeast(c, buf[:], binHeaderLen)
	if err != nil {
		if n == 0 && errors.Is(err, os.ErrDeadlineExceeded) {
			return fmt.Errorf("binary VERSION (80 0b ..., opaque %08x): no reply in %v (a text-only server waits for a line end)",
				binPingOpaque, timeout)
		}
		return fmt.Errorf("binary VERSION: %d bytes of reply (%x): %w", n, buf[:n], err)
	}
	h := parseBinHeader(buf[:])
	if h.magic != binResMagic || h.op != binOpVersion || h.status != binStatusOK || h.opaque != binPingOpaque ||
		h.keyLen != 0 || h.extLen != 0 || h.bodyLen == 0 || h.bodyLen > 256 {
		return fmt.Errorf("binary VERSION: reply %x, want 81 0b, status OK, opaque %08x and a version", buf[:n], binPingOpaque)
	}
	return nil
}
