package integration

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startWithMetrics starts leasecached with --metrics-listen on a free loopback port (picked anew on each
// start attempt) and the extra args; it returns the daemon and the endpoint's URL.
func startWithMetrics(t *testing.T, args ...string) (*daemon, string) {
	t.Helper()
	requireLeasecached(t)
	var metricsAddr string
	base := leasecachedArgs(args)
	d := startDaemon(t, "leasecached", leasecachedPath, func(port int) []string {
		mport, err := freePort()
		require.NoError(t, err)
		metricsAddr = "127.0.0.1:" + strconv.Itoa(mport)
		return append(base(port), "--metrics-listen", metricsAddr)
	})
	return d, "http://" + metricsAddr + "/metrics"
}

// scrape fetches url and returns the body and its families.
func scrape(t *testing.T, url string) ([]byte, map[string]*dto.MetricFamily) {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	require.NoError(t, err)
	return body, fams
}

// stats sends one stats command and returns its lines by name.
func statsGroupOf(t *testing.T, rc *rawConn, group string) map[string]string {
	t.Helper()
	rep := rc.exchange([]byte(strings.TrimSpace("stats "+group)+"\r\nmn\r\n"), wholeWrite, sentinelReply, defaultReplyTimeout)
	require.True(t, bytes.HasSuffix(rep.data, []byte("END\r\nMN\r\n")), "%q", truncate(rep.data, 300))
	return statsMap(rep.data)
}

// seriesValue is the one sample of family name with the given label values (name=value pairs), or fails.
func seriesValue(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	mf, ok := fams[name]
	require.True(t, ok, "no series %s", name)
	for _, m := range mf.GetMetric() {
		if labelsMatch(m, labels) {
			return m.GetGauge().GetValue() + m.GetCounter().GetValue() + m.GetUntyped().GetValue()
		}
	}
	t.Fatalf("no %s%v", name, labels)
	return 0
}

func labelsMatch(m *dto.Metric, labels []string) bool {
	have := map[string]string{}
	for _, l := range m.GetLabel() {
		have[l.GetName()] = l.GetValue()
	}
	for i := 0; i+1 < len(labels); i += 2 {
		if have[labels[i]] != labels[i+1] {
			return false
		}
	}
	return true
}

func num(t *testing.T, s map[string]string, name string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s[name], 64)
	require.NoError(t, err, "STAT %s %q", name, s[name])
	return v
}

// TestMetricsEndpoint drives traffic, then takes `stats`, a scrape and `stats` again: every series fed by
// a counter lies between the two stats (equal when nothing ran between), gauges equal, the latency
// histograms hold the traffic, and promtool accepts the scrape.
func TestMetricsEndpoint(t *testing.T) {
	d, url := startWithMetrics(t, "--grace", "2s", "--hold", "100ms")
	rc := dialRaw(t, d)
	var traffic strings.Builder
	traffic.WriteString(statsWorkload)
	traffic.WriteString("lease-get lk\r\nlease-get lk\r\n")
	for range 400 { // pipelined: enough requests that sampling times some of each kind; hits, which --hold never parks
		traffic.WriteString("set s 0 0 1\r\nx\r\nget s\r\n")
	}
	rep := rc.exchange([]byte(traffic.String()+"mn\r\n"), wholeWrite, sentinelReply, 5*time.Second)
	require.True(t, bytes.HasSuffix(rep.data, sentinelReply))

	hot := rc.exchange([]byte("stats hotkeys\r\nmn\r\n"), wholeWrite, sentinelReply, defaultReplyTimeout)
	before := statsGroupOf(t, rc, "")
	body, fams := scrape(t, url)
	after := statsGroupOf(t, rc, "")
	settings := statsGroupOf(t, rc, "settings")

	require.Equal(t, 1.0, seriesValue(t, fams, "memcached_up"))
	require.Equal(t, 1.0, seriesValue(t, fams, "memcached_version", "version", before["version"]))
	counters := map[string]string{
		"memcached_items_total": "total_items", "memcached_connections_total": "total_connections",
		"memcached_items_evicted_total": "evictions", "leasecached_lease_grants_total": "lease_grants",
		"leasecached_lease_hot_misses_total": "lease_hot_misses", "leasecached_lease_sets_rejected_total": "lease_sets_rejected",
		"memcached_read_bytes_total": "bytes_read", "memcached_written_bytes_total": "bytes_written",
		"memcached_uptime_seconds": "uptime", "leasecached_grace_hits_total": "get_grace_hits",
		"leasecached_hold_parked_total": "hold_parked",
	}
	for series, stat := range counters {
		v := seriesValue(t, fams, series)
		assert.GreaterOrEqual(t, v, num(t, before, stat), series)
		assert.LessOrEqual(t, v, num(t, after, stat), series)
	}
	// Nothing but this connection's stats commands ran between the two: these are exact.
	gauges := map[string]string{
		"memcached_current_items": "curr_items", "memcached_current_bytes": "bytes", "memcached_limit_bytes": "limit_maxbytes",
		"memcached_current_connections": "curr_connections", "leasecached_leases_outstanding": "lease_outstanding",
	}
	for series, stat := range gauges {
		assert.Equal(t, num(t, before, stat), seriesValue(t, fams, series), series)
	}
	assert.Equal(t, num(t, settings, "maxconns"), seriesValue(t, fams, "memcached_max_connections"))
	for _, c := range []struct{ stat, command, status string }{
		{"get_hits", "get", "hit"}, {"get_misses", "get", "miss"}, {"cas_badval", "cas", "badval"},
		{"touch_misses", "touch", "miss"}, {"cmd_flush", "flush", "hit"}, {"delete_hits", "delete", "hit"},
	} {
		assert.Equal(t, num(t, before, c.stat), seriesValue(t, fams, "memcached_commands_total", "command", c.command, "status", c.status), c.stat)
	}
	set := num(t, before, "cmd_set") - num(t, before, "cas_hits") - num(t, before, "cas_misses") - num(t, before, "cas_badval")
	assert.Equal(t, set, seriesValue(t, fams, "memcached_commands_total", "command", "set", "status", "hit"))
	assert.Equal(t, 1.0, seriesValue(t, fams, "memcached_slab_current_pages", "slab", "1"))

	// Histograms: the 400 gets and sets were sampled into their commands.
	hist := fams["leasecached_request_duration_seconds"]
	require.NotNil(t, hist, "no latency histograms")
	require.Equal(t, dto.MetricType_HISTOGRAM, hist.GetType())
	timed := map[string]uint64{}
	for _, m := range hist.GetMetric() {
		timed[m.GetLabel()[0].GetValue()] = m.GetHistogram().GetSampleCount()
	}
	assert.Greater(t, timed["get"], uint64(0), "%v", timed)
	assert.Greater(t, timed["set"], uint64(0), "%v", timed)
	assert.LessOrEqual(t, timed["get"], uint64(num(t, after, "cmd_get")), "%v", timed)

	// Hot keys, once the server ranks them: the top key of `stats hotkeys` (s, half the traffic) is a series.
	if !bytes.HasPrefix(hot.data, []byte("ERROR")) {
		top := statsMap(hot.data)["hotkey:1:key"]
		require.Equal(t, "s", top, "%q", hot.data)
		assert.Greater(t, seriesValue(t, fams, "leasecached_hot_key_requests_per_second", "key", top), 0.0)
	}

	promtool(t, body)
}

// promtool runs `promtool check metrics` on a scrape; Debian's prometheus package has it (make test-deps).
func promtool(t *testing.T, body []byte) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	require.NoError(t, err, "promtool is not on PATH: `make test-deps` installs it (Debian's prometheus)")
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "promtool check metrics:\n%s", out)
}

// exporterSeries is one line of testdata/memcached_exporter_series.tsv.
type exporterSeries struct {
	name, typ, labels, ours string
}

func readExporterSeries(t *testing.T) []exporterSeries {
	t.Helper()
	f, err := os.Open("testdata/memcached_exporter_series.tsv")
	require.NoError(t, err)
	defer f.Close()
	var out []exporterSeries
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := sc.Text(); line != "" && !strings.HasPrefix(line, "#") {
			fs := strings.Split(line, "\t")
			require.Len(t, fs, 4, "%q", line)
			out = append(out, exporterSeries{fs[0], fs[1], fs[2], fs[3]})
		}
	}
	require.NoError(t, sc.Err())
	return out
}

// TestMetricsAsMemcachedExporter checks a real scrape against memcached_exporter's series, as listed from its
// source (the exporter itself is not served by the module proxy): every series leasecached's stats feed is
// there, with the exporter's labels and type (or gauge where the list says so), and every memcached_ series
// the endpoint sends is one of the exporter's.
func TestMetricsAsMemcachedExporter(t *testing.T) {
	d, url := startWithMetrics(t)
	rc := dialRaw(t, d)
	rep := rc.exchange([]byte(statsWorkload+"mn\r\n"), wholeWrite, sentinelReply, defaultReplyTimeout)
	require.True(t, bytes.HasSuffix(rep.data, sentinelReply))
	_, fams := scrape(t, url)

	listed := map[string]bool{}
	for _, s := range readExporterSeries(t) {
		listed[s.name] = true
		mf, ok := fams[s.name]
		if strings.HasPrefix(s.ours, "unfed") {
			assert.False(t, ok, "%s is listed unfed but sent", s.name)
			continue
		}
		if !assert.True(t, ok, "%s: missing", s.name) {
			continue
		}
		want := s.typ
		if s.ours == "gauge" {
			want = "gauge"
		}
		assert.Equal(t, want, strings.ToLower(mf.GetType().String()), s.name)
		for _, m := range mf.GetMetric() {
			var names []string
			for _, l := range m.GetLabel() {
				names = append(names, l.GetName())
			}
			wantLabels := s.labels
			if wantLabels == "-" {
				wantLabels = ""
			}
			assert.ElementsMatch(t, strings.Split(wantLabels, ","), strings.Split(strings.Join(names, ","), ","), s.name)
		}
	}
	for name := range fams {
		if strings.HasPrefix(name, "memcached_") {
			assert.True(t, listed[name], "%s is not a memcached_exporter series", name)
		}
	}
}

// exporterTextStats are the `stats` values that are not numbers, and memcached_exporter reads as text or
// not at all.
var exporterTextStats = map[string]bool{"version": true, "libevent": true, "leasecached_version": true}

// TestStatsSatisfyMemcachedExporter checks leasecached's stats replies by memcached_exporter's (v0.16.0)
// reading of them, after traffic that fills a slab class: its client splits each line into exactly three
// fields; it parses every value it maps as a number (rusage as seconds.microseconds, the crawler's two
// switches as yes/no); it marks the whole scrape down without cmd_set and the cas trio, or without cmd_set,
// cas_hits and cas_badval for a class of `stats slabs`; and mem_requested of a class in both `stats items`
// and `stats slabs` would be one series twice, which fails its scrape.
func TestStatsSatisfyMemcachedExporter(t *testing.T) {
	d := startLeasecached(t, "--grace", "1s", "--hold", "100ms")
	rc := dialRaw(t, d)
	rep := rc.exchange([]byte(statsWorkload+"mn\r\n"), wholeWrite, sentinelReply, defaultReplyTimeout)
	require.True(t, bytes.HasSuffix(rep.data, sentinelReply))

	for _, group := range []string{"", "items", "slabs"} {
		r := rc.exchange([]byte(strings.TrimSpace("stats "+group)+"\r\nmn\r\n"), wholeWrite, sentinelReply, defaultReplyTimeout)
		for _, line := range strings.Split(strings.TrimSuffix(string(r.data), "END\r\nMN\r\n"), "\r\n") {
			if line == "" {
				continue
			}
			f := strings.Split(line, " ")
			require.Len(t, f, 3, "stats %s: %q", group, line)
			name, v := f[1], f[2]
			switch {
			case exporterTextStats[name]:
			case name == "rusage_user" || name == "rusage_system":
				sec, usec, ok := strings.Cut(v, ".")
				_, err1 := strconv.ParseUint(sec, 10, 64)
				_, err2 := strconv.ParseUint(usec, 10, 64)
				assert.True(t, ok && err1 == nil && err2 == nil, "%s %q", name, v)
			default:
				_, err := strconv.ParseFloat(v, 64)
				assert.NoError(t, err, "stats %s: %q", group, line)
			}
		}
	}
	general := statsGroupOf(t, rc, "")
	for _, name := range []string{"cmd_set", "cas_misses", "cas_hits", "cas_badval"} {
		assert.Contains(t, general, name)
	}
	slabs, items := statsGroupOf(t, rc, "slabs"), statsGroupOf(t, rc, "items")
	classes := 0
	for name := range slabs {
		class, field, ok := strings.Cut(name, ":")
		if !ok || field != "chunk_size" {
			continue
		}
		classes++
		for _, f := range []string{"cmd_set", "cas_hits", "cas_badval"} {
			assert.Contains(t, slabs, class+":"+f)
		}
		if _, ok := items["items:"+class+":mem_requested"]; ok {
			assert.NotContains(t, slabs, class+":mem_requested", "mem_requested of class %s in both", class)
		}
	}
	require.Greater(t, classes, 0, "the workload filled no slab class")
	settings := statsGroupOf(t, rc, "settings")
	num(t, settings, "maxconns")
	if settings["lru_crawler"] == "yes" {
		for _, n := range []string{"lru_crawler_sleep", "lru_crawler_tocrawl", "hot_lru_pct", "warm_lru_pct", "hot_max_factor", "warm_max_factor"} {
			num(t, settings, n)
		}
		assert.Contains(t, []string{"yes", "no"}, settings["lru_maintainer_thread"])
	}
}

// TestMetricsBindFailure: a --metrics-listen address in use stops the daemon at start, status 1, with one
// line in memcached's words for a listener it cannot bind.
func TestMetricsBindFailure(t *testing.T) {
	requireLeasecached(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	port, err := freePort()
	require.NoError(t, err)
	_, stderr, code := runDaemonOnce(t, "-l", "127.0.0.1", "-p", strconv.Itoa(port), "--metrics-listen", busy.Addr().String())
	require.Equal(t, 1, code, stderr)
	require.Equal(t, "leasecached: failed to listen on metrics address "+busy.Addr().String()+": address already in use\n", stderr)
}

// TestMetricsScrapeUnderLoad scrapes while a client pipelines requests on every loop: the counters and the
// histograms' counts never go down from one scrape to the next, and the daemon (built with the race
// detector) reports no race between the scrapes and the event loops.
func TestMetricsScrapeUnderLoad(t *testing.T) {
	d, url := startWithMetrics(t)
	done := make(chan struct{})
	stopped := make(chan struct{}, 2)
	for c := range 2 { // two connections: with -t 2, likely one per loop
		rc := dialRaw(t, d)
		go func() {
			defer func() { stopped <- struct{}{} }()
			batch := []byte(strings.Repeat("set k"+strconv.Itoa(c)+" 0 0 1\r\nx\r\nget k"+strconv.Itoa(c)+"\r\nmg k v\r\n", 50) + "mn\r\n")
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
				select {
				case <-done:
					return
				default:
				}
				if rep := rc.exchange(batch, wholeWrite, sentinelReply, 5*time.Second); !bytes.HasSuffix(rep.data, sentinelReply) {
					return
				}
			}
		}()
	}
	last := map[string]float64{}
	for range 10 {
		time.Sleep(50 * time.Millisecond)
		_, fams := scrape(t, url)
		require.Equal(t, 1.0, seriesValue(t, fams, "memcached_up"))
		now := map[string]float64{
			"get hits": seriesValue(t, fams, "memcached_commands_total", "command", "get", "status", "hit"),
			"sets":     seriesValue(t, fams, "memcached_commands_total", "command", "set", "status", "hit"),
			"written":  seriesValue(t, fams, "memcached_written_bytes_total"),
		}
		if h := fams["leasecached_request_duration_seconds"]; h != nil {
			for _, m := range h.GetMetric() {
				now["timed "+m.GetLabel()[0].GetValue()] = float64(m.GetHistogram().GetSampleCount())
			}
		}
		for k, v := range last {
			assert.GreaterOrEqual(t, now[k], v, k)
		}
		last = now
	}
	close(done)
	for range 2 {
		select {
		case <-stopped:
		case <-time.After(10 * time.Second):
			t.Fatal("a client did not stop within 10s")
		}
	}
	assert.Greater(t, last["timed get"], 0.0, "%v", last)
	assert.Greater(t, last["timed mg"], 0.0, "%v", last)
}

// TestMetricsDataDir: with --data-dir the scrape has the restart and sync series, equal to the stats they
// come from, and promtool accepts them.
func TestMetricsDataDir(t *testing.T) {
	requireRestart(t)
	d, url := startWithMetrics(t, onDirArgs(t.TempDir(), "--data-sync", "1s")...)
	c := mustDialRS(t, d)
	mustStore(t, c, "set", "k", 0, 0, []byte("v"))
	waitSyncs(t, c, 1)
	body, fams := scrape(t, url)
	st, err := c.stats()
	require.NoError(t, err)
	for series, stat := range map[string]string{
		"leasecached_restart_loading": "restart_loading", "leasecached_restart_items_loaded": "restart_items_loaded",
		"leasecached_restart_items_dropped": "restart_items_dropped", "leasecached_data_sync_failures_total": "data_sync_failures",
		"leasecached_data_parked_pages": "data_parked_pages", "leasecached_data_kept_versions": "data_kept_versions",
		"leasecached_data_kept_dropped_total": "data_kept_dropped", "leasecached_restart_items_rolled_back": "restart_items_rolled_back",
	} {
		assert.Equal(t, float64(statInt(t, st, stat)), seriesValue(t, fams, series), series)
	}
	assert.Positive(t, seriesValue(t, fams, "leasecached_data_syncs_total"))
	assert.InDelta(t, float64(time.Now().Unix()), seriesValue(t, fams, "leasecached_data_last_sync_timestamp_seconds"), 5)
	promtool(t, body)
}
