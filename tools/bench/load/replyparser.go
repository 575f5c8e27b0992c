package load

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
)

// replyParser is the push-style counterpart of replyReader, for the load transport: it is fed whatever
// bytes have arrived on a connection, consumes every complete reply line (and every data byte) among them,
// and says how many bytes it used; the caller keeps the rest, at most a partial line, and feeds it again
// with more bytes appended. It parses the replies to one batch of requests, whose kinds reset gives.
//
// Data blocks are skipped, never buffered: a value of any size streams through a read buffer of a few
// kilobytes, and a reply may be split anywhere between reads. Parsing allocates nothing (except for the
// error that ends a run).
type replyParser struct {
	isGet []bool // kind of each request of the batch: a retrieval or a storage command
	next  int    // index of the request whose reply is being parsed
	// skip is the number of bytes of the current data block not yet seen, its "\r\n" included; the block
	// is block bytes long and is a hit unless lease (an LVALUE).
	skip  int
	block int
	lease bool

	// What the replies said, over all batches since the parser was made.
	hits, sets, setFailed uint64
}

// reset starts the replies to a new batch: isGet[i] says whether request i is a retrieval command. The
// parser keeps the slice (which the caller must not change until the batch is done).
func (p *replyParser) reset(isGet []bool) {
	p.isGet, p.next, p.skip = isGet, 0, 0
}

// done reports whether the last reply of the batch has been parsed.
func (p *replyParser) done() bool { return p.next == len(p.isGet) }

// feed parses the replies in b, from where the previous feed stopped, and returns how many leading bytes
// of b it consumed; the caller passes the unconsumed rest again, with whatever arrives next appended. It
// stops after the batch's last reply. An error is a protocol error or an error reply (*serverError) that
// ends the connection's run.
func (p *replyParser) feed(b []byte) (used int, err error) {
	i := 0
	for p.next < len(p.isGet) {
		if p.skip > 0 {
			if p.skip > 2 { // data bytes: skip as many as there are
				n := min(p.skip-2, len(b)-i)
				if n == 0 {
					return i, nil
				}
				i += n
				p.skip -= n
				continue
			}
			if i == len(b) {
				return i, nil
			}
			want := byte('\r') // p.skip is 2 or 1: the block's trailing "\r\n"
			if p.skip == 1 {
				want = '\n'
			}
			if b[i] != want {
				return i, fmt.Errorf("data block of %d bytes not followed by \\r\\n", p.block)
			}
			i++
			if p.skip--; p.skip == 0 && !p.lease {
				p.hits++
			}
			continue
		}
		if p.isGet[p.next] {
			if size, n := valueLineFast(b[i:]); n > 0 {
				i += n
				if end := i + size; end+1 < len(b) && b[end] == '\r' && b[end+1] == '\n' {
					i = end + 2 // the whole block is here: skip it at once
					p.hits++
					continue
				}
				p.block, p.skip, p.lease = size, size+2, false
				continue
			}
			if string(b[i:min(i+len(replyEndLine), len(b))]) == replyEndLine {
				i += len(replyEndLine)
				p.next++
				continue
			}
		}
		j := bytes.IndexByte(b[i:], '\n') // then "\r" before it: faster than searching for both
		if j < 0 {
			if len(b)-i > maxReplyLine {
				return i, errReplyLineTooLong
			}
			return i, nil
		}
		if j == 0 || b[i+j-1] != '\r' {
			return i, fmt.Errorf("reply line %q ends in a bare \\n", b[i:i+j+1])
		}
		l := b[i : i+j-1]
		i += j + 1
		if !p.isGet[p.next] {
			res, err := parseStoreLine(l)
			if err != nil {
				return i, err
			}
			p.sets++
			if res != storeOK {
				p.setFailed++
			}
			p.next++
			continue
		}
		if bytes.Equal(l, replyEnd) {
			p.next++
			continue
		}
		_, _, size, lease, err := parseValueLine(l)
		if err != nil {
			return i, err
		}
		p.block, p.skip, p.lease = size, size+2, lease
	}
	return i, nil
}

// replyEndLine is a retrieval reply's last line.
const replyEndLine = "END\r\n"

// valueLineFast reads a whole "VALUE <key> <flags> <bytes>[ <cas>]\r\n" line at the front of b in one pass
// and returns the data size and the line's length; n is 0 when b does not start with such a line in its
// plainest form (single spaces, numbers of at most 19 digits), or not all of it yet, and the general path
// then decides. The VALUE lines of a 10-key get are most of what the generator parses: through the
// general path (find the newline, split the fields with a search each, then read the numbers) one cost about
// 540 instructions, in one pass about 310 (callgrind, BenchmarkGenBatchMultiGet).
func valueLineFast(b []byte) (size, n int) {
	const prefix = "VALUE "
	if len(b) < len(prefix) || string(b[:len(prefix)]) != prefix {
		return 0, 0
	}
	i := len(prefix)
	k := plainLen(b[i:])
	if k == 0 || k > maxKeyLen || i+k == len(b) || b[i+k] != ' ' {
		return 0, 0
	}
	i += k + 1
	k = digitsLen(b[i:]) // the flags: checked, not needed
	if k == 0 || k > 19 || i+k == len(b) || b[i+k] != ' ' {
		return 0, 0
	}
	i += k + 1
	if size, k = dataSize(b[i:]); k == 0 {
		return 0, 0
	}
	if i += k; i < len(b) && b[i] == ' ' { // a gets reply's cas
		k = digitsLen(b[i+1:])
		if k == 0 || k > 19 {
			return 0, 0
		}
		i += k + 1
	}
	if i+1 >= len(b) || b[i] != '\r' || b[i+1] != '\n' || size > maxValueSize*4 {
		return 0, 0
	}
	return size, i + 2
}

// dataSize reads the data size of a VALUE line, at most seven digits, at the front of b: it returns the
// size and the number of digits, or k 0 when b does not start with one to seven digits. With a whole word
// in b it finds the digits as digitsLen does and adds them up in three multiplies, lanes of the word at a
// time (the loop it replaces, a multiply and an add a digit, was an eighth of BenchmarkGenBatchMultiGet).
func dataSize(b []byte) (size, k int) {
	if len(b) < 8 {
		k = digitsLen(b)
		if k > 7 {
			return 0, 0
		}
		for _, c := range b[:k] {
			size = size*10 + int(c-'0')
		}
		return size, k
	}
	x := binary.LittleEndian.Uint64(b)
	m := nonDigits(x)
	if m == 0 || m&0xff != 0 { // eight digits or more, or none
		return 0, 0
	}
	k = bits.TrailingZeros64(m) / 8
	// The first digit is the lowest byte: shifting the k digits to the top of the word leaves zeros for the
	// leading digits of an eight-digit number, and drops the bytes after the last digit.
	x = (x << (64 - 8*k)) & 0x0f0f0f0f0f0f0f0f
	x = x * (10<<8 + 1) >> 8 & 0x00ff00ff00ff00ff    // pairs of digits
	x = x * (100<<16 + 1) >> 16 & 0x0000ffff0000ffff // groups of four
	x = x * (10000<<32 + 1) >> 32                    // all eight
	return int(x), k
}

// plainLen is the length of b's leading run of bytes above ' ', read eight bytes at a time: a word holds
// such a byte exactly when (x - 0x21 in each byte) &^ x has a byte's top bit set, and the lowest such bit
// marks the first (a borrow only runs upwards from it).
//
// The server's parser has the same scan (protocol's plainEnd). The load tool imports nothing of the server
// on purpose: it checks the server's replies, and a bug in code both shared could not show.
func plainLen(b []byte) int {
	const ones = 0x0101010101010101
	i := 0
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		if m := (x - ones*0x21) &^ x & (ones * 0x80); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for i < len(b) && b[i] > ' ' {
		i++
	}
	return i
}

// digitsLen is the length of b's leading run of decimal digits, read eight bytes at a time: a byte is a
// digit exactly when its high nibble is 3 both as it is and plus 6. A carry out of a byte (one of 0xfa and
// up) can spoil the test of the bytes above it, but never of a byte below the first non-digit.
func digitsLen(b []byte) int {
	i := 0
	for ; i+8 <= len(b); i += 8 {
		if m := nonDigits(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for i < len(b) && b[i]-'0' <= 9 {
		i++
	}
	return i
}

// nonDigits is zero in the bytes of x that lead with decimal digits and non-zero from the first byte that
// is not one (digitsLen's word test, which dataSize shares).
func nonDigits(x uint64) uint64 {
	const hi, threes, sixes = 0xf0f0f0f0f0f0f0f0, 0x3030303030303030, 0x0606060606060606
	return (x&hi ^ threes) | ((x+sixes)&hi ^ threes)
}
