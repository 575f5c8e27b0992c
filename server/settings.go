package server

import (
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/leasecached/leasecached/slab"
	"github.com/leasecached/leasecached/tlsconf"
	"github.com/leasecached/leasecached/watch"
)

// `stats settings`: every name memcached 1.6.18 sends, in its order, so tools that list or scrape them
// find each one. Values are leasecached's own: its slab classes (growth factor, smallest chunk,
// slab_chunk_max), its hash (xxhash), its CLOCK eviction (lru_segmented no, no LRU maintainer thread).
// Settings of machinery leasecached does not have (UDP, SASL, extstore, the slab automover, log
// watchers, memory files) show what memcached shows with that machinery off or absent, which for most
// tunables is their default. leasecached's own settings follow memcached's. The listener, -Y and ssl_*
// lines show the command line's settings (server.Config; cmd/leasecached reads them).
func (s *Server) appendSettingsStats(dst []byte) []byte {
	dst = statInt(dst, "maxbytes", s.store.MemoryLimit())
	dst = statInt(dst, "maxconns", int64(s.cfg.ConnLimit))
	dst = statInt(dst, "tcpport", int64(s.cfg.Port))
	dst = statInt(dst, "udpport", 0)
	dst = stat(dst, "inter", orNULL(s.cfg.Listen))
	dst = statInt(dst, "verbosity", int64(s.verbosity.Load()))
	dst = statInt(dst, "oldest", s.store.OldestLive())
	dst = stat(dst, "evictions", "on")
	dst = stat(dst, "domain_socket", orNULL(s.unixSocketPath()))
	dst = stat(dst, "umask", strconv.FormatUint(uint64(s.unixMask()), 8)) // memcached's %o
	dst = stat(dst, "shutdown_command", yesNo(s.cfg.Shutdown != nil))
	dst = stat(dst, "growth_factor", strconv.FormatFloat(slab.GrowthFactor, 'f', 2, 64))
	dst = statInt(dst, "chunk_size", slab.MinChunk)
	dst = statInt(dst, "num_threads", int64(s.cfg.Threads))
	dst = statInt(dst, "num_threads_per_udp", int64(s.cfg.Threads)) // memcached's value without UDP
	dst = stat(dst, "stat_key_prefix", ":")
	dst = stat(dst, "detail_enabled", yesNo(s.detail.on.Load()))
	dst = statInt(dst, "reqs_per_event", reqsPerEvent)
	dst = stat(dst, "cas_enabled", "yes")
	dst = statInt(dst, "tcp_backlog", int64(listenBacklog()))
	dst = stat(dst, "binding_protocol", s.cfg.Protocol.String())
	dst = stat(dst, "auth_enabled_sasl", yesNo(s.cfg.SASLFile != ""))
	dst = stat(dst, "auth_enabled_ascii", yesNoPath(s.cfg.AuthFile)) // memcached: the file, or no
	dst = statInt(dst, "item_size_max", int64(s.cfg.MaxItemSize))
	dst = stat(dst, "maxconns_fast", "yes")
	dst = statInt(dst, "hashpower_init", 0) // not configurable: memcached's "unset"
	dst = stat(dst, "slab_reassign", "yes") // pages move between classes (shard/evict.go movePage)
	// Pages move only inline, when a class has no chunk to evict; there is no background automover.
	dst = statInt(dst, "slab_automove", 0)
	dst = stat(dst, "slab_automove_ratio", "0.80")
	dst = statInt(dst, "slab_automove_window", 30)
	dst = statInt(dst, "slab_chunk_max", slab.ChunkMax)
	dst = stat(dst, "lru_crawler", "yes") // the background reclaimer (shard/reclaim.go)
	dst = statInt(dst, "lru_crawler_sleep", 100)
	dst = statInt(dst, "lru_crawler_tocrawl", 0)
	dst = statInt(dst, "tail_repair_time", 0)
	dst = stat(dst, "flush_enabled", yesNo(!s.cfg.DisableFlush))
	dst = stat(dst, "dump_enabled", yesNo(!s.cfg.DisableDump))
	dst = stat(dst, "hash_algorithm", "xxhash")
	dst = stat(dst, "lru_maintainer_thread", "no")
	dst = stat(dst, "lru_segmented", "no")
	// The segment shares are memcached's defaults; cachedump's listing models them (shard/dump.go).
	dst = statInt(dst, "hot_lru_pct", 20)
	dst = statInt(dst, "warm_lru_pct", 40)
	dst = stat(dst, "hot_max_factor", "0.20")
	dst = stat(dst, "warm_max_factor", "2.00")
	dst = stat(dst, "temp_lru", "no")
	dst = statInt(dst, "temporary_ttl", 61)
	dst = statInt(dst, "idle_timeout", int64(s.cfg.IdleTimeout/time.Second))
	dst = statInt(dst, "watcher_logbuf_size", watch.WatcherBufSize)
	dst = statInt(dst, "worker_logbuf_size", watch.WorkerBufSize)
	dst = statInt(dst, "read_buf_mem_limit", 0)
	dst = stat(dst, "track_sizes", "no")
	dst = stat(dst, "inline_ascii_response", "no")
	// extstore is absent; memcached shows its defaults all the same.
	dst = statInt(dst, "ext_item_size", 512)
	dst = statUint(dst, "ext_item_age", 4294967295)
	dst = statInt(dst, "ext_low_ttl", 0)
	dst = statInt(dst, "ext_recache_rate", 2000)
	dst = statInt(dst, "ext_wbuf_size", 4194304)
	dst = statInt(dst, "ext_compact_under", 0)
	dst = statInt(dst, "ext_drop_under", 0)
	dst = statInt(dst, "ext_max_sleep", 1000000)
	dst = stat(dst, "ext_max_frag", "0.80")
	dst = stat(dst, "slab_automove_freeratio", "0.010")
	dst = stat(dst, "ext_drop_unread", "no")
	// memcached 1.6.18's TLS lines, in its format and order (process_stat_settings). Where they differ
	// from memcached's, the command line differs: without ssl_key the key is read from the
	// ssl_chain_cert file, so ssl_key shows that file (memcached shows (null) and does not start);
	// ssl_kernel_tls and ssl_keyformat other than PEM are refused, so they are always no and 1.
	tlsSet := s.cfg.TLS
	dst = stat(dst, "ssl_enabled", yesNo(s.tlsEnabled()))
	dst = stat(dst, "ssl_chain_cert", orCNull(tlsSet.ChainCert))
	dst = stat(dst, "ssl_key", orCNull(tlsSet.Key))
	dst = statInt(dst, "ssl_verify_mode", int64(openSSLVerifyFlags(tlsSet.VerifyMode)))
	dst = statInt(dst, "ssl_keyformat", sslKeyformatPEM)
	dst = stat(dst, "ssl_ciphers", orNULL(tlsSet.Ciphers))
	dst = stat(dst, "ssl_ca_cert", orNULL(tlsSet.CACert))
	wbuf := tlsSet.WbufSize
	if wbuf <= 0 {
		wbuf = tlsconf.DefaultWbufSize
	}
	dst = statInt(dst, "ssl_wbuf_size", int64(wbuf))
	dst = stat(dst, "ssl_session_cache", yesNo(tlsSet.SessionCache))
	dst = stat(dst, "ssl_kernel_tls", "no") // Go's crypto/tls has no kernel TLS offload
	dst = stat(dst, "ssl_min_version", sslProtoText(tlsSet.MinVersion))
	dst = stat(dst, "num_napi_ids", "(null)")
	dst = stat(dst, "memory_file", orCNull(s.cfg.DataDir)) // memcached: -e's file, what a restart comes back from
	dst = stat(dst, "lease_window", s.cfg.LeaseWindow.String())
	dst = stat(dst, "stale_window", s.cfg.StaleWindow.String())
	dst = statInt(dst, "hot_keys", int64(s.hot.top)) // --hot-keys (hotkeys.go)
	if s.cfg.Grace > 0 {
		dst = stat(dst, "grace", s.cfg.Grace.String())
	}
	if s.cfg.Hold > 0 {
		dst = stat(dst, "hold", s.cfg.Hold.String())
	}
	if s.cfg.DataDir != "" { // with --data-dir only, as its stats (restart.md)
		dst = stat(dst, "data_sync", s.cfg.DataSync.String())
		live := s.cfg.DataLive
		if live == "" {
			live = "off"
		}
		dst = stat(dst, "data_live", live)
	}
	return dst
}

// orNULL is how memcached prints an unset string setting it tests for NULL: "NULL".
func orNULL(v string) string {
	if v == "" {
		return "NULL"
	}
	return v
}

// orCNull is how memcached prints an unset string setting it passes to printf unchecked: glibc's "(null)".
func orCNull(v string) string {
	if v == "" {
		return "(null)"
	}
	return v
}

// yesNo is how `stats settings` shows a switch.
func yesNo(on bool) string {
	if on {
		return "yes"
	}
	return "no"
}

// yesNoPath is auth_enabled_ascii's form: the -Y file, or "no".
func yesNoPath(path string) string {
	if path == "" {
		return "no"
	}
	return path
}

// unixSocketPath is -s's path, or "" without a unix listener.
func (s *Server) unixSocketPath() string {
	for _, l := range s.cfg.Listeners {
		if l.Network == "unix" {
			return l.Addr
		}
	}
	return ""
}

// unixMask is -a, DefaultUnixMask when not set.
func (s *Server) unixMask() os.FileMode {
	if s.cfg.UnixMask == 0 {
		return DefaultUnixMask
	}
	return s.cfg.UnixMask
}

// DefaultUnixMask is -a's default, memcached's: only the socket's owner may connect.
const DefaultUnixMask os.FileMode = 0o700

// tlsEnabled is memcached's ssl_enabled (-Z): some listener speaks TLS.
func (s *Server) tlsEnabled() bool {
	for _, l := range s.cfg.Listeners {
		if l.TLS {
			return true
		}
	}
	return false
}

// sslKeyformatPEM is ssl_keyformat: OpenSSL's SSL_FILETYPE_PEM, the only key format read.
const sslKeyformatPEM = 1

// openSSLVerifyFlags is ssl_verify_mode as memcached prints it: the OpenSSL flags the mode 0-3 stands for
// (SSL_VERIFY_PEER 1, SSL_VERIFY_FAIL_IF_NO_PEER_CERT 2, SSL_VERIFY_CLIENT_ONCE 4), not the mode given.
func openSSLVerifyFlags(mode int) int {
	const peer, failIfNoPeerCert, clientOnce = 1, 2, 4
	switch mode {
	case tlsconf.VerifyPeer:
		return peer
	case tlsconf.VerifyRequire:
		return peer | failIfNoPeerCert
	case tlsconf.VerifyOnce:
		return peer | failIfNoPeerCert | clientOnce
	}
	return 0
}

// sslProtoText is ssl_min_version as memcached prints it (tls.c ssl_proto_text), from the 0-3 given.
func sslProtoText(v int) string {
	if v >= 0 && v < len(sslProtoNames) {
		return sslProtoNames[v]
	}
	return "unknown"
}

var sslProtoNames = [...]string{"tlsv1.0", "tlsv1.1", "tlsv1.2", "tlsv1.3"}

// reqsPerEvent stands where memcached shows -R (requests per event before yielding): leasecached serves
// every complete request of a read event before the next event (gnet's model), so it has no such cap
// and never yields (conn_yields is 0).
const reqsPerEvent = 0

// somaxconnPath is where gnet reads the listen backlog it passes to listen(2).
const somaxconnPath = "/proc/sys/net/core/somaxconn"

// defaultBacklog is gnet's fallback (syscall SOMAXCONN) when the sysctl cannot be read.
const defaultBacklog = 4096

// maxBacklog is Linux's bound: the kernel stores the backlog in 16 bits, and gnet truncates to it.
const maxBacklog = 1<<16 - 1

// listenBacklog is the backlog gnet listens with, read the way gnet reads it.
func listenBacklog() int {
	b, err := os.ReadFile(somaxconnPath)
	if err != nil {
		return defaultBacklog
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return defaultBacklog
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n == 0 {
		return defaultBacklog
	}
	return min(n, maxBacklog)
}
