package server

import (
	"errors"
	"io"
	"net"
	"strconv"
	"strings"

	"github.com/leasecached/leasecached/protocol"
	"github.com/leasecached/leasecached/shard"
	"github.com/leasecached/leasecached/watch"
)

// memcached's `watch`: the command, the watching connection, and the lines of each kind in memcached's
// format, field for field (logger.c of 1.6.18; `deleted` from 1.6.20). The lines are formatted where the
// event happens, into the producer's watch.Sink; package watch moves them to the watchers. Every hook is
// one check of Hub.On when nobody watches. See doc/design/watch.md.

// memcached's replies to `watch` beyond OK.
var (
	replyWatchOK        = []byte("OK\r\n")
	replyWatchPipelined = []byte("ERROR cannot pipeline other commands before watch\r\n")
	replyWatchTooMany   = []byte("WATCHER_TOO_MANY log watcher limit reached\r\n")
	replyWatchFailed    = []byte("WATCHER_FAILED failed to add log watcher\r\n")
)

// Connection close reasons of conn_close lines (memcached's close_reasons).
const (
	closeError uint8 = iota
	closeNormal
	closeIdleTimeout
	closeShutdown
)

var closeReasons = [...]string{"error", "normal", "idle_timeout", "shutdown"}

// startWatch serves `watch`: on OK the connection serves nothing more and writes only its lines
// (serveWatch). It returns suspended so that serve stops at once, as memcached stops reading a watcher.
func (cn *conn) startWatch(req *protocol.Request) outcome {
	if cn.watchRefused(req) {
		return keepOpen
	}
	flags, ok := watch.ParseFlags(req.Args)
	switch {
	case !ok:
		cn.reply(req, protocol.ReplyError) // `watch noreply` is refused silently, as memcached does
		return keepOpen
	case len(cn.out) > cn.sentMark: // memcached's resp_has_stack
		cn.out = append(cn.out, replyWatchPipelined...)
		return keepOpen
	}
	wake := wakerOf(cn.gc)
	if wake == nil { // the stream transport writes only from its connection's goroutine (watch.md)
		cn.out = append(cn.out, replyWatchFailed...)
		return keepOpen
	}
	w, err := cn.srv.watch.Add(flags, watch.Waker(wake))
	if err != nil {
		cn.out = append(cn.out, replyWatchTooMany...)
		return keepOpen
	}
	cn.watch = w
	cn.out = append(cn.out, replyWatchOK...)
	cn.yielded = true // serve again: from then on serveWatch
	return suspended
}

// serveWatch is serve for a watching connection: what the client sends is dropped (memcached reads a
// watcher only to see it close), and the lines waiting for it are written, unless the transport already
// holds more than outboundLimit of them.
func (cn *conn) serveWatch(c Transport) Action {
	if n := c.InboundBuffered(); n > 0 {
		_, _ = c.Discard(n)
	}
	lines := cn.watch.Take(c.OutboundBuffered() > outboundLimit)
	if len(lines) > 0 {
		cn.local[statBytesWritten] += uint64(len(lines))
		_, _ = c.Write(lines)
		merge(&cn.local, cn.shared().counts)
	}
	return Continue
}

// sink is where the connection's lines go: its event loop's.
func (cn *conn) sink() *watch.Sink { return cn.shared().wsink }

// watchLookups logs the item_get lines of a request's key lookups, as memcached logs one for every
// do_item_get: each key of a fetch, and the key of a store, delete, touch or counter (a `set` shows an
// item_get before its item_store). It runs once per request: a fetch executed again after a yield or a
// parked read logs nothing more (conn.again).
func (cn *conn) watchLookups(req *protocol.Request) {
	switch req.Cmd {
	case protocol.CmdGet, protocol.CmdGets, protocol.CmdGat, protocol.CmdGats, protocol.CmdLeaseGet:
		for _, key := range req.Keys {
			cn.logGet(key)
		}
	case protocol.CmdSet, protocol.CmdAdd, protocol.CmdReplace, protocol.CmdAppend, protocol.CmdPrepend,
		protocol.CmdCas, protocol.CmdLeaseSet, protocol.CmdIncr, protocol.CmdDecr, protocol.CmdTouch,
		protocol.CmdDelete:
		cn.logGet(req.Key())
	case protocol.CmdMetaGet, protocol.CmdMetaSet, protocol.CmdMetaDelete, protocol.CmdMetaArithmetic,
		protocol.CmdMetaDebug:
		if req.MetaErr == nil {
			cn.logGet(req.Meta.Key)
		}
	}
}

// itemGetStatus are memcached's was_found words, by shard.LookupStatus.
var itemGetStatus = [...]string{"not_found", "found", "flushed", "expired"}

// logGet logs an item_get line of key as the store has it now.
func (cn *conn) logGet(key []byte) { cn.logLookup(key, cn.srv.store.Peek(key)) }

// logLookup logs an item_get line of key, whose item is lk.
func (cn *conn) logLookup(key []byte, lk shard.Lookup) {
	s := cn.sink()
	b := s.Begin(watch.Fetchers)
	if b == nil {
		return
	}
	b = append(b, "type=item_get key="...)
	b = appendURIEncoded(b, key)
	b = append(b, " status="...)
	b = append(b, itemGetStatus[lk.Status]...)
	b = cn.appendClassFd(b, lk.Class)
	b = append(b, " size="...)
	b = strconv.AppendInt(b, int64(lk.Size), 10)
	s.End(append(b, '\n'))
}

func (cn *conn) appendClassFd(b []byte, class int) []byte {
	b = append(b, " clsid="...)
	b = strconv.AppendInt(b, int64(class), 10)
	b = append(b, " cfd="...)
	return strconv.AppendInt(b, int64(cn.fd), 10)
}

// storeStatus are memcached's words for a store's result (store_item_type).
func storeStatus(res shard.Result) string {
	switch res {
	case shard.Stored:
		return "stored"
	case shard.Exists:
		return "exists"
	case shard.NotFound:
		return "not_found"
	case shard.TooLarge:
		return "too_large"
	case shard.NoMemory:
		return "no_memory"
	}
	return "not_stored"
}

// storeCmdNames are memcached's cmd= words by store mode; lease-set is leasecached's own.
var storeCmdNames = [...]string{
	shard.ModeSet: "set", shard.ModeAdd: "add", shard.ModeReplace: "replace", shard.ModeAppend: "append",
	shard.ModePrepend: "prepend", shard.ModeCas: "cas",
}

// storeCmdName is the cmd= word of a store in mode m.
func storeCmdName(m shard.Mode) string {
	if int(m) < len(storeCmdNames) && storeCmdNames[m] != "" {
		return storeCmdNames[m]
	}
	return "na"
}

// logStore logs an item_store line: memcached shows the item the command built (the command's value, its
// flags and TTL) whatever became of it, except a stored append or prepend, which shows the joined item.
func (cn *conn) logStore(mode shard.Mode, cmd string, key []byte, res shard.Result, flags uint32, exptime int64, vlen int) {
	ttl, class := cn.srv.store.StoreTTL(exptime), shard.ItemClass(len(key), vlen, flags)
	if res == shard.Stored && (mode == shard.ModeAppend || mode == shard.ModePrepend) {
		lk := cn.srv.store.Peek(key)
		ttl, class, vlen = lk.TTL, lk.Class, lk.Size
	}
	cn.logStoreLine(cmd, key, res, ttl, class, vlen)
}

// logRefusedStore logs the item_store line of a store the parser refused (too large, or no memory for
// it): memcached logs one with no item, ttl 0 and size 0 (an ms as cmd=set). Its clsid and cfd fields are
// the descriptor and 0 there (process_update_command passes one argument too few); leasecached logs
// clsid=0 and the connection's descriptor, as every other line (doc/design/watch.md).
func (cn *conn) logRefusedStore(r protocol.Refusal) {
	mode := shard.ModeSet
	if int(r.Cmd) < len(storeModes) && r.Cmd != protocol.CmdMetaSet {
		mode = storeModes[r.Cmd]
	}
	res := shard.TooLarge
	if r.NoMemory {
		res = shard.NoMemory
	}
	name := storeCmdName(mode)
	if r.Cmd == protocol.CmdLeaseSet {
		name = "lease-set"
	}
	cn.logStoreLine(name, r.Key, res, 0, 0, 0)
}

// logVivified logs what memcached logs when a counter creates a missing key (ma N, a binary counter's
// initial value): its store (do_store_item, NREAD_ADD) looks the key up again, then stores. An mg N links
// its empty item without a store, and logs nothing more.
func (cn *conn) logVivified(key []byte) {
	if cn.srv.watch.On(watch.Fetchers) {
		cn.logLookup(key, shard.Lookup{})
	}
	if cn.srv.watch.On(watch.Mutations) {
		lk := cn.srv.store.Peek(key)
		cn.logStoreLine("add", key, shard.Stored, lk.TTL, lk.Class, lk.Size)
	}
}

// logStoreLine logs one item_store line.
func (cn *conn) logStoreLine(cmd string, key []byte, res shard.Result, ttl uint32, class, vlen int) {
	s := cn.sink()
	b := s.Begin(watch.Mutations)
	if b == nil {
		return
	}
	b = append(b, "type=item_store key="...)
	b = appendURIEncoded(b, key)
	b = append(b, " status="...)
	b = append(b, storeStatus(res)...)
	b = append(b, " cmd="...)
	b = append(b, cmd...)
	b = append(b, " ttl="...)
	b = strconv.AppendUint(b, uint64(ttl), 10)
	b = cn.appendClassFd(b, class)
	b = append(b, " size="...)
	b = strconv.AppendInt(b, int64(vlen), 10)
	s.End(append(b, '\n'))
}

// logDeleted logs a deleted line (memcached 1.6.20's `deletions`) of key, whose item lk was removed or
// invalidated by cmd.
func (cn *conn) logDeleted(cmd string, key []byte, lk shard.Lookup) {
	s := cn.sink()
	b := s.Begin(watch.Deletions)
	if b == nil {
		return
	}
	b = append(b, "type=deleted key="...)
	b = appendURIEncoded(b, key)
	b = append(b, " cmd="...)
	b = append(b, cmd...)
	b = append(b, " clsid="...)
	b = strconv.AppendInt(b, int64(lk.Class), 10)
	b = append(b, " size="...)
	b = strconv.AppendInt(b, int64(lk.Size), 10)
	s.End(append(b, '\n'))
}

// peekDeleted is the item a delete of key is about to remove, when a deletions watcher will be told.
func (cn *conn) peekDeleted(key []byte) shard.Lookup {
	if !cn.srv.watch.On(watch.Deletions) {
		return shard.Lookup{}
	}
	return cn.srv.store.Peek(key)
}

// logFlush logs flush_all on the deletions stream: leasecached's line (memcached logs none), for a near
// cache to drop everything (watch.md).
func (cn *conn) logFlush(delay int64) {
	s := cn.sink()
	b := s.Begin(watch.Deletions)
	if b == nil {
		return
	}
	b = append(b, "type=flush_all delay="...)
	b = strconv.AppendInt(b, delay, 10)
	b = append(b, " cfd="...)
	b = strconv.AppendInt(b, int64(cn.fd), 10)
	s.End(append(b, '\n'))
}

// watchConnEvent logs a conn_new or, with closed, a conn_close line of cn.
func (s *Server) watchConnEvent(cn *conn, closed bool, reason uint8) {
	sk := s.watch.Shared()
	if cn.loop != nil {
		sk = cn.loop.wsink
	}
	b := sk.Begin(watch.ConnEvents)
	if b == nil {
		return
	}
	if closed {
		b = append(b, "type=conn_close"...)
	} else {
		b = append(b, "type=conn_new"...)
	}
	rip, rport, transport := "unix", "0", "local"
	if !strings.HasPrefix(cn.listen, "unix") {
		transport = "tcp"
		if host, port, err := net.SplitHostPort(cn.remote); err == nil {
			rip, rport = host, port
		}
	}
	b = append(b, " rip="...)
	b = append(b, rip...)
	b = append(b, " rport="...)
	b = append(b, rport...)
	b = append(b, " transport="...)
	b = append(b, transport...)
	if closed {
		b = append(b, " reason="...)
		b = append(b, closeReasons[reason]...)
	}
	b = append(b, " cfd="...)
	b = strconv.AppendInt(b, int64(cn.fd), 10)
	sk.End(append(b, '\n'))
}

// closeReason is memcached's reason for a connection closed with err: the client's end of input, quit
// or a close the server decided is normal; a failed read or write is an error.
func (s *Server) closeReason(cn *conn, err error) uint8 {
	switch {
	case cn.closeWhy != 0:
		return cn.closeWhy
	case s.stopping.Load():
		return closeShutdown
	case err == nil, errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		return closeNormal
	}
	return closeError
}

// evictionLog is the store's shard.EvictionLog: eviction lines, in the shared sink (an eviction happens
// in whichever store call needed the memory).
type evictionLog struct{ s *Server }

func (l evictionLog) Watching() bool { return l.s.watch.On(watch.Evictions) }

func (l evictionLog) Evicted(e shard.Eviction) {
	sk := l.s.watch.Shared()
	b := sk.Begin(watch.Evictions)
	if b == nil {
		return
	}
	b = append(b, "type=eviction key="...)
	b = appendURIEncoded(b, e.Key)
	if e.Fetched {
		b = append(b, " fetch=yes ttl="...)
	} else {
		b = append(b, " fetch=no ttl="...)
	}
	b = strconv.AppendInt(b, e.TTL, 10)
	b = append(b, " la="...)
	b = strconv.AppendInt(b, e.LastAccess, 10)
	b = append(b, " clsid="...)
	b = strconv.AppendInt(b, int64(e.Class), 10)
	b = append(b, " size="...)
	b = strconv.AppendInt(b, int64(e.Size), 10)
	sk.End(append(b, '\n'))
}
