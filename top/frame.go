package top

import (
	"strconv"
	"time"
)

// Value is a figure of a frame; OK is false when the server does not report it (shown as n/a).
type Value struct {
	V  float64
	OK bool
}

// Figure is a named Value; PerSecond says it is a rate rather than a gauge.
type Figure struct {
	Name      string
	Value     Value
	PerSecond bool
}

// Section is a group of figures a server may lack (memcached has no leases) or have switched off (grace and
// hold send their stats only while on): State is then "n/a" or "off" and Figures is empty.
type Section struct {
	State   string
	Figures []Figure
}

// Frame is what one redraw shows: rates over the interval between two snapshots, and gauges of the later.
type Frame struct {
	Addr     string
	Server   string        // "leasecached 1.2.3" or "memcached 1.6.18"
	Uptime   time.Duration // the server's
	Interval time.Duration // the rates' interval
	// SinceStart marks the first frame: with one snapshot only, its rates are averages since the server
	// started (as vmstat's first line).
	SinceStart bool

	Commands     []Figure // requests per second by command
	Total        Value    // their sum
	HitRatio     Value    // get hits over get hits plus misses in the interval, 0..1; not OK without gets
	GetHits      Value    // per second
	GetMisses    Value    // per second
	Evictions    Value    // per second
	Bytes        Value
	LimitBytes   Value
	Items        Value
	Conns        Value
	MaxConns     Value
	NewConns     Value // per second
	BytesRead    Value // per second
	BytesWritten Value // per second

	Leases Section
	Grace  Section
	Hold   Section

	Hot    HotKeys
	HotErr error
}

// command is one entry of the requests line: its rate is the sum of the counters' deltas.
type command struct {
	name     string
	counters []string
}

// commands are the requests line, from memcached's counters (cmd_get counts keys, as memcached counts
// them: a get of ten keys is ten).
var commands = []command{
	{"get", []string{"cmd_get"}},
	{"set", []string{"cmd_set"}},
	{"delete", []string{"delete_hits", "delete_misses"}},
	{"incr", []string{"incr_hits", "incr_misses"}},
	{"decr", []string{"decr_hits", "decr_misses"}},
	{"cas", []string{"cas_hits", "cas_misses", "cas_badval"}},
	{"touch", []string{"cmd_touch"}},
	{"meta", []string{"cmd_meta"}},
	{"flush", []string{"cmd_flush"}},
}

// figure describes one figure of a section: a counter shown as a rate, or a gauge.
type figure struct {
	name  string
	stat  string
	gauge bool
}

// The lease, grace and hold stats (doc/leases.md, "Statistics" and "Counters").
var (
	leaseFigures = []figure{
		{"grants", "lease_grants", false},
		{"hot misses", "lease_hot_misses", false},
		{"stale served", "lease_stale_served", false},
		{"sets stored", "lease_sets_stored", false},
		{"sets rejected", "lease_sets_rejected", false},
		{"invalidations", "lease_invalidations", false},
		{"outstanding", "lease_outstanding", true},
		{"stale items", "lease_stale_items", true},
	}
	graceFigures = []figure{
		{"hits", "get_grace_hits", false},
		{"refills", "grace_refills", false},
		{"lease lapses", "grace_lease_lapses", false},
	}
	holdFigures = []figure{
		{"parked", "hold_parked", false},
		{"filled", "hold_filled", false},
		{"timeouts", "hold_timeouts", false},
		{"cancelled", "hold_cancelled", false},
		{"refused", "hold_refused", false},
		{"waiting", "hold_waiting", true},
	}
)

// leasecachedMark is the stat only leasecached sends: a server without it has no leases, grace or hold.
const leasecachedMark = "leasecached_version"

// Compute makes the frame for cur, with rates over the interval since prev. A zero prev (the first poll)
// gives rates averaged over the server's uptime.
func Compute(addr string, prev, cur Snapshot) Frame {
	f := Frame{Addr: addr, Hot: cur.Hot, HotErr: cur.HotErr}
	st := cur.Stats
	up, _ := st.Uint("uptime")
	f.Uptime = time.Duration(up) * time.Second
	if v, ok := st[leasecachedMark]; ok {
		f.Server = "leasecached " + v
	} else {
		f.Server = "memcached " + st["version"]
	}
	r := rater{prev: prev.Stats, cur: st}
	if prev.Stats == nil {
		f.SinceStart = true
		f.Interval = f.Uptime
	} else {
		f.Interval = cur.At.Sub(prev.At)
	}
	r.seconds = f.Interval.Seconds()
	if r.seconds <= 0 {
		r.seconds = 1 // a server up for less than a second: its counts are about one second's
	}

	f.Total.OK = true
	for _, c := range commands {
		v := r.rate(c.counters...)
		f.Commands = append(f.Commands, Figure{Name: c.name, Value: v, PerSecond: true})
		if v.OK {
			f.Total.V += v.V
		}
	}
	f.GetHits, f.GetMisses = r.rate("get_hits"), r.rate("get_misses")
	if f.GetHits.OK && f.GetMisses.OK && f.GetHits.V+f.GetMisses.V > 0 {
		f.HitRatio = Value{f.GetHits.V / (f.GetHits.V + f.GetMisses.V), true}
	}
	f.Evictions = r.rate("evictions")
	f.Bytes, f.LimitBytes, f.Items = gauge(st, "bytes"), gauge(st, "limit_maxbytes"), gauge(st, "curr_items")
	f.Conns, f.MaxConns = gauge(st, "curr_connections"), gauge(st, "max_connections")
	f.NewConns = r.rate("total_connections")
	f.BytesRead, f.BytesWritten = r.rate("bytes_read"), r.rate("bytes_written")

	leasecached := st.Has(leasecachedMark)
	f.Leases = r.section(leasecached, leaseFigures)
	f.Grace = r.section(leasecached, graceFigures)
	f.Hold = r.section(leasecached, holdFigures)
	return f
}

// rater turns counters into rates over an interval.
type rater struct {
	prev, cur Stats
	seconds   float64
}

// rate is the summed counters' increase per second; not OK unless the server sends every one. A counter
// that went down (`stats reset`, a restarted server) counts from zero.
func (r rater) rate(names ...string) Value {
	var sum uint64
	for _, n := range names {
		c, ok := r.cur.Uint(n)
		if !ok {
			return Value{}
		}
		if p, ok := r.prev.Uint(n); ok && p <= c {
			c -= p
		}
		sum += c
	}
	return Value{float64(sum) / r.seconds, true}
}

// section fills a section: "n/a" on a server that is not leasecached, "off" when leasecached does not send
// the section's stats (grace and hold send theirs only while on).
func (r rater) section(leasecached bool, figs []figure) Section {
	if !leasecached {
		return Section{State: "n/a"}
	}
	if !r.cur.Has(figs[0].stat) {
		return Section{State: "off"}
	}
	var s Section
	for _, fg := range figs {
		v := gauge(r.cur, fg.stat)
		if !fg.gauge {
			v = r.rate(fg.stat)
		}
		s.Figures = append(s.Figures, Figure{Name: fg.name, Value: v, PerSecond: !fg.gauge})
	}
	return s
}

// gauge is a stat's value as it is; lease_outstanding and hold_waiting are signed in leasecached's output.
func gauge(st Stats, name string) Value {
	v, err := strconv.ParseFloat(st[name], 64)
	if err != nil {
		return Value{}
	}
	return Value{v, true}
}
