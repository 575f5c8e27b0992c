package top

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func leasecachedFrame() Frame {
	t0 := time.Unix(1000, 0)
	prev := Snapshot{At: t0, Stats: counters("0", Stats{"leasecached_version": "0.1.0", "lease_grants": "0", "get_grace_hits": "0"})}
	cur := Snapshot{At: t0.Add(time.Second), Stats: counters("0", Stats{
		"leasecached_version": "0.1.0", "cmd_get": "1234", "get_hits": "1000", "get_misses": "234", "cmd_set": "7",
		"bytes": "33554432", "limit_maxbytes": "67108864", "curr_items": "99", "curr_connections": "3", "max_connections": "1024",
		"lease_grants": "12", "lease_outstanding": "2", "get_grace_hits": "5", "evictions": "0",
	}), Hot: HotKeys{SampleRate: 100, WindowSeconds: 10, Keys: []HotKey{
		{Key: "hot%20one", Rate: 5000, Share: 5.12, Reads: 4900, Writes: 100},
		{Key: "key-two", Rate: 50, Share: 0.05, Reads: 50},
		{Key: "key-three", Rate: 5, Share: 0.01, Writes: 5},
	}}}
	return Compute("127.0.0.1:11211", prev, cur)
}

func TestRender(t *testing.T) {
	lc := leasecachedFrame()
	mc := Compute("127.0.0.1:11311", Snapshot{}, Snapshot{At: time.Unix(1, 0),
		Stats: counters("0", Stats{"bytes": "0", "limit_maxbytes": "0"}), HotErr: &ServerError{Line: "ERROR"}})
	cases := []struct {
		name     string
		f        Frame
		width    int
		maxLines int
		has      []string // lines (whole) or parts of lines, in this order
		hasNot   []string
	}{
		{"leasecached", lc, 100, 0, []string{
			"leasecached 0.1.0 at 127.0.0.1:11211, up 1m40s, rates over 1s",
			"requests   total 1241/s  get 1234/s  set 7/s",
			"hit ratio  81.0%  hits 1000/s  misses 234/s",
			"evictions  0/s",
			"memory     32.0 MiB of 64.0 MiB (50.0%)  [###############...............]  items 99",
			"conns      3 of 1024  new 0/s",
			"leases     grants 12/s  hot misses n/a",
			"outstanding 2",
			"grace      hits 5/s  refills n/a",
			"hold       off",
			"hot keys: sampled 1 in 100, rates over 10 s",
			"  #    req/s   share  reads/s writes/s  key",
			"  1     5000   5.12%     4900      100  hot one",
			"  3        5   0.01%        0        5  key-three",
		}, []string{"n/a  n/a"}},
		{"memcached", mc, 80, 0, []string{
			"memcached 1.6.18 at 127.0.0.1:11311, up 1m40s, rates since start",
			"hit ratio  - (no gets)",
			"memory     0 B of 0 B  items n/a",
			"leases     n/a", "grace      n/a", "hold       n/a",
			"hot keys: not available (the server answered ERROR)",
		}, []string{"#"}},
		{"few lines: fewer hot keys, at least one", lc, 100, 5, []string{"  1     5000"}, []string{"key-two", "key-three"}},
		{"lines enough for two", lc, 100, len(Render(lc, 100, 0)) - 1, []string{"key-two"}, []string{"key-three"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lines := Render(tc.f, tc.width, tc.maxLines)
			text := strings.Join(lines, "\n")
			at := 0
			for _, want := range tc.has {
				i := strings.Index(text[at:], want)
				require.GreaterOrEqual(t, i, 0, "%q missing (in order) from:\n%s", want, text)
				at += i
			}
			for _, not := range tc.hasNot {
				assert.NotContains(t, text, not)
			}
			for _, l := range lines {
				assert.LessOrEqual(t, len(l), tc.width, "line %q", l)
			}
		})
	}
}

// Every width from the narrowest up: no line is wider, and nothing but the header is cut (fields wrap).
func TestRenderWidths(t *testing.T) {
	f := leasecachedFrame()
	for width := 10; width <= 200; width++ {
		lines := Render(f, width, 0)
		w := max(width, minWidth)
		for _, l := range lines {
			require.LessOrEqual(t, len(l), w, "width %d: %q", width, l)
		}
		text := strings.Join(lines, "\n")
		for _, part := range []string{"get 1234/s", "flush 0/s", "items 99", "stale items n/a", "lease lapses n/a", "hot one"} {
			require.Contains(t, text, part, "width %d", width)
		}
	}
}

// Nothing from the server reaches the terminal as a control sequence.
func TestRenderCleans(t *testing.T) {
	f := Compute("h:1", Snapshot{}, Snapshot{Stats: Stats{"version": "1\x1b[2J", "leasecached_version": "\r\xff"},
		Hot: HotKeys{Keys: []HotKey{{Key: "k\x1b]0;x\x07"}}}, HotErr: nil})
	text := Text(f, 80, 0)
	for i := 0; i < len(text); i++ {
		c := text[i]
		require.True(t, c == '\n' || (c >= 0x20 && c <= 0x7e), "byte %#x at %d in %q", c, i, text)
	}
	assert.Contains(t, text, "leasecached ??")
	assert.Contains(t, text, "k?]0;x?")
	f.HotErr = &ServerError{Line: "SERVER_ERROR \x1b"}
	assert.Contains(t, Text(f, 80, 0), "hot keys: not available (the server answered SERVER_ERROR ?)")
}

func TestFormat(t *testing.T) {
	cases := []struct{ got, want string }{
		{formatValue(Value{}, true), "n/a"},
		{formatValue(Value{0, true}, true), "0/s"},
		{formatValue(Value{0.5, true}, true), "0.5/s"},
		{formatValue(Value{9.96, true}, false), "10.0"},
		{formatValue(Value{12.6, true}, false), "13"},
		{formatValue(Value{-1, true}, false), "-1"},
		{formatBytes(Value{1023, true}, false), "1023 B"},
		{formatBytes(Value{1536, true}, true), "1.5 KiB/s"},
		{formatBytes(Value{64 << 30, true}, false), "64.0 GiB"},
		{formatBytes(Value{}, false), "n/a"},
		{displayKey("top%3Ahot"), "top:hot"},
		{displayKey("a%20b%25"), "a b%"},
		{displayKey("a+b"), "a+b"},
		{displayKey("%C3%A9t%C3%A9"), "%C3%A9t%C3%A9"}, // not ASCII: as sent
		{displayKey("%1B%5B2J"), "%1B%5B2J"},           // a control sequence: as sent
		{displayKey("bad%zz"), "bad%zz"},
		{displayKey("k\x1b"), "k?"},
		{formatUptime(59 * time.Second), "59s"},
		{formatUptime(25*time.Hour + 5*time.Second), "1d1h0m5s"},
		{formatUptime(76 * time.Hour), "3d4h0m0s"},
	}
	for i, tc := range cases {
		assert.Equal(t, tc.want, tc.got, fmt.Sprint(i))
	}
}
