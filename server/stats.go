package server

import (
	"math/bits"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/leasecached/leasecached/protocol"
)

// statID names one server-side counter. Connections count into a private array while they work and merge
// it into the shared one once per read event, so a busy event loop does one atomic add per counter per
// batch instead of one per command.
type statID uint8

const (
	statCmdGet statID = iota
	statCmdSet
	statCmdFlush
	statCmdTouch
	statCmdMeta
	statGetHits
	statGetMisses
	statDeleteMisses
	statDeleteHits
	statIncrMisses
	statIncrHits
	statDecrMisses
	statDecrHits
	statCasMisses
	statCasHits
	statCasBadval
	statTouchHits
	statTouchMisses
	statStoreTooLarge
	statStoreNoMemory
	statAuthCmds
	statAuthErrors
	statBytesRead
	statBytesWritten
	numStats
)

// statNames are memcached's names, in memcached's order within the general `stats` block.
var statNames = [numStats]string{
	statCmdGet:        "cmd_get",
	statCmdSet:        "cmd_set",
	statCmdFlush:      "cmd_flush",
	statCmdTouch:      "cmd_touch",
	statCmdMeta:       "cmd_meta",
	statGetHits:       "get_hits",
	statGetMisses:     "get_misses",
	statDeleteMisses:  "delete_misses",
	statDeleteHits:    "delete_hits",
	statIncrMisses:    "incr_misses",
	statIncrHits:      "incr_hits",
	statDecrMisses:    "decr_misses",
	statDecrHits:      "decr_hits",
	statCasMisses:     "cas_misses",
	statCasHits:       "cas_hits",
	statCasBadval:     "cas_badval",
	statTouchHits:     "touch_hits",
	statTouchMisses:   "touch_misses",
	statStoreTooLarge: "store_too_large",
	statStoreNoMemory: "store_no_memory",
	statAuthCmds:      "auth_cmds",
	statAuthErrors:    "auth_errors",
	statBytesRead:     "bytes_read",
	statBytesWritten:  "bytes_written",
}

type counters [numStats]uint64

// statShare is the part of the server's counts that one event loop's connections add to (loopShared).
//
// Why one per loop: every serve call adds its connection's counts (a few atomic adds), and when both
// loops added to one array its cache lines went back and forth between the cores on every read at
// pipeline 1 (perf: the adds were half of conn.done). Only its loop writes a share, so its lines stay in
// that core's cache; the stats command sums the shares. It is padded to whole cache lines (24 counters, 192
// bytes: Go's size class for it lays objects out at multiples of 192 from a page, so each starts a line),
// or its last line would be shared with whatever the allocator put next to it.
type statShare [(numStats + 7) &^ 7]atomic.Uint64

type serverStats struct {
	mu            sync.Mutex
	shares        []*statShare // every loopShared's, made by newShare
	currConns     atomic.Int64
	totalConns    atomic.Uint64
	rejectedConns atomic.Uint64
	idleKicks     atomic.Uint64 // connections closed by --idle-timeout (idle.go)
	hold          holdStats     // --hold (hold.go): rare events, counted where they happen
}

// newShare returns a share that get counts in.
func (st *serverStats) newShare() *statShare {
	sh := new(statShare)
	st.mu.Lock()
	st.shares = append(st.shares, sh)
	st.mu.Unlock()
	return sh
}

// merge adds a connection's private counts to its loop's share and zeroes them.
func merge(local *counters, into *statShare) {
	for i, v := range local {
		if v != 0 {
			into[i].Add(v)
			local[i] = 0
		}
	}
}

func (st *serverStats) reset() {
	st.mu.Lock()
	for _, sh := range st.shares {
		for i := range sh {
			sh[i].Store(0)
		}
	}
	st.mu.Unlock()
	st.totalConns.Store(0)
	st.rejectedConns.Store(0)
	st.idleKicks.Store(0)
}

func (st *serverStats) get(id statID) uint64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	var n uint64
	for _, sh := range st.shares {
		n += sh[id].Load()
	}
	return n
}

// statsCmd serves `stats` and its sub-commands.
func (cn *conn) statsCmd(req *protocol.Request) {
	if len(req.Args) == 0 {
		merge(&cn.local, cn.shared().counts)
		cn.out = cn.srv.appendGeneralStats(cn.out)
		cn.out = append(cn.out, protocol.ReplyEnd...)
		return
	}
	switch string(req.Args[0]) {
	case "settings":
		cn.out = cn.srv.appendSettingsStats(cn.out)
	case "items":
		cn.out = cn.srv.appendItemStats(cn.out)
	case "slabs":
		cn.out = cn.srv.appendSlabStats(cn.out)
	case "sizes":
		cn.out = append(cn.out, "STAT sizes_status disabled\r\n"...)
	case "sizes_enable", "sizes_disable": // memcached ends these without END
		cn.out = appendSizesSwitch(cn.out, string(req.Args[0]) == "sizes_enable")
		return
	case "conns":
		cn.out = cn.srv.appendConnStats(cn.out)
	case "hotkeys":
		cn.out = cn.srv.appendHotKeyStats(cn.out)
	case "extstore":
		// No external storage: an empty listing, as memcached without extstore answers.
	case "detail":
		cn.detailCmd(req)
		return
	case "cachedump":
		if cn.srv.cfg.DisableDump {
			cn.out = append(cn.out, replyCachedumpNotAllowed...)
			return
		}
		cn.cachedump(req)
		return
	case "reset":
		cn.local = counters{}
		cn.srv.stats.reset()
		cn.srv.store.ResetStats()
		cn.srv.detail.reset()
		cn.out = append(cn.out, "RESET\r\n"...)
		return
	default:
		cn.out = append(cn.out, protocol.ReplyError...)
		return
	}
	cn.out = append(cn.out, protocol.ReplyEnd...)
}

// appendSizesSwitch answers `stats sizes_enable` and `sizes_disable`. leasecached keeps no item size
// histogram (`stats sizes` is always disabled): disabling answers as memcached does, enabling with
// memcached's error form.
func appendSizesSwitch(dst []byte, enable bool) []byte {
	if !enable {
		return stat(dst, "sizes_status", "disabled")
	}
	return stat(stat(dst, "sizes_status", "error"), "sizes_error", "not_supported")
}

func stat(dst []byte, name, value string) []byte {
	dst = append(dst, "STAT "...)
	dst = append(dst, name...)
	dst = append(dst, ' ')
	dst = append(dst, value...)
	return append(dst, "\r\n"...)
}

func statUint(dst []byte, name string, v uint64) []byte {
	dst = append(dst, "STAT "...)
	dst = append(dst, name...)
	dst = append(dst, ' ')
	dst = strconv.AppendUint(dst, v, 10)
	return append(dst, "\r\n"...)
}

func statInt(dst []byte, name string, v int64) []byte {
	dst = append(dst, "STAT "...)
	dst = append(dst, name...)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, v, 10)
	return append(dst, "\r\n"...)
}

// rusageSeconds formats a CPU time the way memcached does: seconds with six decimals.
func rusageSeconds(tv syscall.Timeval) string {
	return strconv.FormatInt(int64(tv.Sec), 10) + "." + leftPad(strconv.FormatInt(int64(tv.Usec), 10), 6)
}

func leftPad(s string, n int) string {
	for len(s) < n {
		s = "0" + s
	}
	return s
}

// appendGeneralStats writes the general block with every name memcached 1.6 sends, in memcached's order,
// so existing monitoring (which looks names up, and sometimes scrapes in order or expects a fixed set) keeps
// working. Counters for machinery we do not have (libevent buffers, the LRU maintainer, log watchers,
// segmented-LRU moves) are honestly zero. leasecached's own stats follow memcached's.
func (s *Server) appendGeneralStats(dst []byte) []byte {
	now := time.Now()
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	st := &s.stats
	ss := s.store.Stats()
	conns := st.currConns.Load()

	dst = statInt(dst, "pid", int64(s.pid))
	dst = statInt(dst, "uptime", int64(now.Sub(s.started)/time.Second))
	dst = statInt(dst, "time", now.Unix())
	dst = stat(dst, "version", ProtocolVersion)
	dst = stat(dst, "libevent", eventLibrary)
	dst = statInt(dst, "pointer_size", int64(8*unsafe.Sizeof(uintptr(0))))
	dst = stat(dst, "rusage_user", rusageSeconds(ru.Utime))
	dst = stat(dst, "rusage_system", rusageSeconds(ru.Stime))
	dst = statInt(dst, "max_connections", int64(s.cfg.ConnLimit))
	dst = statInt(dst, "curr_connections", conns)
	dst = statUint(dst, "total_connections", st.totalConns.Load())
	dst = statUint(dst, "rejected_connections", st.rejectedConns.Load())
	dst = statInt(dst, "connection_structures", conns)
	dst = zeroStats(dst, "response_obj_oom", "response_obj_count", "response_obj_bytes")
	dst = statInt(dst, "read_buf_count", conns)
	dst = zeroStats(dst, "read_buf_bytes", "read_buf_bytes_free", "read_buf_oom", "reserved_fds")
	for id := statCmdGet; id <= statCmdMeta; id++ {
		dst = statUint(dst, statNames[id], st.get(id))
	}
	dst = statUint(dst, "get_hits", st.get(statGetHits))
	dst = statUint(dst, "get_misses", st.get(statGetMisses))
	dst = statUint(dst, "get_expired", ss.GetExpired)
	dst = statUint(dst, "get_flushed", ss.GetFlushed)
	for id := statDeleteMisses; id <= statAuthErrors; id++ {
		dst = statUint(dst, statNames[id], st.get(id))
	}
	if s.cfg.IdleTimeout > 0 { // memcached 1.6.18 sends it only with idle_timeout set
		dst = statUint(dst, "idle_kicks", st.idleKicks.Load())
	}
	dst = statUint(dst, "bytes_read", st.get(statBytesRead))
	dst = statUint(dst, "bytes_written", st.get(statBytesWritten))
	dst = statInt(dst, "limit_maxbytes", ss.LimitMaxbytes)
	dst = statUint(dst, "accepting_conns", 1)
	dst = zeroStats(dst, "listen_disabled_num", "time_in_listen_disabled_us")
	dst = statInt(dst, "threads", int64(s.cfg.Threads))
	dst = statUint(dst, "conn_yields", 0)
	dst = statInt(dst, "hash_power_level", int64(bits.Len64(uint64(max(ss.HashBytes/8, 1)))-1))
	dst = statInt(dst, "hash_bytes", ss.HashBytes)
	dst = statUint(dst, "hash_is_expanding", 0)                  // index growth is synchronous under the shard lock
	dst = statUint(dst, "slab_reassign_rescues", ss.SlabRescues) // items kept when their page moved
	dst = zeroStats(dst, "slab_reassign_chunk_rescues", "slab_reassign_evictions_nomem",
		"slab_reassign_inline_reclaim", "slab_reassign_busy_items", "slab_reassign_busy_deletes",
		"slab_reassign_running")
	dst = statUint(dst, "slabs_moved", ss.SlabsMoved)
	dst = statUint(dst, "lru_crawler_running", 0)
	dst = statUint(dst, "lru_crawler_starts", ss.CrawlerStarts)
	dst = zeroStats(dst, "lru_maintainer_juggles", "malloc_fails")
	ws := s.watch.Stats()
	dst = statUint(dst, "log_worker_dropped", ws.WorkerDropped)
	dst = statUint(dst, "log_worker_written", ws.WorkerWritten)
	dst = statUint(dst, "log_watcher_skipped", ws.WatcherSkipped)
	dst = statUint(dst, "log_watcher_sent", ws.WatcherSent)
	dst = statInt(dst, "log_watchers", int64(ws.Watchers))
	if c := s.certs.Load(); c != nil { // memcached sends these with -Z only
		if c.Settings().SessionCache {
			dst = statUint(dst, "ssl_new_sessions", c.NewSessions())
		}
		dst = statUint(dst, "ssl_handshake_errors", c.HandshakeErrors())
		dst = statInt(dst, "time_since_server_cert_refresh", int64(now.Sub(c.LoadedAt())/time.Second))
	}
	dst = zeroStats(dst, "unexpected_napi_ids", "round_robin_fallback")
	dst = statInt(dst, "bytes", ss.Bytes)
	dst = statInt(dst, "curr_items", ss.CurrItems)
	dst = statUint(dst, "total_items", ss.TotalItems)
	dst = statInt(dst, "slab_global_page_pool", int64(ss.PagePool))
	dst = statUint(dst, "expired_unfetched", ss.ExpiredUnfetched)
	dst = statUint(dst, "evicted_unfetched", ss.EvictedUnfetched)
	dst = statUint(dst, "evicted_active", 0) // CLOCK never evicts an item with its reference bit set
	dst = statUint(dst, "evictions", ss.Evictions)
	dst = statUint(dst, "reclaimed", ss.Reclaimed)
	dst = statUint(dst, "crawler_reclaimed", ss.CrawlerReclaimed)
	dst = statUint(dst, "crawler_items_checked", ss.CrawlerChecked)
	dst = zeroStats(dst, "lrutail_reflocked", "moves_to_cold", "moves_to_warm", "moves_within_lru")
	dst = statUint(dst, "direct_reclaims", ss.DirectReclaims)
	dst = statUint(dst, "lru_bumps_dropped", 0)
	dst = stat(dst, "leasecached_version", Version)
	dst = statUint(dst, "lease_grants", ss.Leases.Grants)
	dst = statUint(dst, "lease_hot_misses", ss.Leases.HotMisses)
	dst = statUint(dst, "lease_stale_served", ss.Leases.StaleServed)
	dst = statUint(dst, "lease_sets_stored", ss.Leases.SetsStored)
	dst = statUint(dst, "lease_sets_rejected", ss.Leases.SetsRejected)
	dst = statUint(dst, "lease_invalidations", ss.Leases.Invalidations)
	dst = statInt(dst, "lease_outstanding", int64(ss.LeasesHeld))
	dst = statInt(dst, "lease_stale_items", ss.StaleItems)
	if s.cfg.Grace > 0 { // with neither mode, every reply is as before they existed
		dst = statUint(dst, "get_grace_hits", ss.Leases.GraceHits)
		dst = statUint(dst, "grace_refills", ss.Leases.GraceRefills)
		dst = statUint(dst, "grace_lease_lapses", ss.Leases.GraceLapses)
	}
	if s.cfg.Hold > 0 {
		dst = statUint(dst, "hold_parked", st.hold.parked.Load())
		dst = statUint(dst, "hold_filled", st.hold.filled.Load())
		dst = statUint(dst, "hold_timeouts", st.hold.timeouts.Load())
		dst = statUint(dst, "hold_cancelled", st.hold.cancelled.Load())
		dst = statUint(dst, "hold_refused", st.hold.refused.Load())
		dst = statInt(dst, "hold_waiting", s.store.Parked())
	}
	dst = statInt(dst, "huge_page_bytes", ss.HugePageBytes)
	if rs := s.store.RestartStats(); rs.Enabled { // with --data-dir only: memcached has no such lines
		loading := uint64(0)
		if rs.Loading {
			loading = 1
		}
		dst = statUint(dst, "restart_loading", loading)
		dst = statInt(dst, "restart_items_loaded", rs.Loaded)
		dst = statInt(dst, "restart_items_dropped", rs.Dropped)
		dst = statInt(dst, "restart_items_rolled_back", rs.RolledBack)
		dst = stat(dst, "restart_seconds", strconv.FormatFloat(rs.Seconds, 'f', 6, 64))
		dst = statUint(dst, "data_syncs", rs.Syncs)
		dst = statUint(dst, "data_sync_failures", rs.SyncFailures)
		dst = statInt(dst, "data_last_sync", rs.SyncedAt)
		dst = statInt(dst, "data_parked_pages", int64(rs.ParkedPages))
		dst = statInt(dst, "data_kept_versions", rs.KeptVersions)
		dst = statInt(dst, "data_kept_dropped", rs.KeptDropped)
	}
	return dst
}

// eventLibrary stands where memcached names its libevent version.
const eventLibrary = "gnet-v2.10.0"

// zeroStats writes names with the value 0.
func zeroStats(dst []byte, names ...string) []byte {
	for _, n := range names {
		dst = statUint(dst, n, 0)
	}
	return dst
}

// appendItemStats is `stats items`: per class with items, memcached's "items:<class>:<name>" lines.
func (s *Server) appendItemStats(dst []byte) []byte {
	for _, c := range s.store.Stats().Classes {
		if c.Number == 0 {
			continue
		}
		p := "items:" + strconv.Itoa(c.ID) + ":"
		dst = statInt(dst, p+"number", c.Number)
		dst = statInt(dst, p+"age", c.Age)
		dst = statInt(dst, p+"mem_requested", c.MemRequested)
		dst = statUint(dst, p+"evicted", c.Evicted)
		dst = statUint(dst, p+"evicted_nonzero", c.EvictedNonzero)
		dst = statInt(dst, p+"evicted_time", c.EvictedTime)
		dst = statUint(dst, p+"outofmemory", c.OutOfMemory)
		dst = statUint(dst, p+"reclaimed", c.Reclaimed)
		dst = statUint(dst, p+"expired_unfetched", c.ExpiredUnfetched)
		dst = statUint(dst, p+"evicted_unfetched", c.EvictedUnfetched)
		dst = statUint(dst, p+"crawler_reclaimed", c.CrawlerReclaimed)
	}
	return dst
}

// slabCommandStats are the per-class command counters memcached's `stats slabs` sends. leasecached does not
// break commands down by class, so they are 0 (the general block has the totals); they are sent because
// memcached_exporter marks a scrape down (memcached_up 0) when a class lacks cmd_set or the cas pair.
var slabCommandStats = []string{"get_hits", "cmd_set", "delete_hits", "incr_hits", "decr_hits", "cas_hits",
	"cas_badval", "touch_hits"}

// appendSlabStats is `stats slabs`: per class that owns pages, memcached 1.6.18's "<class>:<name>" lines,
// then the totals. mem_requested is in `stats items` only, as in 1.6.18: memcached_exporter maps both to one
// series, and the same series twice fails its scrape.
func (s *Server) appendSlabStats(dst []byte) []byte {
	ss := s.store.Stats()
	active := 0
	for _, c := range ss.Classes {
		if c.TotalPages == 0 {
			continue
		}
		active++
		p := strconv.Itoa(c.ID) + ":"
		dst = statInt(dst, p+"chunk_size", int64(c.ChunkSize))
		dst = statInt(dst, p+"chunks_per_page", int64(c.ChunksPerPage))
		dst = statInt(dst, p+"total_pages", int64(c.TotalPages))
		dst = statInt(dst, p+"total_chunks", int64(c.TotalChunks))
		dst = statInt(dst, p+"used_chunks", int64(c.UsedChunks))
		dst = statInt(dst, p+"free_chunks", int64(c.FreeChunks))
		dst = statInt(dst, p+"free_chunks_end", int64(c.FreeChunksEnd))
		for _, name := range slabCommandStats {
			dst = statUint(dst, p+name, 0)
		}
	}
	dst = statInt(dst, "active_slabs", int64(active))
	dst = statInt(dst, "total_malloced", ss.TotalMalloced)
	return dst
}

var replyDetailUsage = []byte("CLIENT_ERROR usage: stats detail on|off|dump\r\n")

// detailCmd is `stats detail on|off|dump`.
func (cn *conn) detailCmd(req *protocol.Request) {
	arg := ""
	if len(req.Args) == 2 {
		arg = string(req.Args[1])
	}
	switch arg {
	case "on":
		cn.srv.detail.on.Store(true)
		cn.out = append(cn.out, protocol.ReplyOK...)
	case "off":
		cn.srv.detail.on.Store(false)
		cn.out = append(cn.out, protocol.ReplyOK...)
	case "dump":
		cn.out = cn.srv.detail.appendDump(cn.out)
		cn.out = append(cn.out, protocol.ReplyEnd...)
	default:
		cn.out = append(cn.out, replyDetailUsage...)
	}
}

// appendConnStats is `stats conns`: the listener, then one block per open connection, in memcached's
// "<fd>:<name>" form.
func (s *Server) appendConnStats(dst []byte) []byte {
	now := time.Now().Unix()
	dst = stat(dst, "0:addr", s.Listeners()[0].statsName())
	dst = stat(dst, "0:state", "conn_listening")
	dst = statInt(dst, "0:secs_since_last_cmd", 0)
	s.conns.Range(func(k, _ any) bool {
		cn := k.(*conn)
		p := strconv.Itoa(cn.fd) + ":"
		network, _, _ := strings.Cut(cn.listen, ":")
		dst = stat(dst, p+"addr", network+":"+cn.remote)
		dst = stat(dst, p+"listen_addr", cn.listen)
		dst = stat(dst, p+"state", "conn_parse_cmd")
		dst = statInt(dst, p+"secs_since_last_cmd", now-cn.lastCmd.Load())
		return true
	})
	return dst
}
