package server

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leasecached/leasecached/metrics"
	bp "github.com/leasecached/leasecached/protocol/binprot"
)

// statNames are the names of a stats reply's lines, in order.
func statLineNames(b string) []string {
	var names []string
	for _, line := range strings.Split(b, "\r\n") {
		if f := strings.SplitN(line, " ", 3); len(f) == 3 && f[0] == "STAT" {
			names = append(names, f[1])
		}
	}
	return names
}

// StatsGroup answers what the stats command answers (it runs it), without END, and nothing for a group
// that is unknown or changes state.
func TestStatsGroupIsTheStatsCommand(t *testing.T) {
	s := newTestServer(t)
	cn := newConn(s, nil)
	fc := &fakeConn{}
	feed(cn, fc, "set k 0 0 5\r\nhello\r\nget k\r\n")
	for _, group := range []string{"", "settings", "items", "slabs"} {
		fc.out.Reset()
		cmd := strings.TrimSpace("stats " + group)
		got, _ := feed(cn, fc, cmd+"\r\n")
		require.True(t, strings.HasSuffix(got, "END\r\n"), "%s: %q", cmd, got)
		mine := string(s.StatsGroup(group))
		require.NotEmpty(t, mine, cmd)
		assert.NotContains(t, mine, "END", cmd)
		assert.Equal(t, statLineNames(got), statLineNames(mine), cmd)
		if group == "settings" || group == "slabs" {
			assert.Equal(t, got, mine+"END\r\n", cmd)
		}
	}
	require.Contains(t, string(s.StatsGroup("")), "STAT get_hits 1\r\n")
	for _, group := range []string{"reset", "detail", "cachedump", "nope", "sizes_enable", "conns"} {
		assert.Nil(t, s.StatsGroup(group), group)
	}
	// Still counted: the reset above did not run.
	require.Contains(t, string(s.StatsGroup("")), "STAT get_hits 1\r\n")
}

// requestCounts gathers the server's latency histograms: sampled requests per command.
func requestCounts(t *testing.T, s *Server) map[string]uint64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(metrics.NewCollector(s, s.latencies)))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	counts := map[string]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != "leasecached_request_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			counts[m.GetLabel()[0].GetValue()] = m.GetHistogram().GetSampleCount()
		}
	}
	return counts
}

// Without --metrics-listen no loop keeps timings; with it, about one request in metrics.SampleEvery of
// every protocol is timed, under its command.
func TestRequestTimings(t *testing.T) {
	off := newTestServer(t)
	require.Nil(t, off.latencies)
	require.Nil(t, newConn(off, nil).shared().lat)

	s := newTestServerConfig(t, func(c *Config) { c.MetricsListen = "127.0.0.1:0" })
	cn := newConn(s, s.newLoopShared(true))
	fc := &fakeConn{}
	const n = 100 * metrics.SampleEvery
	feed(cn, fc, "set k 0 0 1\r\nv\r\n")
	for range n / 16 {
		fc.out.Reset()
		feed(cn, fc, strings.Repeat("get k\r\n", 15)+"mg k v\r\n") // pipelined: serveAhead
	}
	for range n / 8 {
		fc.out.Reset()
		feed(cn, fc, "get k\r\n") // alone: serveOne
	}
	bin := newConn(s, s.newLoopShared(true))
	bfc := &fakeConn{}
	for range n / 4 {
		bfc.out.Reset()
		feed(bin, bfc, bpkt(bp.OpDelete, "nope", "", "", 0))
	}
	got := requestCounts(t, s)
	gets := n*15/16 + n/8
	assert.InDelta(t, gets/metrics.SampleEvery, got["get"], float64(gets/metrics.SampleEvery)/3, "%v", got)
	assert.Greater(t, got["mg"], uint64(0), "%v", got)
	assert.InDelta(t, n/4/metrics.SampleEvery, got["delete"], float64(n/4/metrics.SampleEvery)/2, "%v", got)
	assert.NotContains(t, got, "lease-get")
}

// With timings on, the request path still allocates nothing: pipelined, alone, and binary.
func TestServeWithMetricsAllocatesNothing(t *testing.T) {
	s := newTestServerConfig(t, func(c *Config) { c.MetricsListen = "127.0.0.1:0" })
	for _, in := range []string{
		strings.Repeat("get a\r\nget k\r\nget b c d\r\nlease-get k\r\n", 5) + "set k 0 0 5\r\nhello\r\nmg k v\r\n",
		"get k\r\n",
		bpkt(bp.OpGet, "k", "", "", 0),
	} {
		cn := newConn(s, s.newLoopShared(true))
		fc := &fakeConn{}
		serve := func() {
			fc.out.Reset()
			fc.in.WriteString(in)
			measuredServe(cn, fc)
		}
		serve()
		// Each run executes at least 2*SampleEvery requests, so at least one timed one: the sampler's
		// gaps are below that (AllocsPerRun rounds down, so a run of one request would hide a timed
		// request's allocation).
		runs := func() {
			for range 2 * metrics.SampleEvery {
				serve()
			}
		}
		assert.Zero(t, testing.AllocsPerRun(50, runs), "%q", in[:5])
	}
	require.NotEmpty(t, requestCounts(t, s)) // the runs above were timed
}

// Run serves --metrics-listen while it serves, and Stop closes it.
func TestRunServesMetricsUntilStop(t *testing.T) {
	s, result := startRun(t, Config{MetricsListen: "127.0.0.1:0"})
	addr := s.MetricsAddr()
	require.NotEmpty(t, addr)
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + addr + metrics.Path)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(body), "\nmemcached_up 1\n")
	require.Contains(t, string(body), "\nmemcached_max_connections 64\n")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, s.Stop(ctx))
	select {
	case err := <-result:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of Stop")
	}
	require.Empty(t, s.MetricsAddr())
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		c.Close()
	}
	require.Error(t, err, "the metrics endpoint still accepts after Stop")
}

// A --metrics-listen address that cannot be bound is Run's error, in memcached's words, before anything
// is served.
func TestRunRefusesABusyMetricsAddress(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	_, _, err = tryRun(t, Config{MetricsListen: busy.Addr().String()})
	require.Error(t, err)
	require.Equal(t, "failed to listen on metrics address "+busy.Addr().String()+": address already in use", err.Error())
}

// BenchmarkPipelinedGetSetMetrics is BenchmarkPipelinedGetSet with --metrics-listen on: the cost of the
// request timings (compare the two's ns/request).
func BenchmarkPipelinedGetSetMetrics(b *testing.B) {
	benchPipelinedGetSet(b, newTestServerConfig(b, func(c *Config) { c.MetricsListen = "127.0.0.1:0" }), 10)
}
