package server

import (
	"sync/atomic"

	"github.com/panjf2000/gnet/v2"

	"github.com/leasecached/leasecached/protocol"
	"github.com/leasecached/leasecached/shard"
)

// Buffer bounds per connection. Replies are flushed to gnet once they pass flushThreshold so a huge multi-get
// does not build one giant slice, and buffers that grew past keepBufferCap for one big request are dropped
// afterwards so an idle connection does not pin megabytes.
const (
	flushThreshold = 256 << 10
	keepBufferCap  = 1 << 20
	initialOutCap  = 4 << 10
)

// conn is one client connection's state. It is only touched from its event loop.
type conn struct {
	srv     *Server
	parser  protocol.Parser
	req     protocol.Request
	out     []byte // replies not yet handed to gnet
	scratch []byte // value bytes copied out of the store
	swallow int    // bytes still to discard after a refused data block (memcached's conn_swallow)
	// held is the refusal of the data block being swallowed. memcached only writes it once the whole block
	// has been read and discarded, so a client that waits for the reply before sending the rest of the
	// block sees it no earlier than memcached would let it. Nothing else is parsed while swallowing, so
	// holding it keeps replies in request order.
	held    []byte
	local   counters
	gc      gnet.Conn                   // the connection being served, during serve only (for replies flushed mid-command)
	metaKey [protocol.KeyMaxLength]byte // a meta command's base64-decoded key (flag b)

	fd      int          // socket descriptor, the connection's name in `stats conns`
	remote  string       // peer address, captured once at open
	lastCmd atomic.Int64 // unix seconds of the last read event, for `stats conns`
}

func newConn(s *Server) *conn {
	return &conn{
		srv:    s,
		parser: protocol.Parser{MaxItemSize: s.cfg.MaxItemSize},
		out:    make([]byte, 0, initialOutCap),
	}
}

// serve executes every complete request in c's input, in order, and writes their replies in one batch.
func (cn *conn) serve(c gnet.Conn) gnet.Action {
	cn.gc = c
	defer func() { cn.gc = nil }()
	buf, _ := c.Peek(-1)
	pos := 0
	peeked := 0 // end of the requests whose keys were last handed to Prefetch
	action := gnet.None
	for pos < len(buf) {
		if cn.swallow > 0 {
			k := min(cn.swallow, len(buf)-pos)
			pos += k
			cn.swallow -= k
			if cn.swallow == 0 {
				cn.out = append(cn.out, cn.held...)
				cn.held = nil
			}
			continue
		}
		n, err := cn.parser.Parse(buf[pos:], &cn.req)
		if err != nil {
			pos += n
			perr, ok := err.(*protocol.Error)
			if !ok {
				// The parser promises *protocol.Error; anything else is a bug we must not answer with a guess.
				cn.out = append(cn.out, "SERVER_ERROR internal parser error\r\n"...)
				action = gnet.Close
				break
			}
			if perr.DropKey != nil {
				cn.srv.store.Discard(perr.DropKey)
			}
			cn.swallow = perr.Swallow
			if cn.swallow > 0 {
				cn.held = perr.Reply // a package-level reply text: safe to keep past the next Parse
			} else {
				cn.out = append(cn.out, perr.Reply...)
			}
			if perr.Close {
				action = gnet.Close
				break
			}
			continue
		}
		if n == 0 {
			break // incomplete request: wait for more bytes
		}
		// Look ahead when there is something to overlap: more requests behind this one, or several keys in
		// it. An unpipelined one-key request, the common case at depth 1, costs two comparisons here.
		if pos >= peeked && (pos+n < len(buf) || len(cn.req.Keys) > 1) {
			peeked = cn.prefetch(buf, pos)
		}
		pos += n
		if cn.execute(&cn.req) == closeConn {
			action = gnet.Close
			break
		}
		if len(cn.out) >= flushThreshold {
			cn.flush(c)
		}
	}
	cn.local[statBytesRead] += uint64(pos)
	if pos > 0 {
		_, _ = c.Discard(pos)
	}
	cn.flush(c)
	cn.srv.stats.merge(&cn.local)
	cn.lastCmd.Store(cn.srv.store.Now())
	return action
}

// prefetch hands the keys of the requests starting at buf[pos:] to the store, which starts loading their
// memory so that executing them in turn takes their cache misses together rather than one by one. It
// returns where those requests end, or the end of buf when it looked at nothing (when the first request
// is a storage command whose length PeekKeys cannot read, the rest of this buffer goes without
// prefetching, which costs speed only).
//
// The keys live on the stack: zeroing them costs a few nanoseconds per look-ahead, which runs only when
// there is a batch to gain from, and a connection does not carry 768 bytes for them.
func (cn *conn) prefetch(buf []byte, pos int) int {
	var keys [shard.PrefetchMax][]byte
	n, end := protocol.PeekKeys(buf[pos:], keys[:])
	cn.srv.store.Prefetch(keys[:n])
	if end == 0 {
		return len(buf)
	}
	return pos + end
}

// flush hands the batched replies to gnet, which writes what the socket takes and buffers the rest.
func (cn *conn) flush(c gnet.Conn) {
	if len(cn.out) == 0 {
		return
	}
	cn.local[statBytesWritten] += uint64(len(cn.out))
	_, _ = c.Write(cn.out)
	if cap(cn.out) > keepBufferCap {
		cn.out = make([]byte, 0, initialOutCap)
	} else {
		cn.out = cn.out[:0]
	}
	if cap(cn.scratch) > keepBufferCap {
		cn.scratch = nil
	}
}
