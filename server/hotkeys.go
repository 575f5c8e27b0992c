package server

import (
	"math/bits"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasecached/leasecached/hotkeys"
	"github.com/leasecached/leasecached/internal/hotlist"
	"github.com/leasecached/leasecached/protocol"
	bp "github.com/leasecached/leasecached/protocol/binprot"
	"github.com/leasecached/leasecached/shard"
)

// Hot-key detection (doc/design/hotkeys.md): each event loop samples keyed requests into a tracker of its
// own (Space-Saving summaries over one-second windows, package hotkeys), about hotSamplesPerSecond a
// second whatever its traffic, and `stats hotkeys` and HotKeys merge the trackers when asked. A request
// costs one subtraction and one branch (hotkeys.Sampler.Due) in execute or execBinary; only a sampled one
// takes its loop's tracker lock, which only a reader ever contends.
const (
	// hotSampleRate is where a loop's sampling starts (one keyed request in 16), before its sampler has
	// seen a second of traffic.
	hotSampleRate = 16
	// hotSamplesPerSecond is what each loop's sampler aims at: it bounds the summaries' cost to about
	// 4096 samples a second a loop (well under 1 ms of CPU) at any traffic, and gives a key with 1% of
	// the traffic about 80 samples over a two-second span (an estimate within about 11%).
	hotSamplesPerSecond = 4096
	// hotWindow is how often the trackers rotate; rates cover the last window and the current one, so a
	// key that cools is gone within 2 * hotWindow.
	hotWindow = time.Second
	// hotCapacityMin is the fewest entries of a summary: at 128, a key with more than 1/128 (0.8%) of a
	// window's samples is always monitored, below the 1% the detection targets.
	hotCapacityMin = 128
	// DefaultHotKeys is how many keys `stats hotkeys` lists unless --hot-keys says otherwise; MaxHotKeys
	// bounds --hot-keys.
	DefaultHotKeys = 20
	MaxHotKeys     = 100
)

// HotKey is one hot key's estimated traffic (Server.HotKeys).
type HotKey = hotkeys.HotKey

// hotState is the server's hot-key detection: the trackers of every loop.
type hotState struct {
	top      int // keys listed; 0: off
	capacity int // entries of each summary
	seeds    atomic.Uint64
	mu       sync.Mutex
	trackers []*hotkeys.Tracker
	shared   *hotkeys.Tracker // the stream transport's and other loopShared states that are not an event loop's
}

// init sets detection up for top keys listed (0: off).
func (h *hotState) init(top int) {
	h.top = min(max(top, 0), MaxHotKeys)
	h.capacity = hotCapacityMin
	if 6*h.top > hotCapacityMin { // a longer list: six entries a key, as 128 is for 20 (doc/design/hotkeys.md)
		h.capacity = 1 << bits.Len(uint(6*h.top-1))
	}
}

// newLoop returns the sampler and tracker of a new loopShared: an event loop's own tracker, or the shared
// one (made on first use) for a loopShared borrowed by many connections in turn, so their number does
// not multiply the memory. Off, the sampler never samples.
func (h *hotState) newLoop(own bool) (hotkeys.Sampler, *hotkeys.Tracker) {
	rate := hotSampleRate
	if h.top == 0 {
		rate = 0
	}
	smp := hotkeys.NewAdaptiveSampler(rate, hotSamplesPerSecond, h.seeds.Add(1)*0x9E3779B97F4A7C15^uint64(time.Now().UnixNano()))
	h.mu.Lock()
	defer h.mu.Unlock()
	if !own && h.shared != nil {
		return smp, h.shared
	}
	t := hotkeys.NewTracker(h.capacity, hotWindow)
	h.trackers = append(h.trackers, t)
	if !own {
		h.shared = t
	}
	return smp, t
}

// hotKind is how a keyed command counts: a read or a write; hotNone is not counted.
type hotKind uint8

const (
	hotNone hotKind = iota
	hotRead
	hotWrite
)

// hotTextKinds: fetches (gat and gats too: they return the value) and lease-get are reads; stores,
// deletes, counters, touch and lease-set are writes; me (debug) is not counted.
var hotTextKinds = [...]hotKind{
	protocol.CmdGet: hotRead, protocol.CmdGets: hotRead, protocol.CmdGat: hotRead, protocol.CmdGats: hotRead,
	protocol.CmdLeaseGet: hotRead, protocol.CmdMetaGet: hotRead,
	protocol.CmdSet: hotWrite, protocol.CmdAdd: hotWrite, protocol.CmdReplace: hotWrite,
	protocol.CmdAppend: hotWrite, protocol.CmdPrepend: hotWrite, protocol.CmdCas: hotWrite,
	protocol.CmdIncr: hotWrite, protocol.CmdDecr: hotWrite, protocol.CmdTouch: hotWrite,
	protocol.CmdDelete: hotWrite, protocol.CmdLeaseSet: hotWrite, protocol.CmdMetaSet: hotWrite,
	protocol.CmdMetaDelete: hotWrite, protocol.CmdMetaArithmetic: hotWrite,
}

// hotBinKinds: the binary protocol's the same way (gat is a read, touch a write).
var hotBinKinds = [...]hotKind{
	bp.OpGet: hotRead, bp.OpGetK: hotRead, bp.OpGat: hotRead, bp.OpGatK: hotRead,
	bp.OpTouch: hotWrite, bp.OpSet: hotWrite, bp.OpAdd: hotWrite, bp.OpReplace: hotWrite,
	bp.OpAppend: hotWrite, bp.OpPrepend: hotWrite, bp.OpDelete: hotWrite,
	bp.OpIncrement: hotWrite, bp.OpDecrement: hotWrite,
}

// sampleText offers the sampled keys of the text or meta request req (execute found some due). execute
// counts a request's keys once, when it first executes it: a fetch executed again after a yield or a
// parked read is not counted again (conn.again).
func (cn *conn) sampleText(req *protocol.Request) {
	ls := cn.loop
	keys := req.Keys
	kind := hotNone
	if int(req.Cmd) < len(hotTextKinds) {
		kind = hotTextKinds[req.Cmd]
	}
	for i := ls.hot.Next(len(keys)); i >= 0; i = ls.hot.Next(len(keys)) {
		switch {
		case kind == hotNone:
		case req.Cmd >= protocol.CmdMetaGet && req.Cmd <= protocol.CmdMetaArithmetic:
			if req.MetaErr == nil { // the key as stored, base64-decoded: not the token the prefetch hashed
				now := cn.srv.store.NowNano()
				ls.hotKeys.Offer(now, req.Meta.Key, shard.Hash(req.Meta.Key), kind == hotWrite, ls.hot.Taken(now))
			}
		default:
			key, now := keys[i], cn.srv.store.NowNano()
			ls.hotKeys.Offer(now, key, cn.hashOf(i, key).Sum, kind == hotWrite, ls.hot.Taken(now))
		}
	}
}

// sampleBinary offers the key of the binary request being executed if it is sampled (execBinary found it
// due).
func (cn *conn) sampleBinary() {
	ls, r := cn.loop, &cn.bin.req
	if ls.hot.Next(1) < 0 {
		return
	}
	op := r.Opcode.Base()
	if int(op) >= len(hotBinKinds) || hotBinKinds[op] == hotNone {
		return
	}
	now := cn.srv.store.NowNano()
	ls.hotKeys.Offer(now, r.Key, cn.hashOf(0, r.Key).Sum, hotBinKinds[op] == hotWrite, ls.hot.Taken(now))
}

// HotKeys returns the n keys with the highest estimated request rates over the last window and the
// current one, highest first (fewer when fewer were requested; none when detection is off).
func (s *Server) HotKeys(n int) []HotKey {
	keys, _ := s.hotKeys(n)
	return keys
}

// hotKeys is HotKeys, and the mean sampling rate over the span: hotSampleRate before anything was
// sampled, 0 when detection is off.
func (s *Server) hotKeys(n int) ([]HotKey, int) {
	h := &s.hot
	if h.top == 0 {
		return nil, 0
	}
	h.mu.Lock()
	ts := append([]*hotkeys.Tracker(nil), h.trackers...)
	h.mu.Unlock()
	keys, rate := hotkeys.Top(ts, s.store.NowNano(), n)
	if rate == 0 {
		rate = hotSampleRate
	}
	return keys, rate
}

// hotSpanSeconds is the longest span rates are measured over: the last window and the current one.
const hotSpanSeconds = 2 * int64(hotWindow/time.Second)

// appendHotKeyStats is `stats hotkeys`, the format doc/design/hotkeys.md defines (shared with the metrics
// and `leasecached top`): the sampling rate (0: off) and the span, then per key, hottest first, its
// URL-encoded key, rate, share of keyed requests in percent, reads and writes a second.
func (s *Server) appendHotKeyStats(dst []byte) []byte {
	keys, rate := s.hotKeys(s.hot.top)
	dst = statInt(dst, hotlist.SampleRate, int64(rate))
	dst = statInt(dst, hotlist.WindowSeconds, hotSpanSeconds)
	for i, k := range keys {
		p := hotlist.Prefix(i + 1)
		dst = append(dst, "STAT "+p+"key "...)
		dst = appendURIEncoded(dst, []byte(k.Key))
		dst = append(dst, "\r\n"...)
		dst = statInt(dst, p+"rate", int64(k.Rate+0.5))
		dst = stat(dst, p+"share", strconv.FormatFloat(k.Share, 'f', 2, 64))
		dst = statInt(dst, p+"reads", int64(k.Reads+0.5))
		dst = statInt(dst, p+"writes", int64(k.Writes+0.5))
	}
	return dst
}
