package main

import (
	"bytes"
	"fmt"
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
