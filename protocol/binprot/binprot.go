// Package binprot is memcached's binary protocol as memcached 1.6.18 speaks it (proto_bin.c): the packet
// header, the opcodes and statuses, which requests a header makes valid (dispatch_bin_command's rules), and
// the replies. It does no I/O and touches no storage; server/binary.go executes what it reads. See
// doc/design/binary.md.
package binprot

import "encoding/binary"

// HeaderLen is the length of every request and response header.
const HeaderLen = 24

// Magic bytes: the first byte of a request selects the binary protocol (-B auto).
const (
	MagicRequest  = 0x80
	MagicResponse = 0x81
)

// MaxKeyLen is memcached's KEY_MAX_LENGTH: the binary header allows 16-bit key lengths, memcached's items
// do not. A longer key is a protocol error (EINVAL, then close).
const MaxKeyLen = 250

// Opcode is a request's command. Quiet opcodes answer only what is not a success (Base, Quiet).
type Opcode uint8

// The opcodes memcached 1.6.18 dispatches. Every other one, the range commands 0x30-0x3c included, is
// answered UNKNOWN_COMMAND.
const (
	OpGet           Opcode = 0x00
	OpSet           Opcode = 0x01
	OpAdd           Opcode = 0x02
	OpReplace       Opcode = 0x03
	OpDelete        Opcode = 0x04
	OpIncrement     Opcode = 0x05
	OpDecrement     Opcode = 0x06
	OpQuit          Opcode = 0x07
	OpFlush         Opcode = 0x08
	OpGetQ          Opcode = 0x09
	OpNoop          Opcode = 0x0a
	OpVersion       Opcode = 0x0b
	OpGetK          Opcode = 0x0c
	OpGetKQ         Opcode = 0x0d
	OpAppend        Opcode = 0x0e
	OpPrepend       Opcode = 0x0f
	OpStat          Opcode = 0x10
	OpSetQ          Opcode = 0x11
	OpAddQ          Opcode = 0x12
	OpReplaceQ      Opcode = 0x13
	OpDeleteQ       Opcode = 0x14
	OpIncrementQ    Opcode = 0x15
	OpDecrementQ    Opcode = 0x16
	OpQuitQ         Opcode = 0x17
	OpFlushQ        Opcode = 0x18
	OpAppendQ       Opcode = 0x19
	OpPrependQ      Opcode = 0x1a
	OpTouch         Opcode = 0x1c
	OpGat           Opcode = 0x1d
	OpGatQ          Opcode = 0x1e
	OpSASLListMechs Opcode = 0x20
	OpSASLAuth      Opcode = 0x21
	OpSASLStep      Opcode = 0x22
	OpGatK          Opcode = 0x23
	OpGatKQ         Opcode = 0x24
)

// quietOf maps each quiet opcode to the command it is a quiet form of.
var quietOf = map[Opcode]Opcode{
	OpSetQ: OpSet, OpAddQ: OpAdd, OpReplaceQ: OpReplace, OpDeleteQ: OpDelete, OpIncrementQ: OpIncrement,
	OpDecrementQ: OpDecrement, OpQuitQ: OpQuit, OpFlushQ: OpFlush, OpAppendQ: OpAppend, OpPrependQ: OpPrepend,
	OpGetQ: OpGet, OpGetKQ: OpGetK, OpGatQ: OpGat, OpGatKQ: OpGatK,
}

// bases is quietOf as a table indexed by opcode (every opcode maps to itself unless quiet), so that the
// request path does no map lookup.
var bases, quiets = func() (b [256]Opcode, q [256]bool) {
	for i := range b {
		b[i] = Opcode(i)
	}
	for quiet, base := range quietOf {
		b[quiet], q[quiet] = base, true
	}
	return
}()

// Base is the command op is a form of: GetQ's is Get, Get's is Get.
func (op Opcode) Base() Opcode { return bases[op] }

// Quiet reports whether op is a quiet form: its successes are not answered, except that a quiet get
// answers its hits (a miss is what it keeps quiet).
func (op Opcode) Quiet() bool { return quiets[op] }

// Status is a response's status.
type Status uint16

// The statuses memcached 1.6.18 sends.
const (
	StatusOK             Status = 0x00
	StatusKeyENOENT      Status = 0x01
	StatusKeyEEXISTS     Status = 0x02
	StatusE2BIG          Status = 0x03
	StatusEINVAL         Status = 0x04
	StatusNotStored      Status = 0x05
	StatusDeltaBadval    Status = 0x06
	StatusAuthError      Status = 0x20
	StatusAuthContinue   Status = 0x21
	StatusUnknownCommand Status = 0x81
	StatusENOMEM         Status = 0x82
)

// Text is the body memcached sends with an error status (write_bin_error).
func (s Status) Text() string {
	switch s {
	case StatusENOMEM:
		return "Out of memory"
	case StatusUnknownCommand:
		return "Unknown command"
	case StatusKeyENOENT:
		return "Not found"
	case StatusEINVAL:
		return "Invalid arguments"
	case StatusKeyEEXISTS:
		return "Data exists for key."
	case StatusE2BIG:
		return "Too large."
	case StatusDeltaBadval:
		return "Non-numeric server-side value for incr or decr"
	case StatusNotStored:
		return "Not stored."
	case StatusAuthError:
		return "Auth failure."
	}
	return "UNHANDLED ERROR"
}

// Header is a request header. Opaque is echoed in every reply to the request, byte for byte.
type Header struct {
	Magic   uint8
	Opcode  Opcode
	KeyLen  uint16
	ExtLen  uint8
	BodyLen uint32
	Opaque  uint32
	Cas     uint64
}

// ReadHeader reads the header at the start of b, which holds at least HeaderLen bytes. The data type and
// vbucket fields are not read: memcached ignores them.
func ReadHeader(b []byte) Header {
	_ = b[HeaderLen-1]
	return Header{
		Magic:   b[0],
		Opcode:  Opcode(b[1]),
		KeyLen:  binary.BigEndian.Uint16(b[2:]),
		ExtLen:  b[4],
		BodyLen: binary.BigEndian.Uint32(b[8:]),
		Opaque:  binary.BigEndian.Uint32(b[12:]),
		Cas:     binary.BigEndian.Uint64(b[16:]),
	}
}

// Prefix is how many bytes of the request memcached reads before it dispatches it: the header, the extras
// and the key. A request whose value follows (HasValue) is executed once all of BodyLen has arrived.
func (h *Header) Prefix() int { return HeaderLen + int(h.ExtLen) + int(h.KeyLen) }

// LengthsFit reports whether the key and extras fit in the body. When they do not, memcached answers
// UNKNOWN_COMMAND and closes the connection.
func (h *Header) LengthsFit() bool {
	return uint32(h.KeyLen) <= h.BodyLen && uint32(h.KeyLen)+uint32(h.ExtLen) <= h.BodyLen
}

// Verdict is what memcached makes of a header whose lengths fit and whose sender may send it (SASL).
type Verdict uint8

const (
	// Valid: execute the request.
	Valid Verdict = iota
	// Invalid: EINVAL, then close (handle_binary_protocol_error). Wrong extras or key length for the
	// command, a key over MaxKeyLen.
	Invalid
	// Unknown: UNKNOWN_COMMAND, then BodyLen more bytes are discarded. memcached counts them from after
	// the extras and key it has already read, so they run into the next request: SwallowUnknown.
	Unknown
)

// Check is dispatch_bin_command's validation of a request's lengths for its command.
func (h *Header) Check() Verdict {
	if h.KeyLen > MaxKeyLen {
		return Invalid
	}
	ext, key, body := h.ExtLen, h.KeyLen, h.BodyLen
	var ok bool
	switch h.Opcode.Base() {
	case OpVersion, OpNoop, OpQuit, OpSASLListMechs:
		ok = ext == 0 && key == 0 && body == 0
	case OpFlush:
		ok = key == 0 && body == uint32(ext) && (ext == 0 || ext == 4)
	case OpSet, OpAdd, OpReplace:
		ok = ext == 8 && key != 0 && body >= uint32(key)+8
	case OpGet, OpGetK:
		ok = ext == 0 && body == uint32(key) && key > 0
	case OpDelete:
		ok = key > 0 && ext == 0 && body == uint32(key)
	case OpIncrement, OpDecrement:
		ok = key > 0 && ext == 20 && body == uint32(key)+20
	case OpAppend, OpPrepend:
		ok = key > 0 && ext == 0
	case OpStat:
		ok = ext == 0
	case OpSASLAuth, OpSASLStep:
		ok = ext == 0 && key != 0
	case OpTouch, OpGat, OpGatK:
		ok = ext == 4 && key != 0
	default:
		return Unknown
	}
	if !ok {
		return Invalid
	}
	return Valid
}

// HasValue reports whether the command reads the rest of the body after its prefix as a value. The other
// commands consume only their prefix: memcached reads bytes a header declares beyond it (a stat or touch
// with a longer body) as the next request.
func (h *Header) HasValue() bool {
	switch h.Opcode.Base() {
	case OpSet, OpAdd, OpReplace, OpAppend, OpPrepend, OpSASLAuth, OpSASLStep:
		return true
	}
	return false
}

// ValueLen is the length of the value that follows the prefix, for a command that HasValue.
func (h *Header) ValueLen() int { return int(h.BodyLen) - int(h.ExtLen) - int(h.KeyLen) }

// SwallowUnknown is how many bytes after its prefix memcached discards for a command it does not know:
// the whole body length, though the extras and key were part of it.
func (h *Header) SwallowUnknown() int { return int(h.BodyLen) }

// SoleGetKey returns the key of the request in b when b holds exactly one whole, valid GET, GETQ, GETK or
// GETKQ and nothing after it, for the server to fetch the key's memory ahead of executing it; else nil.
func SoleGetKey(b []byte) []byte {
	if len(b) < HeaderLen || b[0] != MagicRequest {
		return nil
	}
	h := ReadHeader(b)
	if base := h.Opcode.Base(); base != OpGet && base != OpGetK || !h.LengthsFit() || h.Check() != Valid ||
		len(b) != h.Prefix() {
		return nil
	}
	return b[HeaderLen:]
}

// Request is a whole request: its header and the extras, key and value that follow it. The slices alias
// the input and are valid until it is consumed.
type Request struct {
	Header
	Extras, Key, Value []byte
}

// Slice fills r from p, which holds h's request: its prefix, and its value when h HasValue.
func (r *Request) Slice(h Header, p []byte) {
	r.Header = h
	ext, key := HeaderLen+int(h.ExtLen), HeaderLen+int(h.ExtLen)+int(h.KeyLen)
	r.Extras, r.Key, r.Value = p[HeaderLen:ext], p[ext:key], nil
	if h.HasValue() {
		r.Value = p[key : key+h.ValueLen()]
	}
}

// Uint32 reads the big-endian 32-bit extras field at off (flags at 0 and expiry at 4 for a store; the
// expiry at 0 for touch, gat and flush; the expiry at 16 for incr and decr).
func (r *Request) Uint32(off int) uint32 { return binary.BigEndian.Uint32(r.Extras[off:]) }

// Uint64 reads the big-endian 64-bit extras field at off (delta at 0 and initial value at 8 for incr and
// decr).
func (r *Request) Uint64(off int) uint64 { return binary.BigEndian.Uint64(r.Extras[off:]) }

// NoCreate is the incr/decr expiry that means "do not create a missing key".
const NoCreate = 0xffffffff

// Response is the header of a reply to the request with opcode Opcode and opaque Opaque.
type Response struct {
	Opcode  Opcode
	Status  Status
	ExtLen  uint8
	KeyLen  uint16
	BodyLen uint32 // extras, key and value
	Opaque  uint32
	Cas     uint64
}

// Append appends the response header to dst.
func (r *Response) Append(dst []byte) []byte {
	var b [HeaderLen]byte
	b[0] = MagicResponse
	b[1] = byte(r.Opcode)
	binary.BigEndian.PutUint16(b[2:], r.KeyLen)
	b[4] = r.ExtLen
	binary.BigEndian.PutUint16(b[6:], uint16(r.Status))
	binary.BigEndian.PutUint32(b[8:], r.BodyLen)
	binary.BigEndian.PutUint32(b[12:], r.Opaque)
	binary.BigEndian.PutUint64(b[16:], r.Cas)
	return append(dst, b[:]...)
}

// AppendError appends an error reply for the request h: the status and its text.
func AppendError(dst []byte, h *Header, s Status) []byte {
	text := s.Text()
	r := Response{Opcode: h.Opcode, Status: s, BodyLen: uint32(len(text)), Opaque: h.Opaque}
	return append(r.Append(dst), text...)
}

// AppendStatus appends a reply to the request h with status s and no body (AUTH_CONTINUE's).
func AppendStatus(dst []byte, h *Header, s Status) []byte {
	r := Response{Opcode: h.Opcode, Status: s, Opaque: h.Opaque}
	return r.Append(dst)
}

// AppendSimple appends a success reply for the request h with body (no extras, no key) and cas.
func AppendSimple(dst []byte, h *Header, body []byte, cas uint64) []byte {
	r := Response{Opcode: h.Opcode, BodyLen: uint32(len(body)), Opaque: h.Opaque, Cas: cas}
	return append(r.Append(dst), body...)
}

// AppendStat appends one stat of a STAT reply: the name as key, the value as value. An empty name and
// value make the packet that ends the reply.
func AppendStat(dst []byte, h *Header, name, value []byte) []byte {
	r := Response{Opcode: h.Opcode, KeyLen: uint16(len(name)), BodyLen: uint32(len(name) + len(value)), Opaque: h.Opaque}
	return append(append(r.Append(dst), name...), value...)
}

// AppendCounter appends a successful incr/decr reply: the new value as 8 bytes.
func AppendCounter(dst []byte, h *Header, value, cas uint64) []byte {
	r := Response{Opcode: h.Opcode, BodyLen: 8, Opaque: h.Opaque, Cas: cas}
	return binary.BigEndian.AppendUint64(r.Append(dst), value)
}

// AppendItemHeader appends the part of a get, gat or touch hit before the value: the header, the flags as
// extras, and the key when withKey. n is the value's length (0 for touch, which does not return it).
func AppendItemHeader(dst []byte, h *Header, key []byte, withKey bool, flags uint32, n int, cas uint64) []byte {
	r := Response{Opcode: h.Opcode, ExtLen: 4, BodyLen: uint32(4 + n), Opaque: h.Opaque, Cas: cas}
	if withKey {
		r.KeyLen = uint16(len(key))
		r.BodyLen += uint32(len(key))
	}
	dst = binary.BigEndian.AppendUint32(r.Append(dst), flags)
	if withKey {
		dst = append(dst, key...)
	}
	return dst
}

// AppendMiss appends a get miss: KEY_ENOENT with memcached's text, or, for GetK and GatK, with the key as
// both key and body and no text (write_bin_miss_response).
func AppendMiss(dst []byte, h *Header, key []byte, withKey bool) []byte {
	if !withKey {
		return AppendError(dst, h, StatusKeyENOENT)
	}
	r := Response{Opcode: h.Opcode, Status: StatusKeyENOENT, KeyLen: uint16(len(key)), BodyLen: uint32(len(key)), Opaque: h.Opaque}
	return append(r.Append(dst), key...)
}
