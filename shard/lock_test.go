package shard

import (
	"sync"
	"testing"
	"time"
)

// TestShardLockExcludes checks mutual exclusion under contention, both while callers spin (short holds)
// and once they have fallen back to parking (holds longer than lockSpin). Run with -race.
func TestShardLockExcludes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		workers int
		rounds  int
		hold    time.Duration
	}{
		{"short holds", 4, 2000, 0},
		{"holds past the spin", 3, 20, 2 * lockSpin},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var (
				l      shardLock
				inside int // guarded by l; the race detector flags any overlap
				total  int
				wg     sync.WaitGroup
			)
			for range tc.workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range tc.rounds {
						l.Lock()
						inside++
						if inside != 1 {
							t.Errorf("%d holders at once", inside)
						}
						if tc.hold > 0 {
							time.Sleep(tc.hold)
						}
						total++
						inside--
						l.Unlock()
					}
				}()
			}
			wg.Wait()
			if want := tc.workers * tc.rounds; total != want {
				t.Fatalf("total = %d, want %d", total, want)
			}
		})
	}
}
