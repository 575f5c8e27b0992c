package server

import (
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/leasecached/leasecached/slab"
)

// `stats settings`: every name memcached 1.6.18 sends, in its order, so tools that list or scrape them
// find each one. Values are leasecached's own: its slab classes (growth factor, smallest chunk,
// slab_chunk_max), its hash (xxhash), its CLOCK eviction (lru_segmented no, no LRU maintainer thread).
// Settings of machinery leasecached does not have (UDP, SASL, TLS, extstore, the slab automover, log
// watchers, memory files) show what memcached shows with that machinery off or absent, which for most
// tunables is their default. leasecached's own settings follow memcached's.
func (s *Server) appendSettingsStats(dst []byte) []byte {
	yesNo := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	dst = statInt(dst, "maxbytes", s.store.MemoryLimit())
	dst = statInt(dst, "maxconns", int64(s.cfg.ConnLimit))
	dst = statInt(dst, "tcpport", int64(s.cfg.Port))
	dst = statInt(dst, "udpport", 0)
	dst = stat(dst, "inter", s.cfg.Listen)
	dst = statInt(dst, "verbosity", int64(s.verbosity.Load()))
	dst = statInt(dst, "oldest", s.store.OldestLive())
	dst = stat(dst, "evictions", "on")
	dst = stat(dst, "domain_socket", "NULL")
	dst = stat(dst, "umask", "700") // memcached's default; it applies to unix sockets, which we lack
	dst = stat(dst, "shutdown_command", "no")
	dst = stat(dst, "growth_factor", strconv.FormatFloat(slab.GrowthFactor, 'f', 2, 64))
	dst = statInt(dst, "chunk_size", slab.MinChunk)
	dst = statInt(dst, "num_threads", int64(s.cfg.Threads))
	dst = statInt(dst, "num_threads_per_udp", int64(s.cfg.Threads)) // memcached's value without UDP
	dst = stat(dst, "stat_key_prefix", ":")
	dst = stat(dst, "detail_enabled", yesNo(s.detail.on.Load()))
	dst = statInt(dst, "reqs_per_event", reqsPerEvent)
	dst = stat(dst, "cas_enabled", "yes")
	dst = statInt(dst, "tcp_backlog", int64(listenBacklog()))
	dst = stat(dst, "binding_protocol", "ascii")
	dst = stat(dst, "auth_enabled_sasl", "no")
	dst = stat(dst, "auth_enabled_ascii", "no")
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
	dst = stat(dst, "flush_enabled", "yes")
	dst = stat(dst, "dump_enabled", "yes")
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
	dst = statInt(dst, "watcher_logbuf_size", 262144)
	dst = statInt(dst, "worker_logbuf_size", 65536)
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
	// TLS is absent: memcached's values with ssl_enabled no.
	dst = stat(dst, "ssl_enabled", "no")
	dst = stat(dst, "ssl_chain_cert", "(null)")
	dst = stat(dst, "ssl_key", "(null)")
	dst = statInt(dst, "ssl_verify_mode", 0)
	dst = statInt(dst, "ssl_keyformat", 1)
	dst = stat(dst, "ssl_ciphers", "NULL")
	dst = stat(dst, "ssl_ca_cert", "NULL")
	dst = statInt(dst, "ssl_wbuf_size", 16384)
	dst = stat(dst, "ssl_session_cache", "no")
	dst = stat(dst, "ssl_kernel_tls", "no")
	dst = stat(dst, "ssl_min_version", "tlsv1.2")
	dst = stat(dst, "num_napi_ids", "(null)")
	dst = stat(dst, "memory_file", "(null)")
	dst = stat(dst, "lease_window", s.cfg.LeaseWindow.String())
	dst = stat(dst, "stale_window", s.cfg.StaleWindow.String())
	return dst
}

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
