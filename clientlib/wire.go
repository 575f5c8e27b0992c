package clientlib

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"slices"
	"strconv"
)

// This file owns the text protocol's framing on the client side: writing request lines and data
// blocks, reading reply lines, VALUE headers and data blocks. Anything unexpected becomes a connError,
// which discards the connection.

var crlf = []byte("\r\n")

// Reply prefixes that end a request with an error but leave the connection in step.
var (
	prefixServerError = []byte("SERVER_ERROR")
	prefixClientError = []byte("CLIENT_ERROR")
	lineError         = []byte("ERROR")
)

func (cn *conn) protoErr(format string, line []byte) error {
	return &connError{addr: cn.srv.addr, op: "read", err: errors.Join(ErrProtocol, errors.New(format+": "+strconv.Quote(string(line))))}
}

func (cn *conn) ioErr(op string, err error) error {
	return &connError{addr: cn.srv.addr, op: op, err: err}
}

// readLine returns the next reply line without its CRLF. The slice is valid until the next read.
func (cn *conn) readLine() ([]byte, error) {
	line, err := cn.r.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, cn.protoErr("reply line too long", line[:min(len(line), 64)])
		}
		return nil, cn.ioErr("read", err)
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, cn.protoErr("reply line without CRLF", line)
	}
	return line[:len(line)-2], nil
}

// errorReply turns ERROR / CLIENT_ERROR / SERVER_ERROR lines into a *ServerError, else nil.
func (cn *conn) errorReply(line []byte) error {
	switch {
	case bytes.HasPrefix(line, prefixServerError):
		return &ServerError{Addr: cn.srv.addr, Line: string(line), kind: ErrServerError}
	case bytes.HasPrefix(line, prefixClientError), bytes.Equal(line, lineError):
		return &ServerError{Addr: cn.srv.addr, Line: string(line), kind: ErrClientError}
	}
	return nil
}

// unexpected is the error for a reply line that is neither expected nor an error reply.
func (cn *conn) unexpected(line []byte) error {
	if err := cn.errorReply(line); err != nil {
		return err
	}
	return cn.protoErr("unexpected reply", line)
}

// readData reads a data block of n bytes and its CRLF into a new slice.
func (cn *conn) readData(n int) ([]byte, error) {
	buf := make([]byte, n+2)
	if _, err := io.ReadFull(cn.r, buf); err != nil {
		return nil, cn.ioErr("read", err)
	}
	if !bytes.HasSuffix(buf, crlf) {
		return nil, cn.protoErr("data block without CRLF", buf[n:])
	}
	return buf[:n:n], nil
}

// readDataInto reads a data block of n bytes and its CRLF into dst's storage (grown if too small).
func (cn *conn) readDataInto(dst []byte, n int) ([]byte, error) {
	dst = slices.Grow(dst[:0], n)[:n]
	if _, err := io.ReadFull(cn.r, dst); err != nil {
		return dst[:0], cn.ioErr("read", err)
	}
	end, err := cn.r.Peek(2)
	if err != nil {
		return dst[:0], cn.ioErr("read", err)
	}
	if !bytes.Equal(end, crlf) {
		return dst[:0], cn.protoErr("data block without CRLF", end)
	}
	_, _ = cn.r.Discard(2)
	return dst, nil
}

// fields splits a reply line on single spaces into dst without allocating (dst's capacity permitting).
func fields(dst [][]byte, line []byte) [][]byte {
	dst = dst[:0]
	for len(line) > 0 {
		i := bytes.IndexByte(line, ' ')
		if i < 0 {
			dst = append(dst, line)
			break
		}
		if i > 0 {
			dst = append(dst, line[:i])
		}
		line = line[i+1:]
	}
	return dst
}

func parseUint(b []byte, bits int) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (^uint64(0)-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	if bits < 64 && n>>uint(bits) != 0 {
		return 0, false
	}
	return n, true
}

// valueHeader is a parsed "VALUE <key> <flags> <bytes> [<cas>]" or
// "LVALUE <key> <token> <flags> <bytes>" line.
type valueHeader struct {
	key   []byte
	flags uint32
	size  int
	cas   uint64 // or lease token for LVALUE
	lease bool
}

func (cn *conn) parseValue(line []byte, maxSize int) (valueHeader, error) {
	var scratch [6][]byte
	f := fields(scratch[:0], line)
	var h valueHeader
	var ok bool
	var flags, size uint64
	switch {
	case len(f) >= 4 && len(f) <= 5 && string(f[0]) == "VALUE":
		h.key = f[1]
		if flags, ok = parseUint(f[2], 32); !ok {
			break
		}
		if size, ok = parseUint(f[3], 31); !ok {
			break
		}
		if len(f) == 5 {
			h.cas, ok = parseUint(f[4], 64)
		}
	case len(f) == 5 && string(f[0]) == "LVALUE":
		h.key, h.lease = f[1], true
		if h.cas, ok = parseUint(f[2], 64); !ok {
			break
		}
		if flags, ok = parseUint(f[3], 32); !ok {
			break
		}
		size, ok = parseUint(f[4], 31)
	}
	if !ok || int(size) > maxSize+(1<<10) {
		return h, cn.unexpected(line)
	}
	h.flags, h.size = uint32(flags), int(size)
	return h, nil
}

// Request writers: they append to the connection's write buffer (under conn.wmu, until send).

// writeStorageLine writes a storage command's line without its "\r\n": "<cmd> <key> <flags> <exptime>
// <bytes>", with the lease token after the key for lease-set (ignored for the others).
func (cn *conn) writeStorageLine(cmd, key string, token uint64, flags uint32, exp int64, n int) {
	cn.w.WriteString(cmd)
	cn.w.WriteByte(' ')
	cn.w.WriteString(key)
	cn.w.WriteByte(' ')
	if cmd == "lease-set" {
		cn.writeUint(token)
		cn.w.WriteByte(' ')
	}
	cn.writeUint(uint64(flags))
	cn.w.WriteByte(' ')
	cn.writeInt(exp)
	cn.w.WriteByte(' ')
	cn.writeUint(uint64(n))
}

func (cn *conn) writeUint(n uint64) {
	cn.w.b = strconv.AppendUint(cn.w.b, n, 10)
}

func (cn *conn) writeInt(n int64) {
	cn.w.b = strconv.AppendInt(cn.w.b, n, 10)
}

func (cn *conn) writeData(v []byte) {
	cn.w.Write(v)
	cn.w.Write(crlf)
}
