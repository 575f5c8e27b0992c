package metrics

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/leasecached/leasecached/protocol"
)

// everySeries feeds every table of mapping.go: each general, settings, items and slabs stat it maps, and
// hot keys.
func everySeries() fakeSource {
	var general, items, slabs, settings []string
	for _, s := range generalSeries {
		v := "1"
		if s.conv == timeval {
			v = "1.000001"
		}
		general = append(general, s.stat+" "+v)
	}
	for _, c := range commandSeries {
		general = append(general, c.stat+" 1")
	}
	general = append(general, "cmd_set 9", "version 1.6.18", "leasecached_version 0.1.0")
	for _, s := range append(settingsSeries, lruCrawlerSeries...) {
		v := "1"
		if s.conv == yesNo {
			v = "yes"
		}
		settings = append(settings, s.stat+" "+v)
	}
	for _, s := range itemSeries {
		items = append(items, "items:3:"+s.stat+" 2")
	}
	for _, h := range lruHitsSeries {
		items = append(items, "items:3:"+h.stat+" 2")
	}
	for _, s := range slabSeries {
		slabs = append(slabs, "3:"+s.stat+" 2")
	}
	for _, s := range slabTotalSeries {
		slabs = append(slabs, s.stat+" 2")
	}
	return fakeSource{"": stats(general...), "settings": stats(settings...), "items": stats(items...),
		"slabs": stats(slabs...), "hotkeys": stats("hotkeys_sample_rate 16", "hotkeys_window_seconds 10",
			"hotkey:1:key user%3A1", "hotkey:1:rate 10", "hotkey:1:share 1.50", "hotkey:1:reads 9", "hotkey:1:writes 1")}
}

// The endpoint serves every series the mapping has, and promtool (Debian's prometheus package; make
// test-deps) accepts them; Close stops it.
func TestEndpointServesWhatPromtoolAccepts(t *testing.T) {
	var lat Latencies
	l := lat.New()
	l.Observe(protocol.CmdGet, time.Microsecond)
	l.Observe(protocol.CmdLeaseSet, time.Millisecond)
	ep, err := Listen("127.0.0.1:0", everySeries(), &lat)
	require.NoError(t, err)
	go ep.Serve()
	defer ep.Close()

	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + ep.Addr().String() + Path)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	for _, want := range []string{"\nmemcached_up 1\n", `leasecached_hot_key_share_ratio{key="user%3A1"} 0.015`,
		`leasecached_request_duration_seconds_count{command="lease-set"} 1`, "\ngo_goroutines ", "\nprocess_cpu_seconds_total "} {
		require.Contains(t, string(body), want)
	}

	path, err := exec.LookPath("promtool")
	require.NoError(t, err, "promtool is not on PATH: `make test-deps` installs it (Debian's prometheus)")
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "promtool check metrics:\n%s", out)

	require.NoError(t, ep.Close())
	c, err := net.DialTimeout("tcp", ep.Addr().String(), time.Second)
	if err == nil {
		c.Close()
	}
	require.Error(t, err, "still accepting after Close")
}

func TestListenRefusesABusyAddress(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	_, err = Listen(busy.Addr().String(), fakeSource{}, nil)
	require.EqualError(t, err, "failed to listen on metrics address "+busy.Addr().String()+": address already in use")
	_, err = Listen("127.0.0.1:notaport", fakeSource{}, nil)
	require.True(t, strings.HasPrefix(err.Error(), "failed to listen on metrics address 127.0.0.1:notaport: "), err)
}
