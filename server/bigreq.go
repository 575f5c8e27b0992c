package server

import (
	"github.com/panjf2000/gnet/v2"
	"github.com/panjf2000/gnet/v2/pkg/pool/byteslice"
)

// A request with a large data block arrives over many reads (gnet reads at most 64 KiB at a time). Left in
// gnet's input, every byte of it was copied twice more before the store copied it into the item: into
// gnet's ring buffer after each read, and into one slice by Peek once the block was whole. Once the
// parser knows how long such a request is (Parser.Need), serve gathers it in a buffer of the connection's
// own instead, and executes it from there: one copy on the way in, as when it arrives in one read.
//
// Bounds: a command line alone makes the server set aside at most bigPrealloc bytes, and a longer block
// grows its buffer as its bytes arrive, so a client that names a large value and sends nothing more holds
// little memory (memcached sets aside the whole item at once). Buffers come from gnet's byte-slice pool
// and go back to it when their request has been executed: steady large sets allocate nothing.
const (
	// bigRequestMin is the smallest incomplete request that is gathered this way; a shorter one waits in
	// gnet's input until it is whole (conn.need), which costs at most one more copy of under 64 KiB.
	bigRequestMin = 64 << 10
	// bigPrealloc is the most a request's command line makes the server allocate before its data arrives.
	bigPrealloc = 1 << 20
)

// startBig begins gathering a request of need bytes whose first bytes are have. The caller consumes
// have from gnet's input.
func (cn *conn) startBig(have []byte, need int) {
	cn.need = need
	cn.big = append(byteslice.Get(min(need, bigPrealloc))[:0], have...)
}

// fillBig moves into cn.big as much of c's input as the request being gathered still lacks, and
// reports whether the request is now whole. Bytes after it stay in c's input.
func (cn *conn) fillBig(c gnet.Conn) bool {
	buf, _ := c.Peek(-1) // gnet's latest read only: gathering leaves nothing behind in its ring buffer
	k := min(cn.need-len(cn.big), len(buf))
	if n := len(cn.big) + k; n > cap(cn.big) {
		grown := byteslice.Get(min(cn.need, max(n, 2*cap(cn.big))))[:len(cn.big)]
		copy(grown, cn.big)
		byteslice.Put(cn.big)
		cn.big = grown
	}
	cn.big = append(cn.big, buf[:k]...)
	_, _ = c.Discard(k)
	cn.local[statBytesRead] += uint64(k)
	return len(cn.big) == cn.need
}

// serveBig executes the request gathered in cn.big, gives the buffer back, and says whether to close.
// The parser parses the same bytes it asked for, so the request is complete and spans all of them.
func (cn *conn) serveBig() gnet.Action {
	action := gnet.None
	n, err := cn.parser.Parse(cn.big, &cn.req)
	switch {
	case err != nil:
		action = cn.refuse(err) // a data block not ended by \r\n: answered as if it had come in one read
	case n != len(cn.big):
		// Parser.Need and Parse disagree: a bug, which must not be answered with a guess.
		cn.out = append(cn.out, "SERVER_ERROR internal parser error\r\n"...)
		action = gnet.Close
	default:
		if cn.execute(&cn.req) == closeConn {
			action = gnet.Close
		}
	}
	cn.req.Data = nil // it points into the buffer going back to the pool
	byteslice.Put(cn.big)
	cn.big, cn.need = nil, 0
	return action
}
