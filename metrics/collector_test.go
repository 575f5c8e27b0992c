package metrics

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/leasecached/leasecached/protocol"
)

// fakeSource answers StatsGroup from fixed STAT lines.
type fakeSource map[string]string

func (f fakeSource) StatsGroup(group string) []byte {
	s, ok := f[group]
	if !ok {
		return nil
	}
	return []byte(s)
}

// stats turns "name value" lines into a stats reply body.
func stats(lines ...string) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString("STAT " + l + "\r\n")
	}
	return b.String()
}

// exposition is the text format of one or more series, with their HELP taken from the mapping.
func exposition(t *testing.T, src fakeSource, names ...string) string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(NewCollector(src, nil)))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var b strings.Builder
	for _, mf := range mfs {
		for _, n := range names {
			if mf.GetName() == n {
				for _, m := range mf.GetMetric() {
					b.WriteString(n)
					if len(m.GetLabel()) > 0 {
						var ls []string
						for _, l := range m.GetLabel() {
							ls = append(ls, l.GetName()+"="+`"`+l.GetValue()+`"`)
						}
						b.WriteString("{" + strings.Join(ls, ",") + "}")
					}
					v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
					b.WriteString(" " + strconv.FormatFloat(v, 'f', -1, 64) + " " +
						strings.ToLower(mf.GetType().String()) + "\n")
				}
			}
		}
	}
	return b.String()
}

var general = stats("pid 1", "uptime 42", "time 1700000000", "version 1.6.18", "libevent gnet-v2.10.0",
	"rusage_user 1.500000", "rusage_system 0.000250", "curr_connections 3", "total_connections 9",
	"rejected_connections 1", "cmd_get 10", "cmd_set 20", "cmd_flush 2", "get_hits 7", "get_misses 3",
	"delete_misses 1", "delete_hits 4", "incr_misses 0", "incr_hits 5", "decr_misses 6", "decr_hits 0",
	"cas_misses 1", "cas_hits 2", "cas_badval 3", "touch_hits 8", "touch_misses 9", "bytes_read 100",
	"bytes_written 200", "limit_maxbytes 67108864", "accepting_conns 1", "bytes 300", "curr_items 4",
	"total_items 11", "evictions 12", "leasecached_version 0.1.0", "lease_grants 13", "lease_hot_misses 14",
	"lease_stale_served 15", "lease_sets_rejected 16", "lease_outstanding 2")

func TestCollectorMapsStats(t *testing.T) {
	cases := []struct {
		name  string
		src   fakeSource
		names []string
		want  string
	}{
		{"general counters and gauges", fakeSource{"": general},
			[]string{"memcached_up", "memcached_uptime_seconds", "memcached_current_connections",
				"memcached_connections_total", "memcached_read_bytes_total", "memcached_items_evicted_total",
				"memcached_limit_bytes", "memcached_version", "memcached_process_user_cpu_seconds_total",
				"memcached_process_system_cpu_seconds_total"},
			"memcached_connections_total 9 counter\nmemcached_current_connections 3 gauge\n" +
				"memcached_items_evicted_total 12 counter\nmemcached_limit_bytes 67108864 gauge\n" +
				"memcached_process_system_cpu_seconds_total 0.00025 counter\n" +
				"memcached_process_user_cpu_seconds_total 1.5 counter\nmemcached_read_bytes_total 100 counter\n" +
				"memcached_up 1 gauge\nmemcached_uptime_seconds 42 gauge\n" +
				"memcached_version{version=\"1.6.18\"} 1 gauge\n"},
		{"commands: hits, misses, cas badval, flush, and set less the cas trio", fakeSource{"": general},
			[]string{"memcached_commands_total"},
			`memcached_commands_total{command="cas",status="badval"} 3 counter
memcached_commands_total{command="cas",status="hit"} 2 counter
memcached_commands_total{command="cas",status="miss"} 1 counter
memcached_commands_total{command="decr",status="hit"} 0 counter
memcached_commands_total{command="decr",status="miss"} 6 counter
memcached_commands_total{command="delete",status="hit"} 4 counter
memcached_commands_total{command="delete",status="miss"} 1 counter
memcached_commands_total{command="flush",status="hit"} 2 counter
memcached_commands_total{command="get",status="hit"} 7 counter
memcached_commands_total{command="get",status="miss"} 3 counter
memcached_commands_total{command="incr",status="hit"} 5 counter
memcached_commands_total{command="incr",status="miss"} 0 counter
memcached_commands_total{command="set",status="hit"} 14 counter
memcached_commands_total{command="touch",status="hit"} 8 counter
memcached_commands_total{command="touch",status="miss"} 9 counter
`},
		{"leases", fakeSource{"": general},
			[]string{"leasecached_lease_grants_total", "leasecached_lease_hot_misses_total",
				"leasecached_lease_stale_served_total", "leasecached_lease_sets_rejected_total",
				"leasecached_leases_outstanding", "leasecached_version", "leasecached_grace_hits_total"},
			"leasecached_lease_grants_total 13 counter\nleasecached_lease_hot_misses_total 14 counter\n" +
				"leasecached_lease_sets_rejected_total 16 counter\nleasecached_lease_stale_served_total 15 counter\n" +
				"leasecached_leases_outstanding 2 gauge\nleasecached_version{version=\"0.1.0\"} 1 gauge\n"},
		{"grace and hold when sent", fakeSource{"": stats("get_grace_hits 5", "grace_refills 6", "hold_parked 7",
			"hold_waiting 1", "cmd_set 0", "cas_misses 0", "cas_hits 0", "cas_badval 0")},
			[]string{"leasecached_grace_hits_total", "leasecached_grace_refills_total", "leasecached_hold_parked_total",
				"leasecached_hold_waiting", "memcached_up"},
			"leasecached_grace_hits_total 5 counter\nleasecached_grace_refills_total 6 counter\n" +
				"leasecached_hold_parked_total 7 counter\nleasecached_hold_waiting 1 gauge\nmemcached_up 1 gauge\n"},
		{"data directory when sent", fakeSource{"": stats("restart_loading 0", "restart_items_loaded 1000",
			"restart_items_dropped 3", "restart_seconds 0.030970", "data_syncs 12", "data_sync_failures 1",
			"data_last_sync 1795700000", "data_parked_pages 2", "cmd_set 0", "cas_misses 0", "cas_hits 0", "cas_badval 0")},
			[]string{"leasecached_restart_loading", "leasecached_restart_items_loaded", "leasecached_restart_items_dropped",
				"leasecached_restart_seconds", "leasecached_data_syncs_total", "leasecached_data_sync_failures_total",
				"leasecached_data_last_sync_timestamp_seconds", "leasecached_data_parked_pages", "memcached_up"},
			"leasecached_data_last_sync_timestamp_seconds 1795700000 gauge\nleasecached_data_parked_pages 2 gauge\n" +
				"leasecached_data_sync_failures_total 1 counter\n" +
				"leasecached_data_syncs_total 12 counter\nleasecached_restart_items_dropped 3 gauge\n" +
				"leasecached_restart_items_loaded 1000 gauge\nleasecached_restart_loading 0 gauge\n" +
				"leasecached_restart_seconds 0.03097 gauge\nmemcached_up 1 gauge\n"},
		{"no cas trio: no set series, and down as memcached_exporter reports it",
			fakeSource{"": stats("cmd_set 5", "cas_hits 1", "get_hits 2")},
			[]string{"memcached_commands_total", "memcached_up"},
			"memcached_commands_total{command=\"cas\",status=\"hit\"} 1 counter\n" +
				"memcached_commands_total{command=\"get\",status=\"hit\"} 2 counter\nmemcached_up 0 gauge\n"},
		{"a value that does not parse is left out and marks the scrape down",
			fakeSource{"": stats("curr_items many", "bytes 5", "rusage_user 1.5")},
			[]string{"memcached_current_items", "memcached_current_bytes", "memcached_process_user_cpu_seconds_total", "memcached_up"},
			"memcached_current_bytes 5 gauge\nmemcached_up 0 gauge\n"},
		{"no stats at all: down", fakeSource{}, []string{"memcached_up"}, "memcached_up 0 gauge\n"},
		{"settings: maxconns and, with the crawler on, its settings",
			fakeSource{"": general, "settings": stats("maxconns 1024", "lru_crawler yes", "lru_crawler_sleep 100",
				"lru_maintainer_thread no", "hot_max_factor 0.20", "inter 127.0.0.1")},
			[]string{"memcached_max_connections", "memcached_lru_crawler_enabled", "memcached_lru_crawler_sleep",
				"memcached_lru_crawler_maintainer_thread", "memcached_lru_crawler_hot_max_factor"},
			"memcached_lru_crawler_enabled 1 gauge\nmemcached_lru_crawler_hot_max_factor 0.2 gauge\n" +
				"memcached_lru_crawler_maintainer_thread 0 gauge\nmemcached_lru_crawler_sleep 100 gauge\n" +
				"memcached_max_connections 1024 gauge\n"},
		{"settings: the crawler off sends none of its settings",
			fakeSource{"": general, "settings": stats("maxconns 10", "lru_crawler no", "lru_crawler_sleep 100")},
			[]string{"memcached_max_connections", "memcached_lru_crawler_enabled", "memcached_lru_crawler_sleep"},
			"memcached_max_connections 10 gauge\n"},
		{"items per class",
			fakeSource{"": general, "items": stats("items:1:number 5", "items:1:age 7", "items:1:evicted 2",
				"items:1:mem_requested 300", "items:12:number 1", "items:12:evicted_time 9", "items:12:hits_to_hot 4",
				"items:12:unknown_field 1")},
			[]string{"memcached_slab_current_items", "memcached_slab_items_age_seconds", "memcached_slab_items_evicted_total",
				"memcached_slab_mem_requested_bytes", "memcached_slab_items_evicted_time_seconds", "memcached_slab_lru_hits_total"},
			"memcached_slab_current_items{slab=\"1\"} 5 gauge\nmemcached_slab_current_items{slab=\"12\"} 1 gauge\n" +
				"memcached_slab_items_age_seconds{slab=\"1\"} 7 gauge\n" +
				"memcached_slab_items_evicted_time_seconds{slab=\"12\"} 9 gauge\n" +
				"memcached_slab_items_evicted_total{slab=\"1\"} 2 counter\n" +
				"memcached_slab_lru_hits_total{lru=\"hot\",slab=\"12\"} 4 counter\n" +
				"memcached_slab_mem_requested_bytes{slab=\"1\"} 300 gauge\n"},
		{"slabs per class, their totals; per-class command counters not mapped",
			fakeSource{"": general, "slabs": stats("1:chunk_size 96", "1:total_pages 2", "1:used_chunks 3",
				"1:free_chunks 4", "1:cmd_set 0", "active_slabs 1", "total_malloced 2097152")},
			[]string{"memcached_slab_chunk_size_bytes", "memcached_slab_current_pages", "memcached_slab_chunks_used",
				"memcached_slab_chunks_free", "memcached_malloced_bytes", "memcached_slab_commands_total"},
			"memcached_malloced_bytes 2097152 gauge\nmemcached_slab_chunk_size_bytes{slab=\"1\"} 96 gauge\n" +
				"memcached_slab_chunks_free{slab=\"1\"} 4 gauge\nmemcached_slab_chunks_used{slab=\"1\"} 3 gauge\n" +
				"memcached_slab_current_pages{slab=\"1\"} 2 gauge\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, exposition(t, c.src, c.names...))
		})
	}
}

// TestHotKeysFromStatsLines converts `stats hotkeys` as its format (doc: COMMON's shared format) gives it.
func TestHotKeysFromStatsLines(t *testing.T) {
	names := []string{"leasecached_hot_key_requests_per_second", "leasecached_hot_key_share_ratio",
		"leasecached_hot_key_reads_per_second", "leasecached_hot_key_writes_per_second",
		"leasecached_hot_keys_sample_every", "leasecached_hot_keys_window_seconds", "memcached_up"}
	cases := []struct {
		name, lines, want string
	}{
		{"two keys", stats("hotkeys_sample_rate 16", "hotkeys_window_seconds 10",
			"hotkey:1:key user%3A42", "hotkey:1:rate 5120", "hotkey:1:share 5.12", "hotkey:1:reads 5000", "hotkey:1:writes 120",
			"hotkey:2:key a%20b", "hotkey:2:rate 80", "hotkey:2:share 0.08", "hotkey:2:reads 80", "hotkey:2:writes 0"),
			`leasecached_hot_key_reads_per_second{key="a%20b"} 80 gauge
leasecached_hot_key_reads_per_second{key="user%3A42"} 5000 gauge
leasecached_hot_key_requests_per_second{key="a%20b"} 80 gauge
leasecached_hot_key_requests_per_second{key="user%3A42"} 5120 gauge
leasecached_hot_key_share_ratio{key="a%20b"} 0.0008 gauge
leasecached_hot_key_share_ratio{key="user%3A42"} 0.0512 gauge
leasecached_hot_key_writes_per_second{key="a%20b"} 0 gauge
leasecached_hot_key_writes_per_second{key="user%3A42"} 120 gauge
leasecached_hot_keys_sample_every 16 gauge
leasecached_hot_keys_window_seconds 10 gauge
memcached_up 1 gauge
`},
		{"an idle server: the header only", stats("hotkeys_sample_rate 16", "hotkeys_window_seconds 10"),
			"leasecached_hot_keys_sample_every 16 gauge\nleasecached_hot_keys_window_seconds 10 gauge\nmemcached_up 1 gauge\n"},
		{"a rank's figures without its key line are skipped", stats("hotkey:3:rate 9", "hotkey:3:key k", "hotkey:3:reads 9"),
			"leasecached_hot_key_reads_per_second{key=\"k\"} 9 gauge\nmemcached_up 1 gauge\n"},
		{"a figure that does not parse", stats("hotkey:1:key k", "hotkey:1:rate fast"),
			"memcached_up 0 gauge\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := fakeSource{"": stats("cmd_set 0", "cas_misses 0", "cas_hits 0", "cas_badval 0"), "hotkeys": c.lines}
			require.Equal(t, c.want, exposition(t, src, names...))
		})
	}
	// memcached answers `stats hotkeys` with an error: no group, no series, still up.
	require.Equal(t, "memcached_up 1 gauge\n", exposition(t,
		fakeSource{"": stats("cmd_set 0", "cas_misses 0", "cas_hits 0", "cas_badval 0")}, names...))
}

func TestParseStats(t *testing.T) {
	got := parseStats([]byte("STAT a 1\r\nSTAT inter 127.0.0.1 ::1\r\nnoise\r\nSTAT b\r\nSTAT c 3\nEND\r\n"))
	require.Equal(t, []stat{{"a", "1"}, {"inter", "127.0.0.1 ::1"}, {"c", "3"}}, got)
}

func TestLatencyHistogram(t *testing.T) {
	var ls Latencies
	a, b := ls.New(), ls.New()
	a.Observe(protocol.CmdGet, 200*time.Nanosecond)
	a.Observe(protocol.CmdGet, 3*time.Microsecond)
	b.Observe(protocol.CmdGet, time.Second) // past every bound
	b.Observe(protocol.CmdSet, 600*time.Nanosecond)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(NewCollector(fakeSource{}, &ls)))
	want := `
# HELP leasecached_request_duration_seconds Time from the start of a parsed request's execution to its reply appended, for one in about leasecached_request_duration_sample_every requests.
# TYPE leasecached_request_duration_seconds histogram
leasecached_request_duration_seconds_bucket{command="get",le="2.5e-07"} 1
leasecached_request_duration_seconds_bucket{command="get",le="5e-07"} 1
leasecached_request_duration_seconds_bucket{command="get",le="1e-06"} 1
leasecached_request_duration_seconds_bucket{command="get",le="2.5e-06"} 1
leasecached_request_duration_seconds_bucket{command="get",le="5e-06"} 2
leasecached_request_duration_seconds_bucket{command="get",le="1e-05"} 2
leasecached_request_duration_seconds_bucket{command="get",le="2.5e-05"} 2
leasecached_request_duration_seconds_bucket{command="get",le="5e-05"} 2
leasecached_request_duration_seconds_bucket{command="get",le="0.0001"} 2
leasecached_request_duration_seconds_bucket{command="get",le="0.00025"} 2
leasecached_request_duration_seconds_bucket{command="get",le="0.0005"} 2
leasecached_request_duration_seconds_bucket{command="get",le="0.001"} 2
leasecached_request_duration_seconds_bucket{command="get",le="0.0025"} 2
leasecached_request_duration_seconds_bucket{command="get",le="0.01"} 2
leasecached_request_duration_seconds_bucket{command="get",le="0.1"} 2
leasecached_request_duration_seconds_bucket{command="get",le="+Inf"} 3
leasecached_request_duration_seconds_sum{command="get"} 1.0000032
leasecached_request_duration_seconds_count{command="get"} 3
leasecached_request_duration_seconds_bucket{command="set",le="2.5e-07"} 0
leasecached_request_duration_seconds_bucket{command="set",le="5e-07"} 0
leasecached_request_duration_seconds_bucket{command="set",le="1e-06"} 1
leasecached_request_duration_seconds_bucket{command="set",le="2.5e-06"} 1
leasecached_request_duration_seconds_bucket{command="set",le="5e-06"} 1
leasecached_request_duration_seconds_bucket{command="set",le="1e-05"} 1
leasecached_request_duration_seconds_bucket{command="set",le="2.5e-05"} 1
leasecached_request_duration_seconds_bucket{command="set",le="5e-05"} 1
leasecached_request_duration_seconds_bucket{command="set",le="0.0001"} 1
leasecached_request_duration_seconds_bucket{command="set",le="0.00025"} 1
leasecached_request_duration_seconds_bucket{command="set",le="0.0005"} 1
leasecached_request_duration_seconds_bucket{command="set",le="0.001"} 1
leasecached_request_duration_seconds_bucket{command="set",le="0.0025"} 1
leasecached_request_duration_seconds_bucket{command="set",le="0.01"} 1
leasecached_request_duration_seconds_bucket{command="set",le="0.1"} 1
leasecached_request_duration_seconds_bucket{command="set",le="+Inf"} 1
leasecached_request_duration_seconds_sum{command="set"} 6e-07
leasecached_request_duration_seconds_count{command="set"} 1
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "leasecached_request_duration_seconds"))
}

// TestSampling: about one request in SampleEvery is timed, with gaps that vary.
func TestSampling(t *testing.T) {
	l := NewLoopLatency(12345)
	const n = 64 * SampleEvery * 100
	timed, last := 0, 0
	gaps := map[int]bool{}
	for i := 1; i <= n; i++ {
		if l.Sample() {
			timed++
			gap := i - last
			require.True(t, gap >= 1 && gap < 2*SampleEvery, "gap %d", gap)
			gaps[gap] = true
			last = i
		}
	}
	require.InDelta(t, n/SampleEvery, timed, n/SampleEvery/10) // within 10%
	require.Greater(t, len(gaps), SampleEvery)                 // not a fixed period
}

// TestObserveAllocatesNothing: the request path's part (Sample, Observe) allocates nothing.
func TestObserveAllocatesNothing(t *testing.T) {
	l := NewLoopLatency(1)
	allocs := testing.AllocsPerRun(1000, func() {
		if l.Sample() {
			l.Observe(protocol.CmdGet, 700*time.Nanosecond)
		}
		l.Observe(protocol.CmdMetaGet, 70*time.Microsecond)
	})
	require.Zero(t, allocs)
}

// TestCommandsFit: every protocol command has a histogram.
func TestCommandsFit(t *testing.T) {
	require.Equal(t, "unknown", protocol.Command(maxCommands-1).String())
	require.Equal(t, "refresh_certs", protocol.CmdRefreshCerts.String())
}

// BenchmarkTimedRequest is what a timed request adds to its execution: two clock reads and Observe.
func BenchmarkTimedRequest(b *testing.B) {
	l := NewLoopLatency(1)
	for b.Loop() {
		start := time.Now()
		l.Observe(protocol.CmdGet, time.Since(start))
	}
}

// BenchmarkSample is what every request pays with the endpoint on: the sampler's countdown.
func BenchmarkSample(b *testing.B) {
	l := NewLoopLatency(1)
	n := 0
	for b.Loop() {
		if l.Sample() {
			n++
		}
	}
	_ = n
}
