// Package metrics is leasecached's native Prometheus endpoint (--metrics-listen): it reads the server's own
// `stats` output at scrape time and maps it to the series memcached_exporter produces, plus leasecached's
// lease, grace, hold and hot-key figures and its request latency histograms. See doc/design/metrics.md.
package metrics

import "bytes"

// stat is one `STAT name value` line.
type stat struct {
	name, value string
}

// parseStats reads the STAT lines of a stats reply (with or without its END); any other line is skipped.
// The value is everything after the name, as memcached_exporter's client reads `stats settings`.
func parseStats(b []byte) []stat {
	var out []stat
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		rest, ok := bytes.CutPrefix(line, []byte("STAT "))
		if !ok {
			continue
		}
		name, value, ok := bytes.Cut(rest, []byte(" "))
		if !ok || len(name) == 0 {
			continue
		}
		out = append(out, stat{string(name), string(value)})
	}
	return out
}

// statMap is parseStats' lines by name.
func statMap(stats []stat) map[string]string {
	m := make(map[string]string, len(stats))
	for _, s := range stats {
		m[s.name] = s.value
	}
	return m
}
