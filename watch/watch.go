// Package watch is memcached's log watchers (`watch fetchers mutations ...`): producers format log lines
// into bounded per-producer buffers (Sink), and one collector goroutine moves them into the bounded buffer
// of every watcher that asked for their kind, counting what it drops and skips as memcached's logger
// thread does. How a watcher's lines reach its socket is the caller's (a Waker). See doc/design/watch.md.
package watch

import (
	"encoding/binary"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Flags are the kinds of lines a watcher asked for (memcached's LOG_* event flags).
type Flags uint32

// Kinds of lines. The first five are emitted; the others are memcached's and accepted by `watch` so that
// tools asking for them work, but leasecached has nothing of theirs to emit (watch.md).
const (
	Fetchers Flags = 1 << iota
	Mutations
	Evictions
	ConnEvents
	Deletions
	SysEvents
	RawCmds
	ProxyReqs
	ProxyEvents
	ProxyUser
)

// flagNames are the `watch` arguments, memcached's names.
var flagNames = map[string]Flags{
	"fetchers":    Fetchers,
	"mutations":   Mutations,
	"evictions":   Evictions,
	"connevents":  ConnEvents,
	"deletions":   Deletions,
	"sysevents":   SysEvents,
	"rawcmds":     RawCmds,
	"proxyreqs":   ProxyReqs,
	"proxyevents": ProxyEvents,
	"proxyuser":   ProxyUser,
}

// ParseFlags reads `watch`'s arguments: none means fetchers, as in memcached; ok is false on an argument
// memcached would refuse.
func ParseFlags(args [][]byte) (f Flags, ok bool) {
	if len(args) == 0 {
		return Fetchers, true
	}
	for _, a := range args {
		g, known := flagNames[string(a)]
		if !known {
			return 0, false
		}
		f |= g
	}
	return f, true
}

// Buffer bounds, memcached's defaults (LOGGER_BUF_SIZE, LOGGER_WATCHER_BUF_SIZE, LOGGER_ENTRY_MAX_SIZE):
// `stats settings` reports the first two as worker_logbuf_size and watcher_logbuf_size.
const (
	WorkerBufSize  = 64 << 10
	WatcherBufSize = 256 << 10
	MaxWatchers    = 20
	// MaxLine bounds one formatted line; a sink keeps this much room for the line being formatted.
	MaxLine = 2048
	// skipRoom is what a watcher keeps free beyond a line for a "skipped=N" line (memcached's + 128).
	skipRoom = 128
	// recordHeader precedes each line in a sink: its kind (1 byte), gid (8), length (2).
	recordHeader = 11
)

// The collector's sleep between rounds: halved after a round that moved lines, grown by an eighth after
// an empty one, as memcached's logger thread; the ceiling is lower than memcached's 1 s because a near
// cache invalidates from these lines (watch.md).
const (
	minSleep = time.Millisecond
	maxSleep = 50 * time.Millisecond
	// stallRetry is how often a watcher whose connection holds more than its bound is asked to flush.
	stallRetry = 10 * time.Millisecond
)

// ErrTooMany is memcached's WATCHER_TOO_MANY: MaxWatchers are watching.
var ErrTooMany = errors.New("watch: too many watchers")

// Hub is the server's watchers and the producers' sinks.
type Hub struct {
	mask atomic.Uint32 // union of the watchers' flags: what producers log
	gid  atomic.Uint64 // the last line's global id

	mu       sync.Mutex
	sinks    []*Sink
	watchers []*Watcher
	running  bool // the collector goroutine runs
	shared   *Sink

	workerWritten, workerDropped atomic.Uint64
	watcherSent, watcherSkipped  atomic.Uint64

	// idle is set by the collector while it sleeps longer than minSleep; the first line logged then
	// wakes it through kick (End), so a line after a quiet spell waits about a millisecond, not the
	// collector's longest sleep: a near cache's invalidation latency (watch.md).
	idle  atomic.Bool
	kick  chan struct{}
	kicks atomic.Uint64 // how many lines woke the collector (tests)
}

// NewHub returns a hub with no watchers.
func NewHub() *Hub {
	h := &Hub{kick: make(chan struct{}, 1)}
	h.shared = h.NewSink()
	return h
}

// On reports whether some watcher wants lines of kind f: the one check a producer makes per event.
func (h *Hub) On(f Flags) bool { return Flags(h.mask.Load())&f != 0 }

// NewSink returns a sink for one producer that formats lines without a lock of its own (an event loop).
func (h *Hub) NewSink() *Sink {
	s := &Sink{hub: h}
	h.mu.Lock()
	h.sinks = append(h.sinks, s)
	h.mu.Unlock()
	return s
}

// Shared is the sink for every other producer (goroutines, the store's evictions): its lock is shared.
func (h *Hub) Shared() *Sink { return h.shared }

// Stats are memcached's log_* counters.
type Stats struct {
	WorkerWritten, WorkerDropped uint64
	WatcherSent, WatcherSkipped  uint64
	Watchers                     int
}

// Stats returns the counters so far.
func (h *Hub) Stats() Stats {
	h.mu.Lock()
	n := len(h.watchers)
	h.mu.Unlock()
	return Stats{
		WorkerWritten: h.workerWritten.Load(), WorkerDropped: h.workerDropped.Load(),
		WatcherSent: h.watcherSent.Load(), WatcherSkipped: h.watcherSkipped.Load(), Watchers: n,
	}
}

// Waker has a watcher's connection take its lines (Watcher.Take) soon, on the goroutine that writes it.
type Waker func()

// Add makes a watcher of flags, which sees lines logged from now on; wake is called when it has lines.
func (h *Hub) Add(flags Flags, wake Waker) (*Watcher, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.watchers) >= MaxWatchers {
		return nil, ErrTooMany
	}
	w := &Watcher{hub: h, flags: flags, wake: wake, minGid: h.gid.Add(1), // memcached takes a gid for the watcher: its first line is the next
		pend: make([]byte, 0, WatcherBufSize), out: make([]byte, 0, WatcherBufSize)}
	h.watchers = append(h.watchers, w)
	h.setMask()
	if !h.running {
		h.running = true
		go h.collect()
	}
	return w, nil
}

// Remove ends w (its connection closed). The collector stops once no watcher is left.
func (h *Hub) Remove(w *Watcher) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, x := range h.watchers {
		if x == w {
			h.watchers = append(h.watchers[:i], h.watchers[i+1:]...)
			break
		}
	}
	w.gone.Store(true)
	h.setMask()
}

// setMask recomputes what producers log; h.mu is held.
func (h *Hub) setMask() {
	var f Flags
	for _, w := range h.watchers {
		f |= w.flags
	}
	h.mask.Store(uint32(f))
}

// Sink is one producer's bounded buffer of formatted lines, which the collector empties.
type Sink struct {
	hub        *Hub
	mu         sync.Mutex
	buf, spare []byte
	written    uint64
	dropped    uint64
}

// Begin starts a line of kind f: it locks the sink and returns its buffer with the record's header and
// memcached's "ts=<sec>.<usec> gid=<n> " prefix appended. The caller appends the rest of the line (at most
// MaxLine bytes in all, ending in '\n') and passes the result to End. When the sink has no room, Begin
// counts the line dropped (memcached's log_worker_dropped) and returns nil, unlocked.
func (s *Sink) Begin(f Flags) []byte {
	s.mu.Lock()
	if s.buf == nil {
		s.buf = make([]byte, 0, WorkerBufSize) // once per sink, when it first logs
	}
	if cap(s.buf)-len(s.buf) < recordHeader+MaxLine {
		s.dropped++
		s.mu.Unlock()
		return nil
	}
	gid := s.hub.gid.Add(1)
	now := time.Now()
	b := append(s.buf, byte(f))
	b = binary.LittleEndian.AppendUint64(b, gid)
	b = append(b, 0, 0)
	// memcached prints the microseconds unpadded (%d).
	b = append(b, "ts="...)
	b = strconv.AppendInt(b, now.Unix(), 10)
	b = append(b, '.')
	b = strconv.AppendInt(b, int64(now.Nanosecond()/1000), 10)
	b = append(b, " gid="...)
	b = strconv.AppendUint(b, gid, 10)
	return append(b, ' ')
}

// End completes the line Begin started; b is what the caller appended to.
func (s *Sink) End(b []byte) {
	start := len(s.buf)
	n := len(b) - start - recordHeader
	binary.LittleEndian.PutUint16(b[start+9:], uint16(n))
	s.buf = b
	s.written++
	s.mu.Unlock()
	if h := s.hub; h.idle.Load() && h.idle.CompareAndSwap(true, false) {
		h.kicks.Add(1)
		select {
		case h.kick <- struct{}{}:
		default:
		}
	}
}

// Watcher is one watching connection: the lines waiting for it, bounded by WatcherBufSize.
type Watcher struct {
	hub    *Hub
	flags  Flags
	minGid uint64
	wake   Waker

	mu   sync.Mutex
	pend []byte // lines for the connection, appended by the collector

	skipped  uint64    // collector only: lines skipped since the last one that fit
	lastWake time.Time // collector only
	waking   atomic.Bool
	stalled  atomic.Bool // the connection held more than its bound at its last Take
	gone     atomic.Bool

	out []byte // the connection's side of pend (Take)
}

// Take returns the lines waiting for the watcher's connection, to be written before the next Take; the
// connection calls it when woken. stalled says the connection could take nothing now (its unsent bytes
// are over its bound): the lines keep waiting, and the collector wakes it again later.
func (w *Watcher) Take(stalled bool) []byte {
	w.waking.Store(false)
	w.stalled.Store(stalled)
	if stalled {
		return nil
	}
	w.mu.Lock()
	w.pend, w.out = w.out[:0], w.pend
	w.mu.Unlock()
	return w.out
}

// offer appends one line for the watcher, or counts it skipped when the watcher's buffer is full; a
// "skipped=N" line goes before the first line that fits again (memcached's format).
func (w *Watcher) offer(line []byte) {
	h := w.hub
	w.mu.Lock()
	if len(w.pend)+len(line)+skipRoom > WatcherBufSize {
		w.mu.Unlock()
		w.skipped++
		h.watcherSkipped.Add(1)
		return
	}
	if w.skipped > 0 {
		w.pend = append(w.pend, "skipped="...)
		w.pend = strconv.AppendUint(w.pend, w.skipped, 10)
		w.pend = append(w.pend, '\n')
		w.skipped = 0
	}
	w.pend = append(w.pend, line...)
	w.mu.Unlock()
	h.watcherSent.Add(1)
}

// pending reports whether lines wait for the watcher.
func (w *Watcher) pending() bool {
	w.mu.Lock()
	n := len(w.pend)
	w.mu.Unlock()
	return n > 0
}

// collect is the collector goroutine: it runs while there are watchers.
func (h *Hub) collect() {
	var sinks []*Sink
	var ws []*Watcher
	sleep := minSleep
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		h.mu.Lock()
		if len(h.watchers) == 0 {
			h.running = false
			h.mu.Unlock()
			return
		}
		sinks = append(sinks[:0], h.sinks...)
		ws = append(ws[:0], h.watchers...)
		h.mu.Unlock()

		moved := false
		for _, s := range sinks {
			if h.drain(s, ws) {
				moved = true
			}
		}
		now := time.Now()
		for _, w := range ws {
			if w.gone.Load() || w.waking.Load() || !w.pending() {
				continue
			}
			if w.stalled.Load() && now.Sub(w.lastWake) < stallRetry {
				continue
			}
			w.lastWake = now
			w.waking.Store(true)
			w.wake()
		}
		if moved {
			sleep = max(sleep/2, minSleep)
		} else {
			sleep = min(sleep+sleep/8, maxSleep)
		}
		if sleep <= minSleep {
			time.Sleep(sleep)
			continue
		}
		h.idle.Store(true)
		timer.Reset(sleep)
		select {
		case <-h.kick: // a line was logged: collect it now, and keep collecting at the short pace
			timer.Stop()
			sleep = minSleep
		case <-timer.C:
		}
		h.idle.Store(false)
	}
}

// drain moves s's lines to the watchers in ws that want them, and reports whether there were any.
func (h *Hub) drain(s *Sink, ws []*Watcher) bool {
	s.mu.Lock()
	orig := s.buf
	recs := orig
	if len(recs) == 0 {
		s.mu.Unlock()
		return false
	}
	if s.spare == nil {
		s.spare = make([]byte, 0, WorkerBufSize)
	}
	s.buf, s.spare = s.spare, nil
	written, dropped := s.written, s.dropped
	s.written, s.dropped = 0, 0
	s.mu.Unlock()
	h.workerWritten.Add(written)
	h.workerDropped.Add(dropped)

	for len(recs) >= recordHeader {
		f := Flags(recs[0])
		gid := binary.LittleEndian.Uint64(recs[1:])
		n := int(binary.LittleEndian.Uint16(recs[9:]))
		line := recs[recordHeader : recordHeader+n]
		recs = recs[recordHeader+n:]
		for _, w := range ws {
			if w.flags&f != 0 && gid >= w.minGid && !w.gone.Load() {
				w.offer(line)
			}
		}
	}
	s.mu.Lock()
	s.spare = orig[:0]
	s.mu.Unlock()
	return true
}
