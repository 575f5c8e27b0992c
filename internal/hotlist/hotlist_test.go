package hotlist

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   map[string]string
		want Listing
		err  string
	}{
		{"idle", map[string]string{SampleRate: "16", WindowSeconds: "1"}, Listing{SampleRate: 16, WindowSeconds: 1}, ""},
		{"two ranks, stops at the first gap", map[string]string{SampleRate: "4", WindowSeconds: "1",
			"hotkey:1:key": "a%20b", "hotkey:1:rate": "900", "hotkey:1:share": "52.10", "hotkey:1:reads": "800",
			"hotkey:1:writes": "100", "hotkey:2:key": "c", "hotkey:2:rate": "10", "hotkey:4:key": "d"},
			Listing{SampleRate: 4, WindowSeconds: 1, Keys: []Key{
				{Key: "a%20b", Rate: 900, Share: 52.1, Reads: 800, Writes: 100}, {Key: "c", Rate: 10}}}, ""},
		{"general stats, not a listing", map[string]string{"pid": "1"}, Listing{}, "no hotkeys_sample_rate"},
		{"bad header", map[string]string{SampleRate: "x", WindowSeconds: "1"}, Listing{}, "not a number"},
		{"bad share", map[string]string{SampleRate: "1", WindowSeconds: "1", "hotkey:1:key": "a",
			"hotkey:1:share": "lots"}, Listing{}, "hotkey:1:share"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.in)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
	k, err := Key{Key: "a%20b"}.Decoded()
	require.NoError(t, err)
	require.Equal(t, "a b", k)
}
