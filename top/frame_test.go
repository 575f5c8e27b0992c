package top

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// counters is a leasecached-like stats reply with every counter the frame reads set to base, plus changes.
func counters(base string, changes Stats) Stats {
	s := Stats{"uptime": "100", "version": "1.6.18"}
	for _, c := range commands {
		for _, n := range c.counters {
			s[n] = base
		}
	}
	for _, n := range []string{"get_hits", "get_misses", "evictions", "total_connections", "bytes_read", "bytes_written"} {
		s[n] = base
	}
	for k, v := range changes {
		s[k] = v
	}
	return s
}

func figureOf(t *testing.T, figs []Figure, name string) Value {
	t.Helper()
	for _, f := range figs {
		if f.Name == name {
			return f.Value
		}
	}
	t.Fatalf("no figure %q in %v", name, figs)
	return Value{}
}

func TestComputeRates(t *testing.T) {
	t0 := time.Unix(1000, 0)
	prev := Snapshot{At: t0, Stats: counters("1000", nil)}
	cur := Snapshot{At: t0.Add(2 * time.Second), Stats: counters("1000", Stats{
		"cmd_get": "1400", "get_hits": "1300", "get_misses": "1100", // 400 gets: 300 hits, 100 misses
		"cmd_set": "1010", "delete_hits": "1004", "delete_misses": "1002", "cas_badval": "1001",
		"evictions": "1050", "total_connections": "1003", "bytes_read": "3048",
		"bytes": "1048576", "limit_maxbytes": "67108864", "curr_items": "7", "curr_connections": "12", "max_connections": "1024",
	})}
	f := Compute("h:1", prev, cur)
	assert.False(t, f.SinceStart)
	assert.Equal(t, 2*time.Second, f.Interval)
	assert.Equal(t, "memcached 1.6.18", f.Server)
	assert.Equal(t, 100*time.Second, f.Uptime)
	cases := map[string]float64{"get": 200, "set": 5, "delete": 3, "cas": 0.5, "incr": 0, "flush": 0}
	for name, want := range cases {
		assert.Equal(t, Value{want, true}, figureOf(t, f.Commands, name), name)
	}
	assert.Equal(t, Value{208.5, true}, f.Total)
	assert.Equal(t, Value{0.75, true}, f.HitRatio)
	assert.Equal(t, Value{150, true}, f.GetHits)
	assert.Equal(t, Value{25, true}, f.Evictions)
	assert.Equal(t, Value{1.5, true}, f.NewConns)
	assert.Equal(t, Value{1024, true}, f.BytesRead)
	assert.Equal(t, Value{1 << 20, true}, f.Bytes)
	assert.Equal(t, Value{64 << 20, true}, f.LimitBytes)
	assert.Equal(t, Value{7, true}, f.Items)
	assert.Equal(t, Value{12, true}, f.Conns)
}

func TestComputeEdges(t *testing.T) {
	t0 := time.Unix(1000, 0)
	cases := []struct {
		name  string
		prev  Snapshot
		cur   Snapshot
		check func(t *testing.T, f Frame)
	}{
		{"first frame: averages since start", Snapshot{}, Snapshot{At: t0, Stats: counters("0", Stats{"cmd_get": "500", "uptime": "50"})},
			func(t *testing.T, f Frame) {
				assert.True(t, f.SinceStart)
				assert.Equal(t, Value{10, true}, figureOf(t, f.Commands, "get"))
			}},
		{"first frame of a server up for 0 s", Snapshot{}, Snapshot{At: t0, Stats: counters("0", Stats{"cmd_get": "3", "uptime": "0"})},
			func(t *testing.T, f Frame) { assert.Equal(t, Value{3, true}, figureOf(t, f.Commands, "get")) }},
		{"stats reset: a counter that went down counts from 0", Snapshot{At: t0, Stats: counters("1000", nil)},
			Snapshot{At: t0.Add(time.Second), Stats: counters("1000", Stats{"cmd_get": "40"})},
			func(t *testing.T, f Frame) { assert.Equal(t, Value{40, true}, figureOf(t, f.Commands, "get")) }},
		{"no gets: no hit ratio", Snapshot{At: t0, Stats: counters("5", nil)}, Snapshot{At: t0.Add(time.Second), Stats: counters("5", nil)},
			func(t *testing.T, f Frame) {
				assert.False(t, f.HitRatio.OK)
				assert.Equal(t, Value{0, true}, f.GetHits)
			}},
		{"a counter the server lacks is n/a, not 0", Snapshot{At: t0, Stats: Stats{"cmd_get": "1"}}, Snapshot{At: t0.Add(time.Second), Stats: Stats{"cmd_get": "3"}},
			func(t *testing.T, f Frame) {
				assert.Equal(t, Value{2, true}, figureOf(t, f.Commands, "get"))
				assert.False(t, figureOf(t, f.Commands, "delete").OK)
				assert.False(t, f.Evictions.OK)
				assert.False(t, f.Bytes.OK)
				assert.Equal(t, Value{2, true}, f.Total)
			}},
		{"memcached: no leases, grace or hold", Snapshot{}, Snapshot{At: t0, Stats: counters("0", nil)},
			func(t *testing.T, f Frame) {
				assert.Equal(t, Section{State: "n/a"}, f.Leases)
				assert.Equal(t, Section{State: "n/a"}, f.Grace)
				assert.Equal(t, Section{State: "n/a"}, f.Hold)
			}},
		{"leasecached with grace and hold off", Snapshot{}, Snapshot{At: t0, Stats: counters("0", Stats{
			"leasecached_version": "0.1.0", "lease_grants": "200", "lease_hot_misses": "0", "lease_outstanding": "-1"})},
			func(t *testing.T, f Frame) {
				assert.Equal(t, "leasecached 0.1.0", f.Server)
				assert.Empty(t, f.Leases.State)
				assert.Equal(t, Value{2, true}, figureOf(t, f.Leases.Figures, "grants"))
				assert.Equal(t, Value{-1, true}, figureOf(t, f.Leases.Figures, "outstanding"), "a gauge, as sent")
				assert.False(t, figureOf(t, f.Leases.Figures, "stale items").OK)
				assert.Equal(t, Section{State: "off"}, f.Grace)
				assert.Equal(t, Section{State: "off"}, f.Hold)
			}},
		{"leasecached with hold on", Snapshot{At: t0, Stats: Stats{"leasecached_version": "x", "hold_parked": "10", "hold_waiting": "4"}},
			Snapshot{At: t0.Add(4 * time.Second), Stats: Stats{"leasecached_version": "x", "hold_parked": "30", "hold_waiting": "3"}},
			func(t *testing.T, f Frame) {
				assert.Equal(t, Value{5, true}, figureOf(t, f.Hold.Figures, "parked"))
				assert.Equal(t, Value{3, true}, figureOf(t, f.Hold.Figures, "waiting"))
				assert.Equal(t, Section{State: "off"}, f.Grace)
			}},
		{"hot keys carried over", Snapshot{}, Snapshot{At: t0, Stats: Stats{}, Hot: HotKeys{SampleRate: 7}, HotErr: errors.New("x")},
			func(t *testing.T, f Frame) {
				assert.Equal(t, uint64(7), f.Hot.SampleRate)
				assert.EqualError(t, f.HotErr, "x")
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, Compute("h:1", tc.prev, tc.cur)) })
	}
}
