package server

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"log/slog"

	"github.com/leasecached/leasecached/auth"
	"github.com/leasecached/leasecached/protocol"
	bp "github.com/leasecached/leasecached/protocol/binprot"
	"github.com/leasecached/leasecached/shard"
	"github.com/leasecached/leasecached/watch"
)

// The binary protocol, as memcached 1.6.18 serves it (proto_bin.c): protocol/binprot reads and writes the
// packets, this file executes them against the same store, stats and limits as the text protocol. A
// connection speaks one protocol for its life, chosen by its first byte (-B). See doc/design/binary.md.

// Protocol is -B: the protocols connections may speak.
type Protocol uint8

const (
	ProtocolAuto   Protocol = iota // the first byte decides: 0x80 binary, anything else text
	ProtocolASCII                  // text only: a 0x80 is a text protocol error
	ProtocolBinary                 // binary only: a connection that does not start with 0x80 is closed
)

// ParseProtocol reads -B's value as memcached does.
func ParseProtocol(s string) (Protocol, error) {
	switch s {
	case "auto":
		return ProtocolAuto, nil
	case "ascii":
		return ProtocolASCII, nil
	case "binary":
		return ProtocolBinary, nil
	}
	return 0, fmt.Errorf("invalid value for binding protocol: %s -- should be one of auto, binary, or ascii", s)
}

// String is -B's value, and what `stats settings` reports as binding_protocol.
func (p Protocol) String() string {
	switch p {
	case ProtocolASCII:
		return "ascii"
	case ProtocolBinary:
		return "binary"
	}
	return "auto-negotiate"
}

// binConn is a binary connection's state; conn.bin is nil on a text connection.
type binConn struct {
	req bp.Request // the request being executed; its slices alias the input
	// held is an error reply memcached sends only once the bytes it discards after it are gone
	// (swallow.held points into it until then).
	held []byte
	// itemHeader is appendItemHeader bound once, for the store to call on a hit without a per-request
	// closure; withKey tells it whether the request returns its key (GetK, GatK).
	itemHeader shard.ValueHeader
	withKey    bool
	// SASL (-S), as memcached with Cyrus SASL behaves: authed while the connection may send commands
	// (every SASL command clears it first); done once an exchange succeeded, after which Cyrus refuses
	// every new one; awaiting after a PLAIN SASL_AUTH without credentials, which a SASL_STEP then brings.
	// pending is the check of the request at the front of the input, running on a checker goroutine.
	authed, done, awaiting bool
	pending                *auth.Pending
	// after is the input that follows the request being executed, as far as it has arrived: memcached
	// reads STAT's group names past a shorter key (binStats).
	after []byte
	// sent is how much of cn.out memcached would have written by now in this serve call. It writes its
	// replies when the input runs out, after an error reply or a NOOP, and every reqs_per_event requests
	// (authWindow); a request with a bad magic closes the connection at once, and what it had not written
	// is lost.
	sent int
}

// negotiate picks the protocol of a connection from its first byte, as memcached's -B does: with auto,
// 0x80 selects binary and anything else text. It runs once, on the connection's first input.
func (cn *conn) negotiate(first byte) {
	cn.negotiated = true
	proto := cn.srv.cfg.Protocol
	switch {
	case cn.srv.sasl != nil: // SASL is binary only, and -Y text only (cmd/leasecached enforces both)
		proto = ProtocolBinary
	case cn.srv.auth != nil:
		proto = ProtocolASCII
	}
	if proto == ProtocolASCII || proto == ProtocolAuto && first != bp.MagicRequest {
		return
	}
	bc := &binConn{authed: cn.srv.sasl == nil}
	bc.itemHeader = bc.appendItemHeader
	cn.bin = bc
}

// appendItemHeader is a shard.ValueHeader: the reply header of a get hit for the request being executed.
func (bc *binConn) appendItemHeader(dst, key []byte, flags uint32, n int, cas uint64, _ bool) []byte {
	return bp.AppendItemHeader(dst, &bc.req.Header, key, bc.withKey, flags, n, cas)
}

// serveBinary serves the binary requests at the front of buf, as serve does text ones, and returns how much
// of buf it consumed and what the transport must do.
func (cn *conn) serveBinary(buf []byte) (int, Action) {
	bc := cn.bin
	bc.sent = 0
	pos := 0
	for served := 1; pos < len(buf) && !cn.closed && !cn.blocked; served++ {
		if cn.sw.n > 0 {
			k, held := cn.sw.take(buf[pos:])
			pos += k
			cn.out = append(cn.out, held...)
			continue
		}
		n, out := cn.binRequest(buf[pos:])
		cn.fast.preHashed = false // prefetchFirst's Hashed was for the first request only (batch.go)
		switch out {
		case binSuspended: // a SASL check: what arrives meanwhile waits, up to -Y's bound (auth.go)
			if len(buf)-pos > authPendingInput {
				return pos, Close
			}
			return pos, Continue
		case binWait:
			return pos, Continue
		case binGathering:
			return len(buf), Continue
		case binClose:
			return pos + n, Close
		case binLost:
			cn.out = cn.out[:min(bc.sent, len(cn.out))]
			return pos, Close
		}
		pos += n
		if served == authFirstWindow || served > authFirstWindow && (served-authFirstWindow)%authWindow == 0 {
			bc.sent = len(cn.out) // memcached's reqs_per_event, as with -Y (auth.go)
		}
		if len(cn.out) >= flushThreshold {
			cn.flush(cn.gc)
			bc.sent = 0
		}
	}
	return pos, Continue
}

// binOutcome is what binRequest did with the front of the input.
type binOutcome uint8

const (
	binDone      binOutcome = iota // n bytes were consumed
	binWait                        // the request is incomplete: cn.need says how long it is
	binGathering                   // a large request is being gathered (bigreq.go): all the input was taken
	binSuspended                   // the request waits (a SASL check): it stays in the input
	binClose                       // n bytes were consumed, and the connection closes after its replies
	binLost                        // the connection closes at once: replies memcached had not written are lost
)

// binRequest serves the request at the front of in, following dispatch_bin_command's order: the header,
// then the lengths, the SASL gate, the command's own length rules, and for a command with a value, the
// item size, before the value has arrived.
func (cn *conn) binRequest(in []byte) (int, binOutcome) {
	if len(in) < bp.HeaderLen {
		cn.need = bp.HeaderLen
		return 0, binWait
	}
	h := bp.ReadHeader(in)
	if h.Magic != bp.MagicRequest {
		cn.protocolError("not a binary request")
		return 0, binLost
	}
	prefix := h.Prefix()
	if prefix > protocol.ReadBufferSize { // memcached's read buffer cannot hold it: it reads on until full
		if len(in) >= protocol.ReadBufferSize {
			cn.protocolError("binary request header too long")
			return 0, binLost
		}
		cn.need = protocol.ReadBufferSize
		return 0, binWait
	}
	if len(in) < prefix {
		cn.need = prefix
		return 0, binWait
	}
	bc := cn.bin
	switch {
	case !h.LengthsFit():
		cn.protocolError("binary request lengths do not fit")
		cn.out = bp.AppendError(cn.out, &h, bp.StatusUnknownCommand)
		return prefix, binClose
	case !bc.authed && !saslFree(h.Opcode):
		cn.protocolError("binary command before SASL authentication")
		cn.out = bp.AppendError(cn.out, &h, bp.StatusAuthError)
		return prefix, binClose
	}
	switch h.Check() {
	case bp.Invalid:
		cn.protocolError("invalid binary request")
		cn.out = bp.AppendError(cn.out, &h, bp.StatusEINVAL)
		return prefix, binClose
	case bp.Unknown:
		return prefix, cn.binRefuse(&h, bp.StatusUnknownCommand, h.SwallowUnknown())
	}
	if !h.HasValue() {
		bc.req.Slice(h, in)
		bc.after = in[prefix:]
		out := cn.runBinary()
		bc.after = nil // the input is the transport's
		return prefix, out
	}
	if status, ok := cn.binValueFits(&h, in); !ok {
		return prefix, cn.binRefuse(&h, status, h.ValueLen())
	}
	total := bp.HeaderLen + int(h.BodyLen)
	if len(in) < total {
		switch {
		case total < bigRequestMin:
			cn.need = total
			return 0, binWait
		case cn.big.start(cn.srv, in, total):
			return 0, binGathering
		}
		// No room in the gathering budget: memcached's answer when it cannot allocate the item.
		return prefix, cn.binRefuse(&h, bp.StatusENOMEM, h.ValueLen())
	}
	bc.req.Slice(h, in)
	out := cn.runBinary()
	if out == binSuspended {
		return 0, out
	}
	return total, out
}

// serveBinaryGathered executes the large request gathered whole in buf (bigreq.go). It is never suspended:
// SASL credentials that long are refused without a check (parsePlain).
func (cn *conn) serveBinaryGathered(buf []byte) Action {
	cn.bin.req.Slice(bp.ReadHeader(buf), buf)
	if cn.runBinary() == binClose {
		return Close
	}
	return Continue
}

// saslFree reports whether a connection may send op before it has authenticated (memcached's
// authenticated()).
func saslFree(op bp.Opcode) bool {
	switch op {
	case bp.OpSASLListMechs, bp.OpSASLAuth, bp.OpSASLStep, bp.OpVersion:
		return true
	}
	return false
}

// binValueFits applies memcached's item allocation to a command's value before the value has arrived
// (in holds the request's prefix), and names the error status when it does not fit. A set that does not
// fit also drops the key's value: memcached unlinks it rather than keep a stale one.
func (cn *conn) binValueFits(h *bp.Header, in []byte) (bp.Status, bool) {
	vlen, key, limit := h.ValueLen(), int(h.KeyLen), cn.srv.cfg.MaxItemSize
	switch op := h.Opcode.Base(); op {
	case bp.OpSASLAuth, bp.OpSASLStep:
		switch {
		case cn.srv.sasl == nil:
			return bp.StatusUnknownCommand, false // SASL is off: an unknown command, its value swallowed
		case key > saslMaxMechLen:
			return bp.StatusEINVAL, false
		case protocol.ItemSize(key, vlen, 0) > limit/2: // memcached refuses a chunked item here
			return bp.StatusENOMEM, false
		}
	case bp.OpAppend, bp.OpPrepend:
		if protocol.ItemSize(key, vlen, 0) > limit {
			return bp.StatusE2BIG, false
		}
	default: // set, add, replace: the flags are the first 4 bytes of the extras
		flags := binary.BigEndian.Uint32(in[bp.HeaderLen:])
		if protocol.ItemSize(key, vlen, flags) > limit {
			if op == bp.OpSet {
				cn.srv.store.Discard(in[bp.HeaderLen+int(h.ExtLen) : h.Prefix()])
			}
			return bp.StatusE2BIG, false // memcached counts no store_too_large here
		}
	}
	return 0, true
}

// binRefuse answers h with status once the swallow bytes after its prefix have been discarded, as
// memcached's write_bin_error with a swallow count does.
func (cn *conn) binRefuse(h *bp.Header, status bp.Status, swallow int) binOutcome {
	bc := cn.bin
	if swallow <= 0 {
		cn.out = bp.AppendError(cn.out, h, status)
		bc.sent = len(cn.out)
		return binDone
	}
	// Nothing is written while memcached swallows: the replies it had not written wait with this one.
	if cap(bc.held) > keepBufferCap {
		bc.held = nil
	}
	bc.held = bp.AppendError(append(bc.held[:0], cn.out[bc.sent:]...), h, status)
	cn.out = cn.out[:bc.sent]
	cn.sw.n, cn.sw.held = swallow, bc.held
	return binDone
}

// binSuccess appends a success reply unless the request is quiet (write_bin_response).
func (cn *conn) binSuccess(body []byte, cas uint64) {
	if !cn.bin.req.Opcode.Quiet() {
		cn.out = bp.AppendSimple(cn.out, &cn.bin.req.Header, body, cas)
	}
}

// binError appends an error reply, which memcached writes at once (write_bin_error).
func (cn *conn) binError(s bp.Status) {
	cn.out = bp.AppendError(cn.out, &cn.bin.req.Header, s)
	cn.bin.sent = len(cn.out)
}

// execBinary executes cn.bin.req, whose prefix (and value, if it has one) is whole and valid.
func (cn *conn) execBinary() binOutcome {
	r := &cn.bin.req
	if cn.srv.tracing.Load() { // -vvv (logger.go)
		cn.traceCommand(slog.String("opcode", fmt.Sprintf("0x%02x", byte(r.Opcode))), r.Key, min(len(r.Key), 1))
	}
	if len(r.Key) != 0 && cn.loop.hot.Due(1) { // hot-key detection: rarely taken (hotkeys.go)
		cn.sampleBinary()
	}
	if cn.srv.watch.On(watch.Fetchers) && binLooksUp(r.Opcode.Base()) {
		cn.logGet(r.Key)
	}
	switch r.Opcode.Base() {
	case bp.OpGet, bp.OpGetK:
		cn.binGet()
	case bp.OpTouch, bp.OpGat, bp.OpGatK:
		cn.binTouch()
	case bp.OpSet, bp.OpAdd, bp.OpReplace, bp.OpAppend, bp.OpPrepend:
		cn.binStore()
	case bp.OpDelete:
		cn.binDelete()
	case bp.OpIncrement, bp.OpDecrement:
		cn.binArith()
	case bp.OpFlush:
		var delay uint32
		if len(r.Extras) == 4 {
			delay = r.Uint32(0)
		}
		if cn.srv.cfg.DisableFlush { // -F: refused before it is counted, even quiet (process_bin_flush)
			cn.binError(bp.StatusAuthError)
			break
		}
		cn.local[statCmdFlush]++
		cn.srv.store.FlushAll(int64(delay))
		if cn.srv.watch.On(watch.Deletions) {
			cn.logFlush(int64(delay))
		}
		cn.binSuccess(nil, 0)
	case bp.OpNoop: // written at once, with everything before it
		cn.binSuccess(nil, 0)
		cn.bin.sent = len(cn.out)
	case bp.OpVersion:
		cn.binSuccess(binVersion, 0)
	case bp.OpQuit:
		cn.binSuccess(nil, 0)
		return binClose
	case bp.OpStat:
		cn.binStats()
	case bp.OpSASLListMechs:
		if cn.srv.sasl == nil {
			cn.binError(bp.StatusUnknownCommand)
			break
		}
		cn.bin.authed = false // memcached's init_sasl_conn: listing the mechanisms starts over
		cn.binSuccess(saslMechs, 0)
	case bp.OpSASLAuth, bp.OpSASLStep:
		return cn.binSASL()
	}
	return binDone
}

var binVersion = []byte(ProtocolVersion)

// binLooksUp reports whether memcached looks the key of an op up (do_item_get), which `watch fetchers`
// shows as an item_get line.
func binLooksUp(op bp.Opcode) bool {
	switch op {
	case bp.OpGet, bp.OpGetK, bp.OpTouch, bp.OpGat, bp.OpGatK, bp.OpSet, bp.OpAdd, bp.OpReplace, bp.OpAppend,
		bp.OpPrepend, bp.OpDelete, bp.OpIncrement, bp.OpDecrement:
		return true
	}
	return false
}

// binGet is GET, GETQ, GETK and GETKQ: a hit is always answered; a miss is, unless the request is quiet.
func (cn *conn) binGet() {
	bc := cn.bin
	r := &bc.req
	bc.withKey = r.Opcode.Base() == bp.OpGetK
	store := cn.srv.store
	n := len(cn.out)
	k := cn.hashOf(0, r.Key)
	var ok bool
	cn.out, ok = store.AppendGetHashed(cn.out, r.Key, k, false, bc.itemHeader)
	if !ok {
		ok = cn.binGrace(k)
	}
	if ok {
		// The store ends every value with the text protocol's "\r\n", which a binary reply does not carry.
		cn.out = cn.out[:len(cn.out)-2]
	} else {
		cn.out = cn.out[:n]
		if !r.Opcode.Quiet() {
			cn.binMiss()
		}
	}
	cn.local[statCmdGet]++
	cn.countHit(ok, statGetHits, statGetMisses)
	cn.srv.detail.record(r.Key, prefixGet, ok)
}

// binGrace serves a get or gat of the key hashed k that found no live item, with --grace or --hold on:
// a grace copy answers as a hit (its value block appended, "\r\n" included, as AppendGet's), and the
// first reader claims the refill. A binary read is never parked (--hold): it misses, as without hold,
// while the reader that claimed the refill refills.
func (cn *conn) binGrace(k shard.Hashed) bool {
	store := cn.srv.store
	if !store.Herd() {
		return false
	}
	var out shard.MissOutcome
	cn.out, out = store.AppendMiss(cn.out, cn.bin.req.Key, k, false, cn.bin.itemHeader, nil)
	return out == shard.MissHit || out == shard.MissGrace
}

// binMiss answers a get or gat miss: an error without the key (written at once), or with it.
func (cn *conn) binMiss() {
	bc := cn.bin
	if !bc.withKey {
		cn.binError(bp.StatusKeyENOENT)
		return
	}
	cn.out = bp.AppendMiss(cn.out, &bc.req.Header, bc.req.Key, true)
}

// binTouch is TOUCH, GAT, GATQ, GATK and GATKQ. A touch hit answers the flags and CAS without the value.
func (cn *conn) binTouch() {
	bc := cn.bin
	r := &bc.req
	op := r.Opcode.Base()
	bc.withKey = op == bp.OpGatK
	var info shard.Info
	var ok bool
	cn.scratch, info, ok = cn.srv.store.GetAndTouch(cn.scratch[:0], r.Key, int64(r.Uint32(0)))
	if !ok && op != bp.OpTouch { // a gat gets a grace copy, untouched, as in the text protocol
		if ok = cn.binGrace(shard.HashOf(r.Key)); ok {
			cn.out = cn.out[:len(cn.out)-2]
		}
		cn.local[statCmdTouch]++
		cn.countHit(ok, statTouchHits, statTouchMisses)
		cn.srv.detail.record(r.Key, prefixGet, ok)
		if !ok && !r.Opcode.Quiet() {
			cn.binMiss()
		}
		return
	}
	cn.local[statCmdTouch]++
	cn.countHit(ok, statTouchHits, statTouchMisses)
	cn.srv.detail.record(r.Key, prefixGet, ok)
	switch {
	case ok && op == bp.OpTouch:
		cn.out = bp.AppendItemHeader(cn.out, &r.Header, r.Key, false, info.Flags, 0, info.Cas)
	case ok:
		cn.out = bp.AppendItemHeader(cn.out, &r.Header, r.Key, bc.withKey, info.Flags, len(cn.scratch), info.Cas)
		cn.out = append(cn.out, cn.scratch...)
	case !r.Opcode.Quiet():
		cn.binMiss()
	}
}

// binModes maps each binary store command to the store's mode. A non-zero CAS makes set, add and replace a
// compare-and-swap (memcached's NREAD_CAS); append and prepend compare it.
var binModes = [...]shard.Mode{
	bp.OpSet:     shard.ModeSet,
	bp.OpAdd:     shard.ModeAdd,
	bp.OpReplace: shard.ModeReplace,
	bp.OpAppend:  shard.ModeAppend,
	bp.OpPrepend: shard.ModePrepend,
}

// binStore is SET, ADD, REPLACE, APPEND, PREPEND and their quiet forms.
func (cn *conn) binStore() {
	r := &cn.bin.req
	op := r.Opcode.Base()
	req := shard.MetaSetRequest{Mode: binModes[op], Cas: r.Cas}
	if op == bp.OpSet || op == bp.OpAdd || op == bp.OpReplace {
		req.Flags, req.Exptime = r.Uint32(0), int64(r.Uint32(4))
		if r.Cas != 0 {
			req.Mode = shard.ModeCas
		}
	}
	cn.local[statCmdSet]++
	cn.srv.detail.record(r.Key, prefixSet, false)
	res, cas := cn.srv.store.MetaSet(r.Key, r.Value, &req)
	if req.Mode == shard.ModeCas {
		cn.countCas(res)
	}
	if cn.srv.watch.On(watch.Mutations) {
		cn.logStore(req.Mode, storeCmdName(req.Mode), r.Key, res, req.Flags, req.Exptime, len(r.Value))
	}
	switch {
	case res == shard.Stored:
		cn.binSuccess(nil, cas)
	case res == shard.NotStored && req.Mode == shard.ModeAdd: // what complete_update_bin makes of it
		cn.binError(bp.StatusKeyEEXISTS)
	case res == shard.NotStored && req.Mode == shard.ModeReplace:
		cn.binError(bp.StatusKeyENOENT)
	default:
		cn.binError(binStatus(res))
	}
}

// binStatus is the error status of a store result that is not a success.
func binStatus(res shard.Result) bp.Status {
	switch res {
	case shard.Exists:
		return bp.StatusKeyEEXISTS
	case shard.NotFound:
		return bp.StatusKeyENOENT
	case shard.NonNumeric:
		return bp.StatusDeltaBadval
	case shard.NoMemory:
		return bp.StatusENOMEM
	}
	return bp.StatusNotStored
}

// binDelete is DELETE and DELETEQ, with the CAS compared when non-zero.
func (cn *conn) binDelete() {
	r := &cn.bin.req
	cn.srv.detail.record(r.Key, prefixDel, false)
	lk := cn.peekDeleted(r.Key)
	res := cn.srv.store.MetaDelete(r.Key, &shard.MetaDeleteRequest{HasCas: r.Cas != 0, Cas: r.Cas})
	if res == shard.Deleted && cn.srv.watch.On(watch.Deletions) {
		cn.logDeleted("delete", r.Key, lk)
	}
	switch res {
	case shard.Deleted:
		cn.local[statDeleteHits]++
		cn.binSuccess(nil, 0)
		return
	case shard.NotFound:
		cn.local[statDeleteMisses]++
	}
	cn.binError(binStatus(res))
}

// binArith is INCREMENT and DECREMENT and their quiet forms: a miss creates the key with the initial value
// unless the expiry is binprot.NoCreate; the CAS is compared when non-zero.
func (cn *conn) binArith() {
	r := &cn.bin.req
	incr := r.Opcode.Base() == bp.OpIncrement
	exp := r.Uint32(16)
	req := shard.MetaArithRequest{Incr: incr, Delta: r.Uint64(0), Cas: r.Cas, Vivify: exp != bp.NoCreate, Initial: r.Uint64(8)}
	if req.Vivify {
		req.Ops.Add(shard.ExpVivify, int64(exp))
	}
	res := cn.srv.store.MetaArith(r.Key, &req)
	if res.Created && cn.srv.watch.On(watch.Fetchers|watch.Mutations) {
		cn.logVivified(r.Key)
	}
	hitStat, missStat := statDecrHits, statDecrMisses
	if incr {
		hitStat, missStat = statIncrHits, statIncrMisses
	}
	switch res.Result {
	case shard.Stored:
		if !res.Created {
			cn.local[hitStat]++
		}
		if !r.Opcode.Quiet() {
			cn.out = bp.AppendCounter(cn.out, &r.Header, res.Value, res.Cas)
		}
		return
	case shard.NotFound:
		cn.local[missStat]++
	}
	cn.binError(binStatus(res.Result))
}

// binStats is STAT: the text protocol's stats, one packet each (name as key, value as value), then an
// empty packet. memcached matches the group names reset, settings and detail by prefix, the others whole.
func (cn *conn) binStats() {
	r := &cn.bin.req
	group := r.Key
	// memcached compares reset, settings and detail with strncmp over the name's length, reading past a
	// shorter key into what follows it in its buffer.
	after := cn.bin.after[:min(len(cn.bin.after), len("detail dump"))]
	view := append(append(make([]byte, 0, len(group)+len(after)), group...), after...)
	named := func(name string) bool { return bytes.HasPrefix(view, []byte(name)) }
	var lines []byte
	s := cn.srv
	switch {
	case len(group) == 0:
		merge(&cn.local, cn.shared().counts)
		lines = s.appendGeneralStats(nil)
	case named("reset"):
		cn.local = counters{}
		s.stats.reset()
		s.store.ResetStats()
		s.detail.reset()
	case named("settings"):
		lines = s.appendSettingsStats(nil)
	case named("detail"):
		switch arg := view[len("detail"):]; {
		case bytes.HasPrefix(arg, []byte(" dump")):
			dump := append(s.detail.appendDump(nil), protocol.ReplyEnd...)
			cn.out = bp.AppendStat(cn.out, &r.Header, []byte("detailed"), dump)
		case bytes.HasPrefix(arg, []byte(" on")):
			s.detail.on.Store(true)
		case bytes.HasPrefix(arg, []byte(" off")):
			s.detail.on.Store(false)
		default:
			cn.binError(bp.StatusKeyENOENT)
			return
		}
	case string(group) == "items":
		lines = s.appendItemStats(nil)
	case string(group) == "slabs":
		lines = s.appendSlabStats(nil)
	case string(group) == "hotkeys":
		lines = s.appendHotKeyStats(nil)
	case string(group) == "sizes":
		lines = stat(nil, "sizes_status", "disabled")
	case string(group) == "sizes_enable", string(group) == "sizes_disable": // no empty packet after them
		cn.binStatLines(appendSizesSwitch(nil, string(group) == "sizes_enable"))
		return
	default:
		cn.binError(bp.StatusKeyENOENT)
		return
	}
	cn.binStatLines(lines)
	cn.out = bp.AppendStat(cn.out, &r.Header, nil, nil)
}

// binStatLines answers the text protocol's "STAT <name> <value>\r\n" lines as one packet each.
func (cn *conn) binStatLines(lines []byte) {
	for len(lines) > 0 {
		var line []byte
		line, lines, _ = bytes.Cut(lines, []byte("\r\n"))
		name, value, _ := bytes.Cut(bytes.TrimPrefix(line, []byte("STAT ")), []byte(" "))
		cn.out = bp.AppendStat(cn.out, &cn.bin.req.Header, name, value)
	}
}

// SASL (-S): PLAIN only, checked against --sasl-pwdb's users with -Y's checker (auth.Verifier).
const saslMaxMechLen = 32 // memcached's MAX_SASL_MECH_LEN

var (
	saslMechs         = []byte("PLAIN")
	saslAuthenticated = []byte("Authenticated")
)

// binSASL is SASL_AUTH and SASL_STEP with -S on. PLAIN takes one step: SASL_AUTH carries the credentials
// ("authzid\0user\0password", the authzid empty or the user), or none, and then AUTH_CONTINUE asks for them
// in a SASL_STEP. A check that runs on a checker goroutine (bcrypt) leaves the request at the front of the
// input until its answer is in.
func (cn *conn) binSASL() binOutcome {
	bc := cn.bin
	r := &bc.req
	ok := false
	if bc.pending != nil {
		var done bool
		if ok, done = bc.pending.Result(); !done {
			return binSuspended
		}
		bc.pending = nil
	} else {
		bc.authed = false // memcached's init_sasl_conn, on every SASL command
		var creds bool
		switch {
		case bc.done: // Cyrus takes no second exchange on a connection
		case r.Opcode == bp.OpSASLAuth && !bytes.EqualFold(r.Key, saslMechs):
			bc.awaiting = false
		case r.Opcode == bp.OpSASLAuth && len(r.Value) == 0:
			bc.awaiting = true
			cn.out = bp.AppendStatus(cn.out, &r.Header, bp.StatusAuthContinue)
			bc.sent = len(cn.out) // written at once
			return binDone
		case r.Opcode == bp.OpSASLAuth || bc.awaiting:
			creds = true
		}
		bc.awaiting = false
		if user, pass, parsed := parsePlain(r.Value); creds && parsed {
			var p *auth.Pending
			if ok, p = cn.srv.sasl.Check(user, pass, wakerOf(cn.gc)); p != nil {
				bc.pending = p
				return binSuspended
			}
		}
	}
	cn.local[statAuthCmds]++
	if !ok {
		cn.local[statAuthErrors]++
		cn.log(slog.LevelInfo, "SASL authentication failed")
		cn.binError(bp.StatusAuthError)
		return binDone
	}
	bc.authed, bc.done = true, true
	cn.binSuccess(saslAuthenticated, 0)
	return binDone
}

// parsePlain splits a PLAIN response (RFC 4616) into its user and password. An authorization identity
// other than the user is refused: nobody may act as someone else.
func parsePlain(b []byte) (user, pass []byte, ok bool) {
	if len(b) > 3*auth.MaxLineLength { // no user of the file has credentials this long: no check to make
		return nil, nil, false
	}
	authz, rest, ok1 := bytes.Cut(b, []byte{0})
	user, pass, ok2 := bytes.Cut(rest, []byte{0})
	if !ok1 || !ok2 || len(user) == 0 || bytes.IndexByte(pass, 0) >= 0 || len(authz) > 0 && !bytes.Equal(authz, user) {
		return nil, nil, false
	}
	return user, pass, true
}
