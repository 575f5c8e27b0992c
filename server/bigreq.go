package server

import (
	"bytes"

	"github.com/panjf2000/gnet/v2"
	"github.com/panjf2000/gnet/v2/pkg/pool/byteslice"

	"github.com/leasecached/leasecached/protocol"
)

// A request with a large data block arrives over many reads (gnet reads at most 64 KiB at a time). Left in
// gnet's input, every byte of it was copied twice more before the store copied it into the item: into
// gnet's ring buffer after each read, and into one slice by Peek once the block was whole. Once the
// parser knows how long such a request is (Parser.Need), serve gathers it in a buffer of the connection's
// own instead, and executes it from there: one copy on the way in, as when it arrives in one read.
//
// Bounds: buffers live outside -m, so what a client makes the server hold follows what it has sent: a
// command line alone sets aside at most bigPrealloc bytes, and the buffer then grows to at most bigGrowth
// times what has arrived (a 1 MB block in 64 KiB reads: 64 KiB, 128 KiB, then all of it). Together the
// requests being gathered may claim at most half of -m (gatherBudget, counted at their whole length from
// the command line on, as memcached sets aside the whole item then); a request that finds no room is
// refused as memcached refuses a store it cannot allocate ("SERVER_ERROR out of memory storing object",
// its block swallowed). Buffers come from gnet's byte-slice pool and go back to it when their request
// has been executed or its connection closed: steady large sets allocate nothing.
const (
	// bigRequestMin is the smallest incomplete request that is gathered this way; a shorter one waits in
	// gnet's input until it is whole (conn.need), which costs at most one more copy of under 64 KiB.
	bigRequestMin = 64 << 10
	// bigPrealloc is the most a request's command line makes the server allocate before its data arrives.
	bigPrealloc = 64 << 10
	// bigGrowth bounds a grown buffer by the bytes gathered so far: large enough that a 1 MiB block needs
	// two growths, small enough that holding a megabyte takes a client 64 KiB of sending.
	bigGrowth = 16
)

// A multi-key fetch line can be up to protocol.MaxMultiKeyLineLength long. One that has not ended after
// bigRequestMin bytes is gathered the same way (conn.bigLine), with a claim of the longest line: each read
// is then scanned once for its newline, instead of the whole line being copied by Peek and parsed again
// after every read (a 2 MB line that never ended cost 13 MB of garbage that way).

// gatherBudget is how many bytes the requests being gathered may claim together: half of -m, and never
// less than one largest item.
func gatherBudget(cfg Config) int64 { return max(cfg.MemoryLimit/2, int64(cfg.MaxItemSize)) }

// claim takes n more bytes of the gathering budget for this connection's request, if the budget has them.
func (cn *conn) claim(n int) bool {
	if cn.srv.gathering.Add(int64(n)) > gatherBudget(cn.srv.cfg) {
		cn.srv.gathering.Add(-int64(n))
		return false
	}
	cn.claimed += n
	return true
}

// startBig begins gathering a request of need bytes whose first bytes are have, and reports whether the
// budget had room for all of it. The caller consumes have from gnet's input when it had.
func (cn *conn) startBig(have []byte, need int) bool {
	if !cn.claim(need) {
		return false
	}
	cn.need = need
	cn.big = append(byteslice.Get(min(need, max(bigPrealloc, len(have))))[:0], have...)
	return true
}

// startLine begins gathering a request line that has not ended, whose first bytes are have, and reports
// whether the budget had room for its buffer. A line claims its buffer as it grows, not its limit: many
// clients may send long multi-gets at once. The caller consumes have from gnet's input when it had.
func (cn *conn) startLine(have []byte) bool {
	size := max(bigPrealloc, len(have))
	if !cn.claim(size) {
		return false
	}
	cn.need = protocol.MaxMultiKeyLineLength + 1 // one past the limit: the parser refuses such a line
	cn.bigLine = true
	cn.big = append(byteslice.Get(size)[:0], have...)
	return true
}

// releaseBig gives the gathering buffer and its claim on the budget back, if there is one, and forgets
// the request.
func (cn *conn) releaseBig() {
	if cn.big != nil {
		byteslice.Put(cn.big)
		cn.big = nil
	}
	cn.srv.gathering.Add(-int64(cn.claimed))
	cn.claimed, cn.need = 0, 0
	cn.bigLine, cn.bigWhole = false, false
}

// fillBig moves into cn.big as much of c's input as the request being gathered still lacks, and
// reports whether the request is now whole (a gathered line: ended, or past its limit for the parser to
// refuse). Bytes after it stay in c's input. It reports !ok when a line's buffer must grow and the budget
// has no room for it.
func (cn *conn) fillBig(c gnet.Conn) (whole, ok bool) {
	buf, _ := c.Peek(-1) // gnet's latest read only: gathering leaves nothing behind in its ring buffer
	k := min(cn.need-len(cn.big), len(buf))
	whole = len(cn.big)+k == cn.need
	if cn.bigLine {
		if i := bytes.IndexByte(buf[:k], '\n'); i >= 0 {
			k, whole = i+1, true
		}
	}
	if n := len(cn.big) + k; n > cap(cn.big) {
		size := min(cn.need, max(n, bigGrowth*len(cn.big)))
		if cn.bigLine && !cn.claim(size-cap(cn.big)) {
			return false, false
		}
		grown := byteslice.Get(size)[:len(cn.big)]
		copy(grown, cn.big)
		byteslice.Put(cn.big)
		cn.big = grown
	}
	cn.big = append(cn.big, buf[:k]...)
	_, _ = c.Discard(k)
	cn.local[statBytesRead] += uint64(k)
	return whole, true
}

// serveBig executes the request gathered in cn.big, gives the buffer back, and says whether to close.
// The parser parses the same bytes it asked for, so the request is complete and spans all of them. A
// request that stops part-way (outcome suspended) keeps the buffer, and the next serve call executes it
// again from where it stopped (cn.bigWhole).
func (cn *conn) serveBig() gnet.Action {
	action := gnet.None
	n, err := cn.parser.Parse(cn.big, &cn.req)
	switch {
	case err != nil:
		action = cn.refuse(err) // a data block not ended by \r\n, a line too long: as if in one read
	case n != len(cn.big):
		// Parser.Need and Parse disagree: a bug, which must not be answered with a guess.
		cn.out = append(cn.out, "SERVER_ERROR internal parser error\r\n"...)
		action = gnet.Close
	default:
		switch cn.execute(&cn.req) {
		case closeConn:
			action = gnet.Close
		case suspended:
			cn.bigWhole = true
			return action
		}
	}
	cn.req.Data = nil // it points into the buffer going back to the pool
	cn.releaseBig()
	return action
}
