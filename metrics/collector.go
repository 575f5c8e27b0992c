package metrics

import (
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Source is what the collector reads: the server's own stats replies (server.Server.StatsGroup), so that
// every number has one definition.
type Source interface {
	// StatsGroup returns the STAT lines `stats <group>` answers ("" for plain `stats`), or nil if the
	// server does not answer that group.
	StatsGroup(group string) []byte
}

// Collector is a prometheus.Collector over a Source and, if not nil, the loops' latencies. It is unchecked
// (Describe sends nothing): which series exist depends on what the stats hold (slab classes, hot keys,
// grace and hold only when on).
type Collector struct {
	src Source
	lat *Latencies
}

// NewCollector returns a collector of src's stats and lat's histograms (lat may be nil).
func NewCollector(src Source, lat *Latencies) *Collector { return &Collector{src: src, lat: lat} }

// Describe sends nothing: an unchecked collector.
func (c *Collector) Describe(chan<- *prometheus.Desc) {}

// Collect reads the stats groups once each and sends their series; memcached_up is 1 when the general
// stats were read and every mapped value parsed, as memcached_exporter reports it.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	e := &emitter{ch: ch}
	general := parseStats(c.src.StatsGroup(""))
	if len(general) == 0 {
		e.failed = true
	}
	e.general(statMap(general))
	e.settings(statMap(parseStats(c.src.StatsGroup("settings"))))
	e.items(parseStats(c.src.StatsGroup("items")))
	e.slabs(parseStats(c.src.StatsGroup("slabs")))
	e.hotKeys(parseStats(c.src.StatsGroup("hotkeys")))
	up := 1.0
	if e.failed {
		up = 0
	}
	ch <- prometheus.MustNewConstMetric(upDesc, gauge, up)
	if c.lat != nil {
		c.lat.collect(ch)
	}
}

// emitter sends series and remembers whether any mapped value failed to parse.
type emitter struct {
	ch     chan<- prometheus.Metric
	failed bool
}

// value reads v as conv says; a value that does not parse fails the scrape's memcached_up.
func (e *emitter) value(v string, c conv) (float64, bool) {
	var f float64
	var err error
	switch c {
	case timeval:
		sec, usec, ok := strings.Cut(v, ".")
		var s, u uint64
		if s, err = strconv.ParseUint(sec, 10, 63); err == nil && ok && len(usec) == 6 {
			u, err = strconv.ParseUint(usec, 10, 32)
			f = float64(s) + float64(u)/1e6
		} else if err == nil {
			err = strconv.ErrSyntax
		}
	case yesNo:
		switch v {
		case "yes":
			f = 1
		case "no":
		default:
			err = strconv.ErrSyntax
		}
	default:
		f, err = strconv.ParseFloat(v, 64)
	}
	if err != nil {
		e.failed = true
		return 0, false
	}
	return f, true
}

// send sends s's series from stats if its stat is there.
func (e *emitter) send(stats map[string]string, s series, labels ...string) {
	v, ok := stats[s.stat]
	if !ok {
		return
	}
	if f, ok := e.value(v, s.conv); ok {
		e.ch <- prometheus.MustNewConstMetric(s.desc, s.typ, f, labels...)
	}
}

func (e *emitter) general(s map[string]string) {
	if v, ok := s["version"]; ok {
		e.ch <- prometheus.MustNewConstMetric(versionDesc, gauge, 1, v)
	}
	if v, ok := s["leasecached_version"]; ok {
		e.ch <- prometheus.MustNewConstMetric(leasecachedVersionDesc, gauge, 1, v)
	}
	for _, sr := range generalSeries {
		e.send(s, sr)
	}
	for _, c := range commandSeries {
		e.send(s, series{c.stat, commandsDesc, counter, number}, c.command, c.status)
	}
	total, ok := s[setSeries.total]
	if !ok {
		return
	}
	set, ok := e.value(total, number)
	for _, name := range setSeries.less {
		v, have := s[name]
		if !have { // memcached_exporter fails the scrape without the cas trio
			e.failed, ok = true, false
			continue
		}
		f, parsed := e.value(v, number)
		set -= f
		ok = ok && parsed
	}
	if ok {
		e.ch <- prometheus.MustNewConstMetric(commandsDesc, counter, set, "set", "hit")
	}
}

func (e *emitter) settings(s map[string]string) {
	for _, sr := range settingsSeries {
		e.send(s, sr)
	}
	if s["lru_crawler"] == "yes" {
		for _, sr := range lruCrawlerSeries {
			e.send(s, sr)
		}
	}
}

var itemSeriesByField = seriesByStat(itemSeries)

func (e *emitter) items(stats []stat) {
	for _, st := range stats {
		rest, ok := strings.CutPrefix(st.name, "items:")
		if !ok {
			continue
		}
		class, field, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		if sr, ok := itemSeriesByField[field]; ok {
			e.send(map[string]string{field: st.value}, sr, class)
			continue
		}
		for _, h := range lruHitsSeries {
			if h.stat == field {
				e.send(map[string]string{field: st.value}, series{field, lruHitsDesc, counter, number}, class, h.lru)
			}
		}
	}
}

var slabSeriesByField = seriesByStat(slabSeries)

func (e *emitter) slabs(stats []stat) {
	totals := map[string]string{}
	for _, st := range stats {
		class, field, ok := strings.Cut(st.name, ":")
		if !ok {
			totals[st.name] = st.value
			continue
		}
		if sr, ok := slabSeriesByField[field]; ok {
			e.send(map[string]string{field: st.value}, sr, class)
		}
	}
	for _, sr := range slabTotalSeries {
		e.send(totals, sr)
	}
}

// hotKeys converts `stats hotkeys` (hotkey:<rank>:key, then that rank's figures) into series labelled
// with the key. A rank's figures before its key line, or without one, are skipped.
func (e *emitter) hotKeys(stats []stat) {
	header := map[string]string{}
	keys := map[string]string{} // rank -> key
	for _, st := range stats {
		rest, ok := strings.CutPrefix(st.name, "hotkey:")
		if !ok {
			header[st.name] = st.value
			continue
		}
		rank, field, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		if field == "key" {
			keys[rank] = st.value
			continue
		}
		key, ok := keys[rank]
		if !ok {
			continue
		}
		for _, f := range hotKeyFields {
			if f.field != field {
				continue
			}
			if v, ok := e.value(st.value, number); ok {
				e.ch <- prometheus.MustNewConstMetric(f.desc, gauge, v*f.scale, key)
			}
		}
	}
	for _, sr := range hotKeysHeader {
		e.send(header, sr)
	}
}

func seriesByStat(ss []series) map[string]series {
	m := make(map[string]series, len(ss))
	for _, s := range ss {
		m[s.stat] = s
	}
	return m
}
