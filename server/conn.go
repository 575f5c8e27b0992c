package server

import (
	"bytes"
	"log/slog"
	"sync/atomic"

	"github.com/leasecached/leasecached/protocol"
	"github.com/leasecached/leasecached/shard"
	"github.com/leasecached/leasecached/watch"
)

// Buffer bounds per connection. Replies are flushed to the transport once they pass flushThreshold so a
// huge multi-get does not build one giant slice, and buffers that grew past keepBufferCap for one big
// request are dropped afterwards so an idle connection does not pin megabytes.
//
// Backpressure (doc/design/backpressure.md): once more than outboundLimit bytes of a connection's replies
// wait in the transport, the connection is neither read nor served until the client has taken all of
// them, as memcached stops reading a connection whose replies it cannot write. A request that answers in
// pieces (a multi-key fetch, a metadump) stops after the piece that crossed flushThreshold and goes on
// later (conn.resume), so a connection that never reads holds at most outboundLimit + flushThreshold +
// one value's reply, and no serve call builds more than flushThreshold + one value.
const (
	flushThreshold = 256 << 10
	outboundLimit  = 256 << 10
	keepBufferCap  = 1 << 20
	initialOutCap  = 4 << 10
)

// Transport is what carries a connection's bytes: the input received and not yet consumed, and the
// replies written and not yet sent. gnet's Conn is one (server.go); tests drive the engine with their
// own. A slice Peek returns is valid until the next Discard or the end of the serve call.
type Transport interface {
	Peek(n int) ([]byte, error)  // the input from its start; n < 1: all of it
	Discard(n int) (int, error)  // consume n bytes of input
	InboundBuffered() int        // input bytes held
	Write(p []byte) (int, error) // send p, keeping what the socket does not take (copied)
	OutboundBuffered() int       // bytes written and not yet sent
}

// Action is what the transport does after a serve call.
type Action uint8

const (
	Continue   Action = iota // read on
	Close                    // write what is pending, then close the connection
	PauseRead                // read nothing until every pending byte is sent, then serve the held input
	ServeAgain               // serve the held input again soon, after the loop's other connections
)

// conn is one client connection's engine: its bytes in, its replies out, the request state machine. It is
// only touched from its event loop. serve reads as: swallow a refused block, gather a large request,
// parse, execute; the pipelined fast path (pipeline.go), large requests (bigreq.go) and refused blocks
// (swallow) keep their state in types of their own.
type conn struct {
	srv     *Server
	parser  protocol.Parser
	req     protocol.Request
	out     []byte // replies not yet written to the transport
	scratch []byte // value bytes copied out of the store
	sw      swallow
	local   counters
	gc      Transport // the transport being served, during serve only (for replies flushed mid-command)
	// loop is what this connection shares with the others of its event loop (loopShared): the batch of a
	// pipelined read and, during serve, the buffer out is. nil until first needed outside a loop (tests).
	loop *loopShared
	fast fastPath // what the pipelined fast path left for the request being executed (pipeline.go)
	// need is how many bytes the incomplete request at the front of the input spans (Parser.Need), 0 when
	// not known. Until that many have arrived, serve does not parse the input again: Peek may copy all of
	// it into one slice each time (doc/design/backpressure.md). Larger requests are gathered in big.
	need int
	big  gather
	// closed is set by OnClose. gnet closes a connection inside the write that fails, which can be a flush in
	// the middle of serve; serve then stops, executes nothing more and writes nothing more, as memcached
	// drops the rest of a closing connection's input.
	closed bool
	// blocked is set during a serve call once the transport holds more than outboundLimit of this
	// connection's replies: nothing more is executed, and serve asks for PauseRead.
	blocked bool
	// yielded is set when a request stopped part-way (outcome suspended); resume is where it goes on:
	// the next key of a multi-key fetch. dump is where a suspended metadump goes on. The request stays
	// at the front of the input, so the next serve parses it again and finds them.
	yielded bool
	resume  int
	dump    shard.DumpCursor
	// again is set while the request at the front of the input was suspended (yield, or a parked read):
	// executing it again goes on with its work but does not trace, count or log it again (suspend).
	again   bool
	metaKey [protocol.KeyMaxLength]byte // me's base64-decoded key (flag b); the others decode in the parser
	auth    *authConn                   // -Y, until the connection has authenticated (auth.go); nil otherwise
	// negotiated is set once the connection's first byte chose its protocol (-B); bin is the binary
	// protocol's state, nil on a text connection (binary.go).
	negotiated bool
	bin        *binConn
	// parked: a get-family read of this connection waits for a refill (hold.go); nothing is executed until
	// it wakes. hold is the connection's hold state, nil until its first grace or hold miss.
	parked bool
	hold   *connHold

	// watch is set once the connection became a watcher (watch.go): serve then only writes its lines.
	// closeWhy is a close reason the server decided (idle), for the conn_close line; 0 otherwise.
	watch    *watch.Watcher
	closeWhy uint8
	// sentMark is how much of out memcached would have written already: a get-family command or mn
	// writes its connection's replies out at once, and `watch` is refused only behind replies still
	// queued (watch.go). flush resets it.
	sentMark int

	fd      int          // socket descriptor, the connection's name in `stats conns`
	remote  string       // peer address, captured once at open
	listen  string       // the listener's address, `stats conns` listen_addr ("tcp:127.0.0.1:11211")
	lastCmd atomic.Int64 // unix seconds of the last read event, for `stats conns`
}

// newConn returns a connection served with the event loop state ls, or with state of its own if ls is nil.
func newConn(s *Server, ls *loopShared) *conn {
	return &conn{
		srv:    s,
		parser: protocol.Parser{MaxItemSize: s.cfg.MaxItemSize},
		loop:   ls,
		auth:   s.newAuthConn(),
	}
}

// swallow is a refused data block being discarded as it arrives (memcached's conn_swallow).
type swallow struct {
	n int // bytes still to discard
	// held is the refusal. memcached only writes it once the whole block has been read and discarded, so
	// a client that waits for the reply before sending the rest of the block sees it no earlier than
	// memcached would let it. Nothing else is parsed while swallowing, so holding it keeps replies in order.
	held []byte
}

// take discards what it can of buf, and returns how much, and the held refusal once the block is gone.
func (sw *swallow) take(buf []byte) (int, []byte) {
	k := min(sw.n, len(buf))
	sw.n -= k
	if sw.n > 0 {
		return k, nil
	}
	held := sw.held
	sw.held = nil
	return k, held
}

// serve executes every complete request in c's input, in order, and writes their replies in one batch.
func (cn *conn) serve(c Transport) Action {
	if cn.watch != nil {
		return cn.serveWatch(c)
	}
	if cn.parked && !cn.woke(c) {
		return Continue // the transport keeps the input until the read wakes (hold.go)
	}
	if cn.need > 0 && c.InboundBuffered() < cn.need {
		cn.lastCmd.Store(cn.srv.store.Now())
		return Continue // the transport keeps the unread input for the next read
	}
	cn.need = 0
	cn.gc = c
	cn.blocked, cn.yielded = false, false
	defer func() { cn.gc = nil }()
	cn.out = cn.shared().borrowOut(cn.out)
	action, pos := Continue, 0
	if cn.big.active() {
		var done bool
		if action, done = cn.serveBig(c); !done {
			return cn.done(c, 0, action)
		}
	}
	buf, _ := c.Peek(-1)
	if !cn.negotiated && len(buf) > 0 {
		cn.negotiate(buf[0])
	}
	if cn.bin != nil { // binary.go
		pos, action = cn.serveBinary(buf)
		return cn.done(c, pos, action)
	}
	pre := cn.fast.takePreParsed()
	if cn.auth != nil { // -Y, not yet authenticated (auth.go)
		if pos, action = cn.serveAuth(c, buf); cn.auth != nil || action != Continue {
			return cn.done(c, pos, action)
		}
		pre = 0 // OnTrafficBatch parsed the attempt as a set
	}
	for pos < len(buf) && action == Continue && !cn.closed && !cn.blocked && !cn.yielded && !cn.parked {
		if cn.sw.n > 0 {
			k, held := cn.sw.take(buf[pos:])
			pos += k
			cn.out = append(cn.out, held...)
			continue
		}
		n, err := pre, error(nil)
		if pre == 0 {
			cn.fast.preHashed = false // preHash belongs to the pre-parsed request only
			n, err = cn.parser.Parse(buf[pos:], &cn.req)
		}
		pre = 0
		switch {
		case err != nil:
			pos += n
			action = cn.refuse(err)
		case n == 0: // incomplete request: wait for more bytes, or gather it
			var wait bool
			if pos, action, wait = cn.incomplete(buf, pos); wait {
				return cn.done(c, pos, action)
			}
		case pos+n < len(buf):
			cn.fast.preHashed = false // the batch's Prefetch hashes every request's keys
			pos, action = cn.serveAhead(buf, pos, n)
		default:
			pos, action = cn.serveOne(pos, n)
		}
	}
	return cn.done(c, pos, action)
}

// incomplete handles an incomplete request at buf[pos:]: a short one waits in the transport's input until
// Need bytes have arrived; a large one is gathered (bigreq.go), or refused when the gathering budget has no
// room. wait reports that serve must end, with pos consumed.
func (cn *conn) incomplete(buf []byte, pos int) (int, Action, bool) {
	need := cn.parser.Need()
	switch {
	case need == 0 && len(buf)-pos >= bigRequestMin: // a long line that has not ended
		if cn.big.startLine(cn.srv, buf[pos:]) {
			return len(buf), Continue, true
		}
		cn.out = append(cn.out, protocol.ReplyServerErrorOOMRead...)
		return pos, Close, false
	case need < bigRequestMin:
		cn.need = need
		return pos, Continue, true
	case cn.big.start(cn.srv, buf[pos:], need):
		return len(buf), Continue, true
	}
	cn.local[statStoreNoMemory]++
	n, err := cn.parser.RefuseNoMemory(buf[pos:])
	return pos + n, cn.refuse(err), false
}

// serveOne executes the request parsed into cn.req, the only one in the input, n bytes at pos. A
// multi-key fetch still gains from fetching its keys' memory together; one key has nothing to overlap with.
func (cn *conn) serveOne(pos, n int) (int, Action) {
	if len(cn.req.Keys) > 1 {
		cn.prefetchKeys(cn.req.Keys)
	}
	defer cn.fast.executed()
	var out outcome
	if lat := cn.loop.lat; lat == nil { // --metrics-listen off (metrics.go)
		out = cn.execute(&cn.req)
	} else {
		out = cn.runTimed(&cn.req, lat)
	}
	switch out {
	case closeConn:
		return pos + n, Close
	case suspended: // the request stays in the input, to go on from cn.resume
		return pos, Continue
	}
	return pos + n, Continue
}

// done ends a serve call: the first pos bytes of input are consumed and the replies written. A blocked
// connection asks to be paused, a yielded one to be served again.
func (cn *conn) done(c Transport, pos int, action Action) Action {
	cn.local[statBytesRead] += uint64(pos)
	if cn.closed {
		cn.out, action = cn.out[:0], Close
		merge(&cn.local, cn.loop.counts)
	} else {
		if pos > 0 {
			_, _ = c.Discard(pos)
		}
		cn.flush(c) // publishes the counts
	}
	if cn.closed { // OnClose ran during this serve (maybe in that flush), and left the buffer to us
		cn.releaseBig()
	}
	cn.out = cn.loop.returnOut(cn.out)
	cn.lastCmd.Store(cn.srv.store.Now())
	switch {
	case action != Continue:
	case cn.blocked:
		action = PauseRead
	case cn.yielded:
		action = ServeAgain
	}
	return action
}

// replyInternalParserError answers what only a parser bug can produce: never a guess at the request.
var replyInternalParserError = []byte("SERVER_ERROR internal parser error\r\n")

// refuse answers a request the parser refused, as memcached would: the reply now, or once the refused data
// block has been swallowed; the value the refused store would have replaced dropped; the connection closed
// when memcached closes it.
func (cn *conn) refuse(err error) Action {
	perr, ok := err.(*protocol.Error)
	if !ok {
		// The parser promises *protocol.Error; anything else is a bug we must not answer with a guess.
		cn.log(slog.LevelError, "closing: internal parser error", slog.Any("err", err))
		cn.out = append(cn.out, replyInternalParserError...)
		return Close
	}
	if perr.DropKey != nil {
		cn.srv.store.Discard(perr.DropKey)
	}
	if perr.Refused.Key != nil && cn.srv.watch.On(watch.Mutations) {
		cn.logRefusedStore(perr.Refused)
	}
	cn.sw.n = perr.Swallow
	if cn.sw.n > 0 {
		cn.sw.held = perr.Reply // a package-level reply text: safe to keep past the next Parse
	} else {
		cn.out = append(cn.out, perr.Reply...)
	}
	if perr.Close {
		if cn.srv.logs(slog.LevelInfo) {
			cn.protocolError(string(bytes.TrimSpace(perr.Reply)))
		}
		return Close
	}
	return Continue
}

// protocolError logs (-v) that the connection closes for what its client sent, saying why.
func (cn *conn) protocolError(why string) {
	cn.log(slog.LevelInfo, "closing: protocol error", slog.String("error", why))
}

// shared is the connection's loopShared, made on first use for a connection that has none.
func (cn *conn) shared() *loopShared {
	if cn.loop == nil {
		cn.loop = cn.srv.newLoopShared(false)
	}
	return cn.loop
}

// flush writes the batched replies to the transport, which sends what the socket takes and keeps the rest.
// The connection's counts reach its loop's share first: a client that has read a reply finds its request
// counted by `stats` on any connection.
func (cn *conn) flush(c Transport) {
	cn.local[statBytesWritten] += uint64(len(cn.out))
	merge(&cn.local, cn.loop.counts)
	if len(cn.out) == 0 {
		return
	}
	_, _ = c.Write(cn.out) // the transport copies what the socket does not take: the buffer is free at once
	cn.out = cn.out[:0]
	cn.sentMark = 0
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
// connection goes on once the client has read; any other is served again after the loop has served its
// other connections, so one request never holds an event loop for more than one piece.
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
