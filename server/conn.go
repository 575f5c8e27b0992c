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
//
// Backpressure (doc/design/backpressure.md): once more than outboundLimit bytes of a connection's replies
// wait in gnet's output buffer, the connection is neither read nor served until the client has taken all
// of them, as memcached stops reading a connection whose replies it cannot write. A request that answers
// in pieces (a multi-key fetch, a metadump) stops after the piece that crossed flushThreshold and goes on
// later (conn.resume), so a connection that never reads holds at most outboundLimit + flushThreshold +
// one value's reply in gnet's buffer, and no serve call builds more than flushThreshold + one value.
const (
	flushThreshold = 256 << 10
	outboundLimit  = 256 << 10
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
	held  []byte
	local counters
	gc    gnet.Conn // the connection being served, during serve only (for replies flushed mid-command)
	// loop is what this connection shares with the others of its event loop (loopShared): the batch of a
	// pipelined read and, during serve, the buffer out is. nil until first needed outside a loop (tests).
	loop *loopShared
	// The store Hashed of the first hashN keys of the request being executed are loop.ahead.hs[hashAt:] (hashOf):
	// what Prefetch computed. Indexes rather than a slice, so setting them costs no write barrier.
	hashAt, hashN int
	// preParsed is how many bytes of the input's first request OnTrafficBatch already parsed into req (0:
	// none), and preHash that request's key's Hashed when preHashed. serve uses both for the first request
	// of its next call only.
	preParsed int
	preHash   shard.Hashed
	preHashed bool
	// need is how many bytes the incomplete request at the front of the input spans (Parser.Need), 0 when
	// not known. Until that many have arrived, serve does not parse the input again: gnet's Peek copies
	// all of it into one slice each time, and a 1 MB set arriving in 64 KiB reads cost 2.3 ms of CPU that
	// way (memcached: 0.14). A request of bigRequestMin or more is gathered in big meanwhile (bigreq.go).
	need int
	big  []byte
	// bigLine: big gathers a request line that has not ended (bigreq.go); bigWhole: big holds a whole
	// request that stopped part-way (outcome suspended), to execute again.
	bigLine, bigWhole bool
	claimed           int // bytes of the server's gathering budget this connection holds (bigreq.go)
	// closed is set by OnClose. gnet closes a connection inside the write that fails, which can be a flush in
	// the middle of serve; serve then stops, executes nothing more and writes nothing more, as memcached
	// drops the rest of a closing connection's input.
	closed bool
	// blocked is set during a serve call once gnet holds more than outboundLimit of this connection's
	// replies: nothing more is executed, and done pauses reading until the client has taken them.
	blocked bool
	// yielded is set when a request stopped part-way (outcome suspended); resume is where it goes on:
	// the next key of a multi-key fetch. dump is where a suspended metadump goes on. The request stays
	// at the front of the input, so the next serve parses it again and finds them.
	yielded bool
	resume  int
	dump    shard.DumpCursor
	metaKey [protocol.KeyMaxLength]byte // a meta command's base64-decoded key (flag b)

	fd      int          // socket descriptor, the connection's name in `stats conns`
	remote  string       // peer address, captured once at open
	lastCmd atomic.Int64 // unix seconds of the last read event, for `stats conns`
}

// newConn returns a connection served with the event loop state ls, or with state of its own if ls is nil.
func newConn(s *Server, ls *loopShared) *conn {
	return &conn{
		srv:    s,
		parser: protocol.Parser{MaxItemSize: s.cfg.MaxItemSize},
		loop:   ls,
	}
}

// batchRequests bounds how many requests serve parses ahead of executing them.
const batchRequests = 16

// ahead holds the requests of a pipelined read, parsed before any of them is executed so that the keys of
// all of them go to the store's Prefetch together, and the hashes Prefetch leaves. Nothing in it outlives
// the serve call that fills it, so the connections of an event loop share one (loopShared).
type ahead struct {
	reqs [batchRequests]protocol.Request
	ends [batchRequests]int // where each request ends in the read buffer
	// hs are the hashes Prefetch left for the keys of the requests before reqs[to] (prefetchAhead); hashAt[i]
	// is where request i's keys start in hs.
	hs     [shard.PrefetchMax]shard.Hashed
	hashAt [batchRequests]uint8
	to     int
}

// serve executes every complete request in c's input, in order, and writes their replies in one batch.
func (cn *conn) serve(c gnet.Conn) gnet.Action {
	if cn.need > 0 && cn.big == nil {
		if c.InboundBuffered() < cn.need {
			cn.lastCmd.Store(cn.srv.store.Now())
			return gnet.None // gnet keeps the unread input for the next read
		}
		cn.need = 0
	}
	cn.gc = c
	cn.blocked, cn.yielded = false, false
	defer func() { cn.gc = nil }()
	cn.out = cn.shared().borrowOut(cn.out)
	action := gnet.None
	if cn.big != nil && !cn.bigWhole {
		switch whole, ok := cn.fillBig(c); {
		case !ok:
			cn.out = append(cn.out, protocol.ReplyServerErrorOOMRead...) // memcached's words, then close
			return cn.done(c, 0, gnet.Close)
		case !whole:
			return cn.done(c, 0, action)
		}
	}
	if cn.big != nil {
		action = cn.serveBig()
	}
	buf, _ := c.Peek(-1)
	pos := 0
	pre := cn.preParsed
	cn.preParsed = 0
	for pos < len(buf) && action == gnet.None && !cn.closed && !cn.blocked && !cn.yielded {
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
		n, err := pre, error(nil)
		if pre == 0 {
			cn.preHashed = false // preHash belongs to the pre-parsed request only
			n, err = cn.parser.Parse(buf[pos:], &cn.req)
		}
		pre = 0
		switch {
		case err != nil:
			pos += n
			action = cn.refuse(err)
		case n == 0: // incomplete request: wait for more bytes
			need := cn.parser.Need()
			switch {
			case need == 0 && len(buf)-pos >= bigRequestMin: // a long line that has not ended
				if cn.startLine(buf[pos:]) {
					return cn.done(c, len(buf), action)
				}
				cn.out = append(cn.out, protocol.ReplyServerErrorOOMRead...)
				action = gnet.Close
			case need < bigRequestMin:
				cn.need = need
				return cn.done(c, pos, action)
			case cn.startBig(buf[pos:], need):
				return cn.done(c, len(buf), action)
			default:
				cn.local[statStoreNoMemory]++
				n, err = cn.parser.RefuseNoMemory(buf[pos:])
				pos += n
				action = cn.refuse(err)
			}
		case pos+n < len(buf):
			cn.preHashed = false // the batch's Prefetch hashes every request's keys
			pos, action = cn.serveAhead(buf, pos, n)
		default:
			// The only request in the buffer. A multi-key fetch still gains from fetching its keys' memory
			// together; one key has nothing to overlap with.
			if len(cn.req.Keys) > 1 {
				cn.prefetchKeys(cn.req.Keys)
			}
			switch cn.execute(&cn.req) {
			case closeConn:
				pos, action = pos+n, gnet.Close
			case suspended: // the request stays in the input, to go on from cn.resume
			default:
				pos += n
			}
			cn.hashN = 0
		}
	}
	return cn.done(c, pos, action)
}

// done ends a serve call: the first pos bytes of input are consumed and the replies written.
func (cn *conn) done(c gnet.Conn, pos int, action gnet.Action) gnet.Action {
	cn.local[statBytesRead] += uint64(pos)
	if cn.closed {
		cn.out, action = cn.out[:0], gnet.Close
	} else {
		if pos > 0 {
			_, _ = c.Discard(pos)
		}
		cn.flush(c)
		cn.pauseOrWake(c)
	}
	if cn.closed { // OnClose ran during this serve (maybe in that flush), and left the buffer to us
		cn.releaseBig()
	}
	cn.out = cn.loop.returnOut(cn.out)
	merge(&cn.local, cn.loop.counts)
	cn.lastCmd.Store(cn.srv.store.Now())
	return action
}

// refuse answers a request the parser refused, as memcached would: the reply now, or once the refused data
// block has been swallowed; the value the refused store would have replaced dropped; the connection closed
// when memcached closes it.
func (cn *conn) refuse(err error) gnet.Action {
	perr, ok := err.(*protocol.Error)
	if !ok {
		// The parser promises *protocol.Error; anything else is a bug we must not answer with a guess.
		cn.out = append(cn.out, "SERVER_ERROR internal parser error\r\n"...)
		return gnet.Close
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
		return gnet.Close
	}
	return gnet.None
}

// serveAhead serves a pipelined stretch of buf: the request parsed into cn.req, n bytes at pos, and up to
// batchRequests-1 more behind it, all parsed before the first is executed. It stops before an incomplete
// request, and after a refused one. It returns where it stopped and whether to close.
func (cn *conn) serveAhead(buf []byte, pos, n int) (int, gnet.Action) {
	a := cn.batch()
	// The first request moves into the batch: a swap, so both keep their slices' capacity.
	cn.req, a.reqs[0] = a.reqs[0], cn.req
	a.ends[0] = pos + n
	k, end := 1, pos+n
	var refused error
	refusedLen := 0
	for k < batchRequests && end < len(buf) {
		m, err := cn.parser.Parse(buf[end:], &a.reqs[k])
		if err != nil {
			refused, refusedLen = err, m
			break
		}
		if m == 0 {
			break
		}
		end += m
		a.ends[k] = end
		k++
	}
	a.to = 0
	for i := range k {
		if i >= a.to {
			cn.prefetchAhead(i, k) // covers request i at least
		}
		cn.hashAt = int(a.hashAt[i])
		cn.hashN = min(len(a.reqs[i].Keys), len(a.hs)-cn.hashAt)
		out := cn.execute(&a.reqs[i])
		cn.hashN = 0
		if out == suspended {
			return pos, gnet.None // request i stays in the input
		}
		pos = a.ends[i]
		if len(cn.out) >= flushThreshold {
			cn.flush(cn.gc)
		}
		if out == closeConn || cn.closed {
			return pos, gnet.Close
		}
		if cn.blocked {
			return pos, gnet.None // the rest of the batch is parsed again once the client has read
		}
	}
	if refused != nil {
		return pos + refusedLen, cn.refuse(refused)
	}
	return pos, gnet.None
}

// prefetchAhead hands the keys of the batch's requests from i on (of k) to the store's Prefetch, as many
// whole requests as PrefetchMax keys allow (at least the first keys of request i), and records where each
// one's hashes are.
//
// The keys live on the stack: zeroing them costs a few nanoseconds per call, which runs only when there is
// a batch to gain from.
func (cn *conn) prefetchAhead(i, k int) {
	a := &cn.loop.ahead
	var keys [shard.PrefetchMax][]byte
	n := 0
	j := i
	for ; j < k; j++ {
		ks := a.reqs[j].Keys
		if n+len(ks) > len(keys) && j > i {
			break
		}
		a.hashAt[j] = uint8(n)
		for _, key := range ks[:min(len(ks), len(keys)-n)] { // not copy: that is a typed copy of pointers
			keys[n] = key
			n++
		}
	}
	a.to = j
	if n > 0 {
		cn.srv.store.Prefetch(keys[:n], a.hs[:])
	}
}

// prefetchKeys hands one request's keys to the store's Prefetch, and keeps their hashes for its execution.
func (cn *conn) prefetchKeys(keys [][]byte) {
	a := cn.batch()
	cn.srv.store.Prefetch(keys, a.hs[:])
	cn.hashAt, cn.hashN = 0, min(len(keys), len(a.hs))
}

// batch is the ahead the connection fills: its event loop's.
func (cn *conn) batch() *ahead { return &cn.shared().ahead }

// shared is the connection's loopShared, made on first use for a connection that has none.
func (cn *conn) shared() *loopShared {
	if cn.loop == nil {
		cn.loop = cn.srv.newLoopShared()
	}
	return cn.loop
}

// hashOf is the store's Hashed of key i of the request being executed: the one Prefetch left, or computed now.
func (cn *conn) hashOf(i int, key []byte) shard.Hashed {
	if i < cn.hashN {
		return cn.loop.ahead.hs[cn.hashAt+i]
	}
	if i == 0 && cn.preHashed {
		return cn.preHash
	}
	return shard.HashOf(key)
}

// flush hands the batched replies to gnet, which writes what the socket takes and buffers the rest.
func (cn *conn) flush(c gnet.Conn) {
	if len(cn.out) == 0 {
		return
	}
	cn.local[statBytesWritten] += uint64(len(cn.out))
	_, _ = c.Write(cn.out) // gnet copies what the socket does not take: the buffer is free again at once
	cn.out = cn.out[:0]
	if c.OutboundBuffered() > outboundLimit {
		cn.blocked = true
	}
	if cap(cn.scratch) > keepBufferCap {
		cn.scratch = nil
	}
}

// yield reports whether a request that answers in pieces must stop after the piece just built (the
// caller records where it goes on, and returns outcome suspended): once its replies pass flushThreshold
// they are flushed, and the request stops there unless it is finished (more is false). A blocked
// connection goes on once the client has read; any other is woken to go on after the loop has served
// its other connections, so one request never holds an event loop for more than one piece.
func (cn *conn) yield(more bool) bool {
	if len(cn.out) < flushThreshold || cn.gc == nil {
		return false
	}
	cn.flush(cn.gc)
	if !more || cn.closed {
		return false
	}
	cn.yielded = true
	return true
}

// pauseOrWake ends a serve call whose connection is blocked or yielded: a blocked connection is not read
// until gnet has written all its replies (gnet then calls OnTraffic for the input it holds); a yielded
// one is served again once the loop has handled the events already waiting.
func (cn *conn) pauseOrWake(c gnet.Conn) {
	switch {
	case cn.blocked:
		if p, ok := c.(gnet.ReadPauser); ok {
			_ = p.PauseRead()
		}
	case cn.yielded:
		_ = c.Wake(nil)
	}
}
