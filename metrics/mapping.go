package metrics

import "github.com/prometheus/client_golang/prometheus"

// The mapping from `stats` lines to series: every name memcached_exporter (v0.16.0,
// pkg/exporter/exporter.go) gives a stat leasecached sends, with the exporter's type and labels, so its
// dashboards and alerts work unchanged; then leasecached's own. This file is the one place a stat gets a
// series; collector.go only follows it. See doc/design/metrics.md.

// conv is how a stat's value is read.
type conv uint8

const (
	number  conv = iota // a decimal number
	timeval             // "seconds.microseconds", as rusage_user
	yesNo               // "yes" (1) or "no" (0)
)

// series maps one stat to one series without labels (or with the given label values).
type series struct {
	stat string
	desc *prometheus.Desc
	typ  prometheus.ValueType
	conv conv
}

const (
	counter = prometheus.CounterValue
	gauge   = prometheus.GaugeValue
)

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

var (
	upDesc      = desc("memcached_up", "Whether the server's stats were read and every value parsed.")
	versionDesc = desc("memcached_version", "The memcached protocol release the server implements.", "version")
	// commandsDesc is memcached_exporter's hit/miss breakdown of commands (commandSeries, and set).
	commandsDesc = desc("memcached_commands_total",
		"Requests by command and outcome.", "command", "status")
	leasecachedVersionDesc = desc("leasecached_version", "leasecached's own release.", "version")
)

// generalSeries are the plain `stats` lines.
var generalSeries = []series{
	// A gauge where memcached_exporter has a counter, as is the two below: promtool's lint wants a
	// counter's name to end in _total, and the name is what dashboards use (doc/design/metrics.md).
	{"uptime", desc("memcached_uptime_seconds", "Seconds since the server started."), gauge, number},
	{"time", desc("memcached_time_seconds", "The server's UNIX time."), gauge, number},
	{"rusage_user", desc("memcached_process_user_cpu_seconds_total", "User CPU time of the process."), counter, timeval},
	{"rusage_system", desc("memcached_process_system_cpu_seconds_total", "System CPU time of the process."), counter, timeval},
	{"bytes_read", desc("memcached_read_bytes_total", "Bytes read from clients."), counter, number},
	{"bytes_written", desc("memcached_written_bytes_total", "Bytes written to clients."), counter, number},
	{"curr_connections", desc("memcached_current_connections", "Open client connections."), gauge, number},
	{"total_connections", desc("memcached_connections_total", "Connections accepted since start."), counter, number},
	{"rejected_connections", desc("memcached_connections_rejected_total", "Connections refused over -c."), counter, number},
	{"conn_yields", desc("memcached_connections_yielded_total", "Connections yielded (memcached's -R; always 0)."), counter, number},
	{"listen_disabled_num", desc("memcached_connections_listener_disabled_total", "Times the listener was disabled (always 0)."), counter, number},
	{"bytes", desc("memcached_current_bytes", "Bytes used by stored items."), gauge, number},
	{"limit_maxbytes", desc("memcached_limit_bytes", "The -m limit in bytes."), gauge, number},
	{"curr_items", desc("memcached_current_items", "Items stored now."), gauge, number},
	{"total_items", desc("memcached_items_total", "Items stored since start."), counter, number},
	{"evictions", desc("memcached_items_evicted_total", "Live items evicted to make room."), counter, number},
	{"reclaimed", desc("memcached_items_reclaimed_total", "Stores that reused an expired item's memory."), counter, number},
	{"store_too_large", desc("memcached_item_too_large_total", "Stores refused as larger than -I."), counter, number},
	{"store_no_memory", desc("memcached_item_no_memory_total", "Stores refused for lack of memory."), counter, number},
	{"lru_crawler_starts", desc("memcached_lru_crawler_starts_total", "Crawls started."), counter, number},
	{"direct_reclaims", desc("memcached_direct_reclaims_total", "Times a store reclaimed or evicted itself."), counter, number},
	{"crawler_items_checked", desc("memcached_lru_crawler_items_checked_total", "Items the crawler examined."), counter, number},
	{"crawler_reclaimed", desc("memcached_lru_crawler_reclaimed_total", "Items the crawler freed."), counter, number},
	{"moves_to_cold", desc("memcached_lru_crawler_moves_to_cold_total", "Items moved to COLD (always 0: no segmented LRU)."), counter, number},
	{"moves_to_warm", desc("memcached_lru_crawler_moves_to_warm_total", "Items moved to WARM (always 0: no segmented LRU)."), counter, number},
	{"moves_within_lru", desc("memcached_lru_crawler_moves_within_lru_total", "Items bumped within an LRU (always 0)."), counter, number},
	{"accepting_conns", desc("memcached_accepting_connections", "Whether new connections are accepted."), gauge, number},

	// leasecached's own: leases (doc/leases.md).
	{"lease_grants", desc("leasecached_lease_grants_total", "Leases granted by lease-get."), counter, number},
	{"lease_hot_misses", desc("leasecached_lease_hot_misses_total", "lease-gets told to wait: another client holds the lease."), counter, number},
	{"lease_stale_served", desc("leasecached_lease_stale_served_total", "lease-gets answered with a stale value."), counter, number},
	{"lease_sets_stored", desc("leasecached_lease_sets_stored_total", "lease-sets stored."), counter, number},
	{"lease_sets_rejected", desc("leasecached_lease_sets_rejected_total", "lease-sets refused: lease expired or invalidated."), counter, number},
	{"lease_invalidations", desc("leasecached_lease_invalidations_total", "Leases invalidated by a write or delete."), counter, number},
	{"lease_outstanding", desc("leasecached_leases_outstanding", "Leases granted and not yet set or expired."), gauge, number},
	{"lease_stale_items", desc("leasecached_lease_stale_items", "Deleted or expired values kept for lease-get."), gauge, number},
	// --grace and --hold (sent only with the mode on).
	{"get_grace_hits", desc("leasecached_grace_hits_total", "Plain reads answered with an expired value while one client refills."), counter, number},
	{"grace_refills", desc("leasecached_grace_refills_total", "Plain reads that missed to refill an expired value."), counter, number},
	{"grace_lease_lapses", desc("leasecached_grace_lease_lapses_total", "Refills not stored within the lease window."), counter, number},
	{"hold_parked", desc("leasecached_hold_parked_total", "Reads parked while another client refills the key."), counter, number},
	{"hold_filled", desc("leasecached_hold_filled_total", "Parked reads answered by the refill."), counter, number},
	{"hold_timeouts", desc("leasecached_hold_timeouts_total", "Parked reads that waited out --hold and missed."), counter, number},
	{"hold_cancelled", desc("leasecached_hold_cancelled_total", "Parked reads whose connection closed."), counter, number},
	{"hold_refused", desc("leasecached_hold_refused_total", "Reads not parked: too many waiting."), counter, number},
	{"hold_waiting", desc("leasecached_hold_waiting", "Reads parked now."), gauge, number},
	// The rest of leasecached's figures operators ask for.
	{"get_expired", desc("leasecached_get_expired_total", "Reads that found an expired item."), counter, number},
	{"get_flushed", desc("leasecached_get_flushed_total", "Reads that found an item flush_all invalidated."), counter, number},
	{"huge_page_bytes", desc("leasecached_huge_page_bytes", "Item memory on transparent huge pages."), gauge, number},
	// --data-dir (sent only with it on; doc/design/restart.md).
	{"restart_loading", desc("leasecached_restart_loading", "Whether the index is still being rebuilt from --data-dir."), gauge, number},
	{"restart_items_loaded", desc("leasecached_restart_items_loaded", "Items the start found in --data-dir and kept."), gauge, number},
	{"restart_items_dropped", desc("leasecached_restart_items_dropped", "Items the start found in --data-dir and dropped."), gauge, number},
	{"restart_items_rolled_back", desc("leasecached_restart_items_rolled_back", "Items kept that a start after a reboot took back at the version a change had replaced, the change not being on disk."), gauge, number},
	{"restart_seconds", desc("leasecached_restart_seconds", "How long the start took to rebuild its index from --data-dir (while loading, how long so far)."), gauge, number},
	{"data_syncs", desc("leasecached_data_syncs_total", "Periodic syncs of --data-dir to disk done."), counter, number},
	{"data_sync_failures", desc("leasecached_data_sync_failures_total", "Periodic syncs of --data-dir to disk that failed."), counter, number},
	{"data_last_sync", desc("leasecached_data_last_sync_timestamp_seconds", "When --data-dir was last synced to disk (0: not yet)."), gauge, number},
	{"data_parked_pages", desc("leasecached_data_parked_pages", "Slab pages a page move emptied, out of use until the next sync of --data-dir has written the items it moved."), gauge, number},
	{"data_kept_versions", desc("leasecached_data_kept_versions", "Versions of items that changes replaced, kept until a sync of --data-dir has written what replaced them."), gauge, number},
	{"data_kept_dropped", desc("leasecached_data_kept_dropped_total", "Kept versions freed before that sync, by a page move or for memory."), counter, number},
}

// commandSeries are the `stats` lines memcached_exporter breaks down into memcached_commands_total.
// set's hits are derived: cmd_set counts cas too (setSeries).
var commandSeries = []struct{ stat, command, status string }{
	{"get_hits", "get", "hit"}, {"get_misses", "get", "miss"},
	{"delete_hits", "delete", "hit"}, {"delete_misses", "delete", "miss"},
	{"incr_hits", "incr", "hit"}, {"incr_misses", "incr", "miss"},
	{"decr_hits", "decr", "hit"}, {"decr_misses", "decr", "miss"},
	{"cas_hits", "cas", "hit"}, {"cas_misses", "cas", "miss"}, {"cas_badval", "cas", "badval"},
	{"touch_hits", "touch", "hit"}, {"touch_misses", "touch", "miss"},
	{"cmd_flush", "flush", "hit"},
}

// setSeries: memcached_commands_total{command="set",status="hit"} is cmd_set less the cas trio.
var setSeries = struct {
	total string
	less  []string
}{"cmd_set", []string{"cas_misses", "cas_hits", "cas_badval"}}

// settingsSeries are `stats settings` lines; lruCrawlerSeries only when lru_crawler is yes, as the
// exporter reads them.
var settingsSeries = []series{
	{"maxconns", desc("memcached_max_connections", "The -c limit."), gauge, number},
}

var lruCrawlerSeries = []series{
	{"lru_crawler", desc("memcached_lru_crawler_enabled", "Whether the LRU crawler is on."), gauge, yesNo},
	{"lru_crawler_sleep", desc("memcached_lru_crawler_sleep", "Microseconds between crawls."), gauge, number},
	{"lru_crawler_tocrawl", desc("memcached_lru_crawler_to_crawl", "Items crawled per class per run (0: all)."), gauge, number},
	{"lru_maintainer_thread", desc("memcached_lru_crawler_maintainer_thread", "Whether the segmented LRU runs."), gauge, yesNo},
	{"hot_lru_pct", desc("memcached_lru_crawler_hot_percent", "Share of a class's memory for HOT."), gauge, number},
	{"warm_lru_pct", desc("memcached_lru_crawler_warm_percent", "Share of a class's memory for WARM."), gauge, number},
	{"hot_max_factor", desc("memcached_lru_crawler_hot_max_factor", "HOT's idle age as a factor of COLD's."), gauge, number},
	{"warm_max_factor", desc("memcached_lru_crawler_warm_max_factor", "WARM's idle age as a factor of COLD's."), gauge, number},
}

// itemSeries are `stats items` per-class fields ("items:<class>:<field>"), labelled slab. The exporter's
// per-class LRU moves are left out: leasecached has no segmented LRU to send them, and as the exporter names
// them (counters without _total) promtool would refuse them.
var itemSeries = []series{
	{"number", desc("memcached_slab_current_items", "Items stored in the class.", "slab"), gauge, number},
	{"age", desc("memcached_slab_items_age_seconds", "Age of the class's oldest item.", "slab"), gauge, number},
	{"crawler_reclaimed", desc("memcached_slab_items_crawler_reclaimed_total", "Items of the class the crawler freed.", "slab"), counter, number},
	{"evicted", desc("memcached_slab_items_evicted_total", "Live items of the class evicted.", "slab"), counter, number},
	{"evicted_nonzero", desc("memcached_slab_items_evicted_nonzero_total", "Evicted items of the class that had an expiry time.", "slab"), counter, number},
	// A gauge: memcached_exporter's counter, as uptime.
	{"evicted_time", desc("memcached_slab_items_evicted_time_seconds", "Seconds since the last access of the class's last evicted item.", "slab"), gauge, number},
	{"evicted_unfetched", desc("memcached_slab_items_evicted_unfetched_total", "Items of the class evicted without a read.", "slab"), counter, number},
	{"expired_unfetched", desc("memcached_slab_items_expired_unfetched_total", "Items of the class expired without a read.", "slab"), counter, number},
	{"outofmemory", desc("memcached_slab_items_outofmemory_total", "Stores in the class refused for lack of memory.", "slab"), counter, number},
	{"reclaimed", desc("memcached_slab_items_reclaimed_total", "Stores in the class that reused an expired item.", "slab"), counter, number},
	{"tailrepairs", desc("memcached_slab_items_tailrepairs_total", "Tail repairs in the class.", "slab"), counter, number},
	// A gauge: memcached_exporter's counter from `stats items` (memcached 1.6 sends it there only), as uptime.
	{"mem_requested", desc("memcached_slab_mem_requested_bytes", "Bytes the class's items take.", "slab"), gauge, number},
	{"number_hot", desc("memcached_slab_hot_items", "Items of the class in HOT.", "slab"), gauge, number},
	{"number_warm", desc("memcached_slab_warm_items", "Items of the class in WARM.", "slab"), gauge, number},
	{"number_cold", desc("memcached_slab_cold_items", "Items of the class in COLD.", "slab"), gauge, number},
	{"number_temp", desc("memcached_slab_temporary_items", "Items of the class in TEMP.", "slab"), gauge, number},
	{"age_hot", desc("memcached_slab_hot_age_seconds", "Age of the oldest item in the class's HOT.", "slab"), gauge, number},
	{"age_warm", desc("memcached_slab_warm_age_seconds", "Age of the oldest item in the class's WARM.", "slab"), gauge, number},
}

// lruHitsDesc is memcached_exporter's per-class, per-LRU hits (items:<class>:hits_to_<lru>).
var lruHitsDesc = desc("memcached_slab_lru_hits_total", "Hits by class and LRU.", "slab", "lru")

var lruHitsSeries = []struct{ stat, lru string }{
	{"hits_to_hot", "hot"}, {"hits_to_warm", "warm"}, {"hits_to_cold", "cold"}, {"hits_to_temp", "temporary"},
}

// slabSeries are `stats slabs` per-class fields ("<class>:<field>"), labelled slab. The per-class command
// counters are not mapped: leasecached does not break commands down by class (server/stats.go sends them
// as 0 for the exporter's sake), and memcached_commands_total has the totals.
var slabSeries = []series{
	{"chunk_size", desc("memcached_slab_chunk_size_bytes", "Bytes per chunk of the class.", "slab"), gauge, number},
	{"chunks_per_page", desc("memcached_slab_chunks_per_page", "Chunks per page of the class.", "slab"), gauge, number},
	{"total_pages", desc("memcached_slab_current_pages", "Pages the class owns.", "slab"), gauge, number},
	{"total_chunks", desc("memcached_slab_current_chunks", "Chunks the class owns.", "slab"), gauge, number},
	{"used_chunks", desc("memcached_slab_chunks_used", "Chunks of the class holding an item.", "slab"), gauge, number},
	{"free_chunks", desc("memcached_slab_chunks_free", "Chunks of the class free.", "slab"), gauge, number},
	{"free_chunks_end", desc("memcached_slab_chunks_free_end", "Free chunks at the end of the class's last page.", "slab"), gauge, number},
}

// slabTotalSeries are the totals `stats slabs` ends with.
var slabTotalSeries = []series{
	{"total_malloced", desc("memcached_malloced_bytes", "Bytes of slab pages allocated."), gauge, number},
}

// The hot keys (`stats hotkeys`, doc/design/hotkeys.md): one series per listed key.
var (
	hotKeysHeader = []series{
		{"hotkeys_sample_rate", desc("leasecached_hot_keys_sample_every", "One keyed request in this many is sampled for the hot keys."), gauge, number},
		{"hotkeys_window_seconds", desc("leasecached_hot_keys_window_seconds", "The window hot-key rates are measured over."), gauge, number},
	}
	// hotKeyFields map a rank's fields (hotkey:<rank>:<field>) to series labelled with its key; scale
	// turns share's percent into a ratio.
	hotKeyFields = []struct {
		field string
		desc  *prometheus.Desc
		scale float64
	}{
		{"rate", desc("leasecached_hot_key_requests_per_second", "Estimated requests a second for a hot key.", "key"), 1},
		{"share", desc("leasecached_hot_key_share_ratio", "Estimated share of all keyed requests for a hot key.", "key"), 0.01},
		{"reads", desc("leasecached_hot_key_reads_per_second", "Estimated reads a second for a hot key.", "key"), 1},
		{"writes", desc("leasecached_hot_key_writes_per_second", "Estimated writes a second for a hot key.", "key"), 1},
	}
)
