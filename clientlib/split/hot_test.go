package split

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasecached/leasecached/clientlib"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHotKeysParse(t *testing.T) {
	st := map[string]map[string]string{
		"a": {"hotkeys_sample_rate": "16", "hotkeys_window_seconds": "1", "hotkey:1:key": "user%3A42", "hotkey:1:share": "40.00",
			"hotkey:2:key": "cold", "hotkey:2:share": "2.50", "hotkey:3:key": "big" + Suffix + "2", "hotkey:3:share": "12"},
		"b": {"hotkeys_sample_rate": "16", "hotkeys_window_seconds": "1"},
	}
	for _, tc := range []struct {
		name     string
		stats    map[string]map[string]string
		share    float64
		want     []string
		answered bool
	}{
		{"above the share; a copy counts for its key", st, 10, []string{"user:42", "big"}, true},
		{"a lower share takes more", st, 1, []string{"user:42", "big", "cold"}, true},
		{"no server answered", map[string]map[string]string{}, 10, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys, answered := hotKeys(tc.stats, tc.share)
			assert.Equal(t, tc.answered, answered)
			assert.Len(t, keys, len(tc.want))
			for _, k := range tc.want {
				assert.Contains(t, keys, k)
			}
		})
	}
}

// TestHotKeysSplit: with HotKeysPoll, a key leasecached lists in "stats hotkeys" is split while it is
// hot (its replicas capped at 2 s), and stops being split once the servers no longer list it.
func TestHotKeysSplit(t *testing.T) {
	_, servers := startFleet(t, 3)
	ctx := context.Background()
	c := newClient(t, clientlib.Config{Servers: servers, Distribution: clientlib.Ketama})
	s := newSplit(t, c, Config{HotKeysPoll: 100 * time.Millisecond})
	require.NoError(t, c.Set(ctx, &clientlib.Item{Key: "hot", Value: []byte("v")}))
	require.Equal(t, []string{"hot"}, s.Copies("hot"))

	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 1000000 && !stop.Load(); i++ {
			_, _ = s.Get(ctx, "hot")
		}
	}()
	defer func() { stop.Store(true); wg.Wait() }()
	require.Eventually(t, func() bool { return len(s.Copies("hot")) == 3 }, 5*time.Second, 20*time.Millisecond)
	names := s.Copies("hot")
	stop.Store(true)
	wg.Wait()
	require.NoError(t, s.Set(ctx, &clientlib.Item{Key: "hot", Value: []byte("w"), TTL: time.Minute}))
	for _, n := range names {
		assert.Equal(t, "w", value(t, c, n))
	}
	// Replicas of a hot-listed key live at most DefaultReplicaTTL, the key itself its own TTL.
	require.Eventually(t, func() bool { return value(t, c, names[1]) == "" && value(t, c, names[2]) == "" },
		DefaultReplicaTTL+1500*time.Millisecond, 50*time.Millisecond)
	assert.Equal(t, "w", value(t, c, "hot"))

	require.Eventually(t, func() bool { return len(s.Copies("hot")) == 1 }, 10*time.Second, 50*time.Millisecond,
		"still split after the load ended")
}
