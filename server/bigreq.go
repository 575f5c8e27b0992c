package server

import (
	"bytes"

	"github.com/leasecached/leasecached/protocol"
)

// A request with a large data block arrives over many reads (gnet reads at most 64 KiB at a time). Left in
// the transport's input, every byte of it was copied twice more before the store copied it into the item: into
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
// its block swallowed). Buffers come from bufPools and go back to them when their request
// has been executed or its connection closed: steady large sets allocate nothing.
const (
	// bigRequestMin is the smallest incomplete request that is gathered this way; a shorter one waits in
	// the transport's input until it is whole (conn.need), which costs at most one more copy of under 64 KiB.
	bigRequestMin = 64 << 10
	// bigPrealloc is the most a request's command line makes the server allocate before its data arrives.
	bigPrealloc = 64 << 10
	// bigGrowth bounds a grown buffer by the bytes gathered so far: large enough that a 1 MiB block needs
	// two growths, small enough that holding a megabyte takes a client 64 KiB of sending.
	bigGrowth = 16
)

// A multi-key fetch line can be up to protocol.MaxMultiKeyLineLength long. One that has not ended after
// bigRequestMin bytes is gathered the same way (gather.line), its buffer claimed as it grows: each read
// is then scanned once for its newline, instead of the whole line being copied by Peek and parsed again
// after every read (a 2 MB line that never ended cost 13 MB of garbage that way).

// gatherBudget is how many bytes the requests being gathered may claim together: half of -m, and never
// less than one largest item.
func gatherBudget(cfg Config) int64 { return max(cfg.MemoryLimit/2, int64(cfg.MaxItemSize)) }

// gather is a large request being gathered, or gathered whole and not yet done executing.
type gather struct {
	srv   *Server // whose budget claimed holds; nil when idle
	buf   []byte  // the request's bytes so far; nil when idle
	need  int     // the request's length (a line: one past its limit, for the parser to refuse)
	line  bool    // buf is a request line that has not ended
	whole bool    // buf holds a whole request that stopped part-way (outcome suspended), to execute again
	// claimed is how many bytes of the server's gathering budget this request holds.
	claimed int
}

// active reports whether a request is being gathered or waits to execute again.
func (g *gather) active() bool { return g.buf != nil }

// claim takes n more bytes of s's gathering budget, if it has them.
func (g *gather) claim(s *Server, n int) bool {
	if s.gathering.Add(int64(n)) > gatherBudget(s.cfg) {
		s.gathering.Add(-int64(n))
		return false
	}
	g.srv = s
	g.claimed += n
	return true
}

// start begins gathering a request of need bytes whose first bytes are have, and reports whether s's
// budget had room for all of it. The caller consumes have from the transport's input when it had.
func (g *gather) start(s *Server, have []byte, need int) bool {
	if !g.claim(s, need) {
		return false
	}
	g.need = need
	g.buf = append(getBuf(min(need, max(bigPrealloc, len(have))))[:0], have...)
	return true
}

// startLine begins gathering a request line that has not ended, whose first bytes are have, and reports
// whether s's budget had room for its buffer. A line claims its buffer as it grows, not its limit: many
// clients may send long multi-gets at once. The caller consumes have from the transport's input when it had.
func (g *gather) startLine(s *Server, have []byte) bool {
	size := max(bigPrealloc, len(have))
	if !g.claim(s, size) {
		return false
	}
	g.need = protocol.MaxMultiKeyLineLength + 1 // one past the limit: the parser refuses such a line
	g.line = true
	g.buf = append(getBuf(size)[:0], have...)
	return true
}

// release gives the buffer and the claim back, if there are any, and forgets the request.
func (g *gather) release() {
	if g.buf != nil {
		putBuf(g.buf)
	}
	if g.srv != nil {
		g.srv.gathering.Add(-int64(g.claimed))
	}
	*g = gather{}
}

// fill moves into buf as much of c's input as the request still lacks, and reports whether the request is
// now whole (a line: ended, or past its limit for the parser to refuse). Bytes after it stay in c's input.
// It reports !ok when a line's buffer must grow and the budget has no room for it.
func (g *gather) fill(c Transport) (n int, whole, ok bool) {
	in, _ := c.Peek(-1) // the latest read only: gathering leaves nothing behind in the transport
	k := min(g.need-len(g.buf), len(in))
	whole = len(g.buf)+k == g.need
	if g.line {
		if i := bytes.IndexByte(in[:k], '\n'); i >= 0 {
			k, whole = i+1, true
		}
	}
	if n := len(g.buf) + k; n > cap(g.buf) {
		size := min(g.need, max(n, bigGrowth*len(g.buf)))
		if g.line && !g.claim(g.srv, size-cap(g.buf)) {
			return 0, false, false
		}
		grown := getBuf(size)[:len(g.buf)]
		copy(grown, g.buf)
		putBuf(g.buf)
		g.buf = grown
	}
	g.buf = append(g.buf, in[:k]...)
	_, _ = c.Discard(k)
	return k, whole, true
}

// releaseBig gives the connection's gathering buffer and claim back (OnClose, and serve once closed).
func (cn *conn) releaseBig() { cn.big.release() }

// serveBig gathers what c's input adds to the large request, and once it is whole executes it, gives the
// buffer back and reports done (what follows in the input is served as usual). The parser parses the same
// bytes it asked for, so the request is complete and spans all of them. A request that stops part-way
// (outcome suspended) keeps the buffer, and the next serve call executes it again from where it stopped.
func (cn *conn) serveBig(c Transport) (action Action, done bool) {
	if !cn.big.whole {
		k, whole, ok := cn.big.fill(c)
		cn.local[statBytesRead] += uint64(k)
		switch {
		case !ok:
			cn.out = append(cn.out, protocol.ReplyServerErrorOOMRead...) // memcached's words, then close
			return Close, false
		case !whole:
			return Continue, false
		}
	}
	if cn.bin != nil {
		action = cn.serveBinaryGathered(cn.big.buf)
		cn.big.release()
		return action, true
	}
	n, err := cn.parser.Parse(cn.big.buf, &cn.req)
	switch {
	case err != nil:
		action = cn.refuse(err) // a data block not ended by \r\n, a line too long: as if in one read
	case n != len(cn.big.buf):
		// Parser.Need and Parse disagree: a bug, which must not be answered with a guess.
		cn.out = append(cn.out, replyInternalParserError...)
		action = Close
	default:
		switch cn.execute(&cn.req) {
		case closeConn:
			action = Close
		case suspended:
			cn.big.whole = true
			return Continue, false
		}
	}
	cn.req.Data = nil // it points into the buffer going back to the pool
	cn.big.release()
	return action, true
}
