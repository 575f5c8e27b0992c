package load

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Buffer sizes of a client connection. The read buffer grows (once) when a single reply block is larger.
const (
	readBufSize  = 64 << 10
	writeBufSize = 64 << 10
	// maxReplyLine bounds one reply line: a VALUE line is at most a 250-byte key and a few numbers.
	maxReplyLine = 1024
)

var (
	errReplyLineTooLong = errors.New("reply line too long")
	crlf                = []byte("\r\n")
	replyEnd            = []byte("END")
	replyStored         = []byte("STORED")
	replyNotStored      = []byte("NOT_STORED")
	replyValue          = []byte("VALUE ")
	replyLValue         = []byte("LVALUE ")
	replyServerError    = []byte("SERVER_ERROR")
)

// serverError is an error line from the server (ERROR, CLIENT_ERROR ..., SERVER_ERROR ...).
type serverError struct{ line string }

func (e *serverError) Error() string { return "server replied " + strconv.Quote(e.line) }

// replyReader is a buffered reader that hands out reply lines and data blocks as views into its own
// buffer, valid until the next call: parsing a reply allocates nothing.
type replyReader struct {
	r          io.Reader
	buf        []byte
	start, end int
	// keyBuf holds the key of the value being read while block() may move the buffer under it.
	keyBuf [maxKeyLen]byte
}

func newReplyReader(r io.Reader) *replyReader {
	return &replyReader{r: r, buf: make([]byte, readBufSize)}
}

// fill reads more bytes, first making room at the end of the buffer (and room for need bytes in all).
func (rr *replyReader) fill(need int) error {
	if rr.start > 0 && (rr.end == len(rr.buf) || need > len(rr.buf)-rr.start) {
		n := copy(rr.buf, rr.buf[rr.start:rr.end])
		rr.start, rr.end = 0, n
	}
	if need > len(rr.buf) {
		nb := make([]byte, need+readBufSize)
		copy(nb, rr.buf[rr.start:rr.end])
		rr.buf, rr.end, rr.start = nb, rr.end-rr.start, 0
	}
	n, err := rr.r.Read(rr.buf[rr.end:])
	rr.end += n
	if n > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// line returns the next line without its "\r\n".
func (rr *replyReader) line() ([]byte, error) {
	scanned := 0
	for {
		if i := bytes.Index(rr.buf[rr.start+scanned:rr.end], crlf); i >= 0 {
			l := rr.buf[rr.start : rr.start+scanned+i]
			rr.start += scanned + i + 2
			return l, nil
		}
		if rr.end-rr.start > maxReplyLine {
			return nil, errReplyLineTooLong
		}
		if rr.end-rr.start > 0 {
			scanned = rr.end - rr.start - 1 // a '\r' may be the last byte
		}
		if err := rr.fill(0); err != nil {
			return nil, fmt.Errorf("read reply line: %w", err)
		}
	}
}

// block returns the next n data bytes and consumes the "\r\n" after them.
func (rr *replyReader) block(n int) ([]byte, error) {
	for rr.end-rr.start < n+2 {
		if err := rr.fill(n + 2); err != nil {
			return nil, fmt.Errorf("read %d-byte data block: %w", n, err)
		}
	}
	b := rr.buf[rr.start : rr.start+n]
	if rr.buf[rr.start+n] != '\r' || rr.buf[rr.start+n+1] != '\n' {
		return nil, fmt.Errorf("data block of %d bytes not followed by \\r\\n", n)
	}
	rr.start += n + 2
	return b, nil
}

// checkErrorLine turns an error reply into an error; other lines give nil.
func checkErrorLine(l []byte) error {
	if bytes.Equal(l, []byte("ERROR")) || bytes.HasPrefix(l, []byte("CLIENT_ERROR")) ||
		bytes.HasPrefix(l, replyServerError) {
		return &serverError{line: string(l)}
	}
	return nil
}

// valueChecker sees every value of a retrieval reply (verification of fills).
type valueChecker interface {
	check(key []byte, flags uint64, data []byte)
}

// readGetReply consumes one get/gets/lease-get reply (VALUE or LVALUE blocks, then END) and returns the
// number of VALUE hits. LVALUE blocks (lease-get misses) are consumed and not counted as hits.
func (rr *replyReader) readGetReply(vc valueChecker) (hits int, err error) {
	for {
		l, err := rr.line()
		if err != nil {
			return hits, err
		}
		if bytes.Equal(l, replyEnd) {
			return hits, nil
		}
		key, flags, size, lease, err := parseValueLine(l)
		if err != nil {
			return hits, err
		}
		// key is a view into the buffer that block may move: keep a copy for the checker.
		var k []byte
		if vc != nil {
			k = rr.keyBuf[:copy(rr.keyBuf[:], key)]
		}
		data, err := rr.block(size)
		if err != nil {
			return hits, err
		}
		if !lease {
			hits++
			if vc != nil {
				vc.check(k, flags, data)
			}
		}
	}
}

// parseValueLine parses a line of a retrieval reply other than END: "VALUE <key> <flags> <bytes> [<cas>]"
// or, from lease-get, "LVALUE <key> <token> <flags> <bytes>". key is a view into l. An error line from
// the server becomes a *serverError, anything else an error.
func parseValueLine(l []byte) (key []byte, flags uint64, size int, lease bool, err error) {
	switch {
	case bytes.HasPrefix(l, replyValue):
		l = l[len(replyValue):]
	case bytes.HasPrefix(l, replyLValue):
		l = l[len(replyLValue):]
		lease = true
	default:
		if e := checkErrorLine(l); e != nil {
			return nil, 0, 0, false, e
		}
		return nil, 0, 0, false, fmt.Errorf("unexpected line in retrieval reply: %q", l)
	}
	key, rest := NextField(l)
	if lease {
		_, rest = NextField(rest) // token
	}
	flagsField, rest := NextField(rest)
	sizeField, _ := NextField(rest)
	flags, ok1 := ParseUint(flagsField)
	n, ok2 := ParseUint(sizeField)
	if len(key) == 0 || !ok1 || !ok2 || n > maxValueSize*4 {
		return nil, 0, 0, false, fmt.Errorf("malformed value line %q", l)
	}
	return key, flags, int(n), lease, nil
}

// storeResult is the outcome of one storage command.
type storeResult int

const (
	storeOK storeResult = iota
	storeNotStored
	storeServerError // e.g. SERVER_ERROR out of memory: counted, not fatal
)

// readStoreReply consumes one set/lease-set reply.
func (rr *replyReader) readStoreReply() (storeResult, error) {
	l, err := rr.line()
	if err != nil {
		return 0, err
	}
	return parseStoreLine(l)
}

// parseStoreLine interprets the reply line of a storage command.
func parseStoreLine(l []byte) (storeResult, error) {
	switch {
	case bytes.Equal(l, replyStored):
		return storeOK, nil
	case bytes.Equal(l, replyNotStored):
		return storeNotStored, nil
	case bytes.HasPrefix(l, replyServerError):
		return storeServerError, nil
	}
	if e := checkErrorLine(l); e != nil {
		return 0, e
	}
	return 0, fmt.Errorf("unexpected reply to a set: %q", l)
}

// NextField splits the first space-separated field off a request or reply line.
func NextField(b []byte) (field, rest []byte) {
	for len(b) > 0 && b[0] == ' ' {
		b = b[1:]
	}
	i := bytes.IndexByte(b, ' ')
	if i < 0 {
		return b, nil
	}
	return b[:i], b[i+1:]
}

// ParseUint parses a decimal number of at most 20 digits; ok is false for anything else, and on overflow.
func ParseUint(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	var v uint64
	if len(b) < 20 { // nineteen digits cannot overflow: no check per digit
		for _, c := range b {
			if c-'0' > 9 {
				return 0, false
			}
			v = v*10 + uint64(c-'0')
		}
		return v, true
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (^uint64(0)-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}

// Request encoders: each appends one command to dst and allocates nothing when dst has room.

// appendGet appends "<cmd> <key>...\r\n" for the given indexes.
func appendGet(dst []byte, cmd string, ks keySpace, idx []uint64) []byte {
	dst = append(dst, cmd...)
	for _, i := range idx {
		dst = append(dst, ' ')
		dst = ks.appendKey(dst, i)
	}
	return append(dst, '\r', '\n')
}

// appendSet appends "set <key> <flags> 0 <bytes>\r\n<data>\r\n" with the index's deterministic value.
func appendSet(dst []byte, ks keySpace, vs *valueSource, i uint64) []byte {
	dst = append(dst, "set "...)
	dst = ks.appendKey(dst, i)
	dst = append(dst, ' ')
	dst = strconv.AppendUint(dst, uint64(vs.flags(i)), 10)
	dst = append(dst, " 0 "...)
	dst = strconv.AppendUint(dst, uint64(vs.size), 10)
	dst = append(dst, '\r', '\n')
	dst = append(dst, vs.value(i)...)
	return append(dst, '\r', '\n')
}
