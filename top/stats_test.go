package top

import (
	"bufio"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadStats(t *testing.T) {
	cases := []struct {
		name   string
		in     string
		want   Stats
		errHas string
		server bool // the error is a *ServerError
	}{
		{"general", "STAT pid 1\r\nSTAT version 1.6.18\r\nSTAT rusage_user 0.1\r\nEND\r\n",
			Stats{"pid": "1", "version": "1.6.18", "rusage_user": "0.1"}, "", false},
		{"empty", "END\r\n", Stats{}, "", false},
		{"value with spaces", "STAT libevent 2.1 stable\r\nEND\r\n", Stats{"libevent": "2.1 stable"}, "", false},
		{"bare newlines", "STAT a 1\nEND\n", Stats{"a": "1"}, "", false},
		{"no value", "STAT a\r\nEND\r\n", Stats{"a": ""}, "", false},
		{"memcached's unknown group", "ERROR\r\n", nil, "server answered ERROR", true},
		{"client error", "CLIENT_ERROR bad command line format\r\n", nil, "CLIENT_ERROR", true},
		{"server error", "SERVER_ERROR out of memory\r\n", nil, "SERVER_ERROR", true},
		{"junk", "VALUE a 0 1\r\n", nil, "unexpected line", false},
		{"empty name", "STAT  1\r\nEND\r\n", nil, "malformed", false},
		{"cut short", "STAT a 1\r\n", nil, "EOF", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadStats(bufio.NewReader(strings.NewReader(tc.in)))
			if tc.errHas != "" {
				require.ErrorContains(t, err, tc.errHas)
				var se *ServerError
				assert.Equal(t, tc.server, errors.As(err, &se))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestReadStatsBounded(t *testing.T) {
	r := bufio.NewReader(strings.NewReader(strings.Repeat("STAT a 1\r\n", maxStatLines+2) + "END\r\n"))
	_, err := ReadStats(r)
	require.ErrorContains(t, err, "longer than")
}

func TestParseHotKeys(t *testing.T) {
	header := Stats{"hotkeys_sample_rate": "100", "hotkeys_window_seconds": "10"}
	with := func(extra Stats) Stats {
		s := Stats{}
		for k, v := range header {
			s[k] = v
		}
		for k, v := range extra {
			s[k] = v
		}
		return s
	}
	cases := []struct {
		name   string
		in     Stats
		want   HotKeys
		errHas string
	}{
		{"idle", header, HotKeys{SampleRate: 100, WindowSeconds: 10}, ""},
		{"two keys", with(Stats{
			"hotkey:1:key": "user%3A1", "hotkey:1:rate": "5000", "hotkey:1:share": "5.12", "hotkey:1:reads": "4900", "hotkey:1:writes": "100",
			"hotkey:2:key": "b", "hotkey:2:rate": "20", "hotkey:2:share": "0.02", "hotkey:2:reads": "0", "hotkey:2:writes": "20",
		}), HotKeys{SampleRate: 100, WindowSeconds: 10, Keys: []HotKey{
			{Key: "user%3A1", Rate: 5000, Share: 5.12, Reads: 4900, Writes: 100},
			{Key: "b", Rate: 20, Share: 0.02, Writes: 20},
		}}, ""},
		{"a gap ends the ranks", with(Stats{"hotkey:1:key": "a", "hotkey:3:key": "c"}),
			HotKeys{SampleRate: 100, WindowSeconds: 10, Keys: []HotKey{{Key: "a"}}}, ""},
		{"general stats, not hot keys", Stats{"pid": "1"}, HotKeys{}, "hotkeys_sample_rate"},
		{"no window", Stats{"hotkeys_sample_rate": "1"}, HotKeys{SampleRate: 1}, "hotkeys_window_seconds"},
		{"bad rate", with(Stats{"hotkey:1:key": "a", "hotkey:1:rate": "x"}), HotKeys{}, "hotkey:1:rate"},
		{"bad share", with(Stats{"hotkey:1:key": "a", "hotkey:1:share": "5%"}), HotKeys{}, "hotkey:1:share"},
		{"bad writes", with(Stats{"hotkey:1:key": "a", "hotkey:1:writes": "-1"}), HotKeys{}, "hotkey:1:writes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseHotKeys(tc.in)
			if tc.errHas != "" {
				require.ErrorContains(t, err, tc.errHas)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}
