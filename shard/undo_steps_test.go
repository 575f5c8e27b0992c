//go:build undosteps

package shard

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRestartUndoSteps runs a set, an incr, a touch and an md I through the store, takes a crash image at
// each step of the change in place (undo.go, undoStep) and restarts on it: the item comes back whole, as it
// was before the change until the changed item is sealed and as the change left it after (a touch, which
// keeps the CAS, either way once both are sealed), never missing; the restart frees the undo chunk. Run
// with the undosteps build tag (make test does).
func TestRestartUndoSteps(t *testing.T) {
	type state struct {
		val   string
		info  Info
		stale bool
	}
	read := func(t *testing.T, s *Store, key string) state {
		t.Helper()
		v, info := mustGet(t, s, key)
		sh := s.shardOf(Hash([]byte(key)))
		sh.mu.Lock()
		_, b := sh.find(Hash([]byte(key)), []byte(key), s.now())
		stale := itemMeta(b)&metaStale != 0
		sh.mu.Unlock()
		return state{v, info, stale}
	}
	key := "undo:key"
	ops := []struct {
		name   string
		first  string
		exp    int64
		change func(s *Store)
	}{
		{"set", string(pattern(100, 1)), 0, func(s *Store) {
			require.Equal(t, Stored, s.Store(ModeSet, []byte(key), 0, 0, pattern(100, 2), 0))
		}},
		{"incr", "41", 0, func(s *Store) {
			_, r := s.Arith([]byte(key), true, 1)
			require.Equal(t, Stored, r)
		}},
		{"touch", "touched", 600, func(s *Store) { require.Equal(t, Touched, s.Touch([]byte(key), 1200)) }},
		{"md I", "invalidated", 0, func(s *Store) {
			require.Equal(t, Deleted, s.MetaDelete([]byte(key), &MetaDeleteRequest{Invalidate: true}))
		}},
	}
	for _, op := range ops {
		for step := undoCopied; step <= undoDone; step++ {
			t.Run(fmt.Sprintf("%s step %d", op.name, step), func(t *testing.T) {
				dir, c := t.TempDir(), newClock()
				cfg := Config{Shards: 1, StaleWindow: -1}
				s := persistStore(t, dir, c, cfg)
				set(t, s, "undo:other", "a neighbour")
				require.Equal(t, Stored, s.Store(ModeSet, []byte(key), 0, op.exp, []byte(op.first), 0))
				was := read(t, s, key)

				var img string
				steps := 0
				undoStepHook = func(_ *shard, at int) {
					steps++
					if at == step {
						img = crashImage(t, dir)
					}
				}
				op.change(s)
				undoStepHook = nil
				require.Equal(t, undoDone, steps, "the change went through every step once")
				now := read(t, s, key)

				s2 := persistStore(t, img, c, cfg)
				got := read(t, s2, key)
				want, dropped := was, 1 // the copy and the item, or the item torn
				switch {
				case step == undoSealed && op.name == "touch": // both sealed, one CAS: either
					if got.info.Exptime == now.info.Exptime {
						want = now
					}
				case step >= undoSealed:
					want = now // step undoSealed: the copy, with the smaller CAS, is dropped
				}
				if step == undoDone {
					dropped = 0
				}
				assert.Equal(t, want, got)
				v, _ := mustGet(t, s2, "undo:other")
				assert.Equal(t, "a neighbour", v)
				rs := s2.RestartStats()
				assert.EqualValues(t, 2, rs.Loaded)
				assert.EqualValues(t, dropped, rs.Dropped)
				assert.Zero(t, undoChunks(t, s2), "the restart freed the undo chunk")
				checkIndexInvariants(t, &s2.shards[0])
			})
		}
	}
}
