package shard

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/leasecached/leasecached/internal/tmpfstest"
	"github.com/stretchr/testify/require"
)

// A full cache whose load moves between size classes (page moves, evictions, kept versions moved with
// their pages or freed past their share), synced twice after each of four rounds of changes and not after
// a fifth, with a live copy and with DIR mapped: DIR as a reboot finds it (the live copy gone; mapped, the
// page cache as written) serves no key a value older than the one it had after the last synced round,
// though the versions that round kept are still there (their release had not run).
func TestRestartFullCacheAfterRoundsOfChanges(t *testing.T) {
	for _, live := range []bool{true, false} {
		t.Run(map[bool]string{true: "live copy", false: "DIR mapped"}[live], func(t *testing.T) {
			dir, c := t.TempDir(), newClock()
			cfg := Config{MemoryLimit: 16 << 20, Shards: 1, DataSync: time.Hour, persistTick: time.Hour}
			if live {
				cfg.DataLive = tmpfstest.Dir(t, "lc-shard-live-")
			}
			s := persistStore(t, dir, c, cfg)
			rng := rand.New(rand.NewPCG(9, 9))
			const n = 6000
			key := func(i int) []byte { return fmt.Appendf(nil, "k%d", i) }
			hist := make([][]string, n)
			for i := range hist {
				hist[i] = []string{""}
			}
			var markAt []int
			for round := range 5 {
				for range 2500 {
					i := rng.IntN(n)
					if rng.IntN(4) == 0 {
						s.Delete(key(i))
						hist[i] = append(hist[i], "")
						continue
					}
					size := 2000 + rng.IntN(4000)
					if round%2 == 0 {
						size = 100 + rng.IntN(500)
					}
					if i%997 == 0 {
						size = 300_000 + rng.IntN(1000)
					}
					v := pattern(size, rng.IntN(1<<20))
					if s.Store(ModeSet, key(i), 0, 0, v, 0) == Stored {
						hist[i] = append(hist[i], string(v))
					}
				}
				if round == 4 {
					break
				}
				require.True(t, s.persist.sync())
				require.True(t, s.persist.sync())
				if round < 3 { // after the last one the versions its changes kept stay, as a kill may leave them
					s.releaseSynced()
				}
				markAt = make([]int, n)
				for i := range n {
					markAt[i] = len(hist[i]) - 1
				}
			}
			rs, st := s.RestartStats(), s.Stats()
			t.Logf("kept %d, dropped early %d, evictions %d, pages moved %d", rs.KeptVersions, rs.KeptDropped,
				st.Evictions, st.SlabsMoved)
			require.Positive(t, st.SlabsMoved)
			require.Positive(t, st.Evictions)
			img := rebootedImage(dirImage(t, dir))
			s.Close()
			d := t.TempDir()
			for name, b := range img {
				require.NoError(t, os.WriteFile(filepath.Join(d, name), b, 0o600))
			}
			cfg2 := cfg
			if live {
				cfg2.DataLive = tmpfstest.Dir(t, "lc-shard-live2-")
			}
			s2 := persistStore(t, d, c, cfg2)
			bad := 0
			for i := range n {
				got, _, ok := s2.Get(nil, key(i))
				if !ok {
					continue
				}
				if !slices.Contains(hist[i][markAt[i]:], string(got)) {
					bad++
					t.Logf("%s: a value it held before the last synced round only: %v", key(i),
						slices.Contains(hist[i], string(got)))
				}
			}
			require.Zero(t, bad, "%+v", s2.RestartStats())
		})
	}
}
