package server

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// stats cachedump and cache_memlimit, replies as memcached 1.6.18 gives them.
func TestAdminScripts(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"cachedump lists a lone item", "set k 0 0 2\r\nhi\r\nstats cachedump 1 0\r\n",
			"STORED\r\nITEM k [2 b; 0 s]\r\nEND\r\n"},
		{"cachedump shows absolute exptimes", "set k 0 2000000000 2\r\nhi\r\nstats cachedump 1 0\r\n",
			"STORED\r\nITEM k [2 b; 2000000000 s]\r\nEND\r\n"},
		{"cachedump limit", "set a 0 0 1\r\na\r\nset b 0 0 1\r\nb\r\nstats cachedump 1 1\r\n",
			"STORED\r\nSTORED\r\nITEM a [1 b; 0 s]\r\nEND\r\n"},
		{"cachedump other class is empty", "set k 0 0 2\r\nhi\r\nstats cachedump 2 0\r\n", "STORED\r\nEND\r\n"},
		{"cachedump class 0 is empty", "set k 0 0 2\r\nhi\r\nstats cachedump 0 0\r\n", "STORED\r\nEND\r\n"},
		{"cachedump last legal class", "stats cachedump 63 0\r\n", "END\r\n"},
		{"cachedump class truncated to 32 bits", "set k 0 0 2\r\nhi\r\nstats cachedump 4294967297 0\r\n",
			"STORED\r\nITEM k [2 b; 0 s]\r\nEND\r\n"},
		// Not memcached's: it lists a flushed or expired item until it is reaped (doc/design/dumps.md).
		{"cachedump hides a flushed item, as get and metadump do",
			"set k 0 0 2\r\nhi\r\nflush_all\r\nstats cachedump 1 0\r\nlru_crawler metadump all\r\nget k\r\n",
			"STORED\r\nOK\r\nEND\r\nEND\r\nEND\r\n"},
		{"cachedump lists an item a delayed flush_all has not reached",
			"set k 0 0 2\r\nhi\r\nflush_all 100\r\nstats cachedump 1 0\r\n", "STORED\r\nOK\r\nITEM k [2 b; 0 s]\r\nEND\r\n"},
		{"cachedump alone", "stats cachedump\r\n", "CLIENT_ERROR bad command line\r\n"},
		{"cachedump without limit", "stats cachedump 1\r\n", "CLIENT_ERROR bad command line\r\n"},
		{"cachedump bad class", "stats cachedump x 0\r\n", "CLIENT_ERROR bad command line format\r\n"},
		{"cachedump bad limit", "stats cachedump 1 x\r\n", "CLIENT_ERROR bad command line format\r\n"},
		{"cachedump negative", "stats cachedump -1 0\r\n", "CLIENT_ERROR bad command line format\r\n"},
		{"cachedump class out of range", "stats cachedump 64 0\r\n", "CLIENT_ERROR Illegal slab id\r\n"},
		{"memlimit", "cache_memlimit 100\r\n", "OK\r\n"},
		{"memlimit floor", "cache_memlimit 8\r\n", "OK\r\n"},
		{"memlimit too small", "cache_memlimit 7\r\n", "MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m\r\n"},
		{"memlimit truncated to 0", "cache_memlimit 4294967296\r\n",
			"MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m\r\n"},
		{"memlimit bytes not megabytes", "cache_memlimit 1000000001\r\n",
			"MEMLIMIT_ADJUST_FAILED input value is megabytes not bytes\r\n"},
		{"memlimit beyond addressable", "cache_memlimit 1000000000\r\n",
			"MEMLIMIT_ADJUST_FAILED out of bounds or unable to adjust\r\n"},
		{"memlimit noreply", "cache_memlimit 64 noreply\r\ncache_memlimit 7 noreply\r\nmn\r\n", "MN\r\n"},
		{"memlimit errors", "cache_memlimit\r\ncache_memlimit x\r\n", "ERROR\r\nERROR\r\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestServer(t)
			got, _ := feed(newConn(s, nil), &fakeConn{}, tc.in)
			if got != tc.want {
				t.Fatalf("replies %q, want %q", got, tc.want)
			}
		})
	}
}

// cachedump stops before its response would pass memcached's 2 MB cap.
func TestCachedumpCap(t *testing.T) {
	s := newTestServer(t)
	cn, fc := newConn(s, nil), &fakeConn{}
	var in strings.Builder
	key := strings.Repeat("k", 200)
	const items = 12_000 // ~220 bytes per line: 2.6 MB of listing
	for i := range items {
		fmt.Fprintf(&in, "set %s%05d 0 0 1 noreply\r\nx\r\n", key, i)
	}
	feed(cn, fc, in.String())
	got := ""
	for id := 1; id < maxSlabClasses && len(got) <= len("END\r\n"); id++ { // the items' class
		fc.out.Reset()
		got, _ = feed(cn, fc, "stats cachedump "+strconv.Itoa(id)+" 0\r\n")
	}
	if !strings.HasSuffix(got, "\r\nEND\r\n") || len(got)+1 > cachedumpMaxBytes {
		t.Fatalf("response of %d bytes, ending %q", len(got), got[max(0, len(got)-20):])
	}
	line := len("ITEM " + key + "00000 [1 b; 0 s]\r\n")
	if lines := strings.Count(got, "\r\n") - 1; lines != (cachedumpMaxBytes-cachedumpTrailer)/line {
		t.Fatalf("%d lines of %d bytes in %d", lines, line, len(got))
	}
}

// memcachedSettings are the names `stats settings` of memcached 1.6.18 sends, in its order.
var memcachedSettings = strings.Fields(`maxbytes maxconns tcpport udpport inter verbosity oldest evictions
domain_socket umask shutdown_command growth_factor chunk_size num_threads num_threads_per_udp
stat_key_prefix detail_enabled reqs_per_event cas_enabled tcp_backlog binding_protocol auth_enabled_sasl
auth_enabled_ascii item_size_max maxconns_fast hashpower_init slab_reassign slab_automove
slab_automove_ratio slab_automove_window slab_chunk_max lru_crawler lru_crawler_sleep lru_crawler_tocrawl
tail_repair_time flush_enabled dump_enabled hash_algorithm lru_maintainer_thread lru_segmented hot_lru_pct
warm_lru_pct hot_max_factor warm_max_factor temp_lru temporary_ttl idle_timeout watcher_logbuf_size
worker_logbuf_size read_buf_mem_limit track_sizes inline_ascii_response ext_item_size ext_item_age
ext_low_ttl ext_recache_rate ext_wbuf_size ext_compact_under ext_drop_under ext_max_sleep ext_max_frag
slab_automove_freeratio ext_drop_unread ssl_enabled ssl_chain_cert ssl_key ssl_verify_mode ssl_keyformat
ssl_ciphers ssl_ca_cert ssl_wbuf_size ssl_session_cache ssl_kernel_tls ssl_min_version num_napi_ids
memory_file`)

func TestSettingsNamesAndValues(t *testing.T) {
	s := newTestServer(t)
	cn, fc := newConn(s, nil), &fakeConn{}
	got, _ := feed(cn, fc, "cache_memlimit 100\r\nstats settings\r\n")
	got = strings.TrimPrefix(got, "OK\r\n")
	var names []string
	values := map[string]string{}
	for _, l := range strings.Split(strings.TrimSuffix(got, "END\r\n"), "\r\n") {
		if l == "" {
			continue
		}
		f := strings.SplitN(l, " ", 3)
		if len(f) != 3 || f[0] != "STAT" {
			t.Fatalf("bad line %q", l)
		}
		names = append(names, f[1])
		values[f[1]] = f[2]
	}
	want := append(append([]string{}, memcachedSettings...), "lease_window", "stale_window", "hot_keys")
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("names\n got %v\nwant %v", names, want)
	}
	for name, v := range map[string]string{"maxbytes": "104857600", "growth_factor": "1.25", "chunk_size": "48",
		"slab_chunk_max": "524288", "hash_algorithm": "xxhash", "lru_segmented": "no", "item_size_max": "1048576"} {
		if values[name] != v {
			t.Errorf("%s = %q, want %q", name, values[name], v)
		}
	}
	if got, _ := feed(cn, fc, "stats\r\n"); !strings.Contains(got, "STAT limit_maxbytes 104857600\r\n") {
		t.Errorf("limit_maxbytes does not follow cache_memlimit")
	}
}

// stats reports the item memory on huge pages, leasecached's own stat: none on a fresh server.
func TestStatsHugePageBytes(t *testing.T) {
	cn := newConn(newTestServer(t), nil)
	if got, _ := feed(cn, &fakeConn{}, "stats\r\n"); !strings.Contains(got, "STAT huge_page_bytes 0\r\n") {
		t.Errorf("no huge_page_bytes 0 in\n%s", got)
	}
}

// With neither grace nor hold, `stats` and `stats settings` are as before the modes existed: none of their
// lines (doc/leases.md, "Grace and hold").
func TestHerdStatsOnlyWhenOn(t *testing.T) {
	s := newTestServer(t)
	got, _ := feed(newConn(s, nil), &fakeConn{}, "stats\r\nstats settings\r\n")
	for _, name := range []string{"grace", "hold"} {
		assert.NotContains(t, got, "STAT "+name, "a %s line with the mode off", name)
		assert.NotContains(t, got, "_"+name+"_", "a %s line with the mode off", name)
	}
}

// With --data-dir, `stats settings` names it where memcached names -e's file (memory_file), then says how
// often it is synced and where its live copy is; without, memory_file is memcached's "(null)" and the
// other two are not sent.
func TestSettingsDataDir(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want []string
	}{
		{"none", nil, []string{"memory_file (null)"}},
		{"live copy", func(c *Config) { c.DataDir, c.DataSync, c.DataLive = "/var/lib/lc", 10*time.Second, "/dev/shm" },
			[]string{"memory_file /var/lib/lc", "data_sync 10s", "data_live /dev/shm"}},
		{"mapped, synced at stops only", func(c *Config) { c.DataDir = "/var/lib/lc" },
			[]string{"memory_file /var/lib/lc", "data_sync 0s", "data_live off"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := feed(newConn(newTestServerConfig(t, tc.edit), nil), &fakeConn{}, "stats settings\r\n")
			for _, w := range tc.want {
				assert.Contains(t, got, "STAT "+w+"\r\n")
			}
			if tc.edit == nil {
				assert.NotContains(t, got, "STAT data_")
			}
		})
	}
}
