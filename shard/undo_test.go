package shard

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leasecached/leasecached/slab"
)

// undoChunks is how many chunks of the undo chunk's class s uses that hold no item.
func undoChunks(t *testing.T, s *Store) int {
	t.Helper()
	id, _ := s.classes.For(undoRoom)
	for _, c := range s.Stats().Classes {
		if c.ChunkSize == s.classes.Size(id) {
			return c.UsedChunks - int(c.Number)
		}
	}
	return 0
}

// TestRestartUndoSteps takes a crash image at each step of a change in place in a data directory (undo.go),
// a set and an incr, and restarts on it: the item comes back whole, with the old value until the changed
// item is sealed and the new one after, never missing; the restart frees the undo chunk.
func TestRestartUndoSteps(t *testing.T) {
	steps := []string{"copied", "rewritten", "sealed", "done"}
	for _, op := range []string{"set", "incr"} {
		for at, step := range steps {
			t.Run(op+" "+step, func(t *testing.T) {
				dir, c := t.TempDir(), newClock()
				cfg := Config{Shards: 1, StaleWindow: -1}
				s := persistStore(t, dir, c, cfg)
				key := []byte("undo:key")
				oldVal, newVal := string(pattern(100, 1)), string(pattern(100, 2))
				if op == "incr" {
					oldVal, newVal = "41", "42"
				}
				set(t, s, "undo:other", "a neighbour")
				set(t, s, string(key), oldVal)
				_, info := mustGet(t, s, string(key))

				sh := &s.shards[0]
				sh.mu.Lock()
				now := s.now()
				ref, b := sh.find(Hash(key), key, now)
				edit := func(b []byte) { // what the command writes, as storeItem and arith do
					if op == "incr" {
						copy(b[dataOff(b):], newVal)
						setItemCas(b, s.cas.Add(1))
						return
					}
					lay := layoutOf(0, 0, len(newVal))
					id, ok := sh.inPlaceClass(b, sh.room(headerLen(lay, false)+len(key)+len(newVal)))
					require.True(t, ok, "a set of the same size stays in its class")
					sh.overwrite(b, id, key, []byte(newVal), 0, 0, 0, lay, now)
				}
				var img string
				require.True(t, sh.saveUndo(b, now))
				if at == 0 {
					img = crashImage(t, dir)
				}
				edit(b)
				if at == 1 { // every byte written but the seal: a kill just before it
					img = crashImage(t, dir)
				}
				sh.seal(ref, b)
				if at == 2 {
					img = crashImage(t, dir)
				}
				sh.chunk(sh.undo)[offState] = kindUndo // the rest of sealInPlace
				if at == 3 {
					img = crashImage(t, dir)
				}
				sh.mu.Unlock()
				v, _ := mustGet(t, s, string(key))
				require.Equal(t, newVal, v)

				s2 := persistStore(t, img, c, cfg)
				want, dropped := oldVal, 1 // the copy and the item, or the rewritten item, torn
				if at >= 2 {
					want, dropped = newVal, 1 // the copy, with the smaller CAS
				}
				if at == 3 {
					dropped = 0
				}
				v, info2 := mustGet(t, s2, string(key))
				assert.Equal(t, want, v)
				if want == oldVal {
					assert.Equal(t, info.Cas, info2.Cas, "the old item's CAS")
				}
				v, _ = mustGet(t, s2, "undo:other")
				assert.Equal(t, "a neighbour", v)
				rs := s2.RestartStats()
				assert.EqualValues(t, 2, rs.Loaded)
				assert.EqualValues(t, dropped, rs.Dropped)
				assert.Zero(t, undoChunks(t, s2), "the restart freed the undo chunk")
				checkIndexInvariants(t, &s2.shards[0])
				set(t, s2, string(key), newVal) // the next change takes an undo chunk again, unless the item
				v, _ = mustGet(t, s2, string(key))
				assert.Equal(t, newVal, v)
				if at != 1 { // is the copy, in a chunk of the undo chunk's class: then it moves to its own
					assert.Equal(t, 1, undoChunks(t, s2))
				}
			})
		}
	}
}

// TestUndoChunk checks which changes in a data directory are made in place behind the undo chunk and which
// move the item, and that a page move of the undo chunk's page frees it.
func TestUndoChunk(t *testing.T) {
	s := persistStore(t, t.TempDir(), nil, Config{Shards: 1, StaleWindow: -1})
	sh := &s.shards[0]
	small := pattern(200, 1)
	over := pattern(undoRoom, 2) // with its header and seal, over undoRoom
	for _, tc := range []struct {
		name    string
		first   []byte
		change  func() Result
		inPlace bool
	}{
		{"set, same size", small, func() Result { return s.Store(ModeSet, []byte("k"), 0, 0, pattern(200, 3), 0) }, true},
		{"set over undoRoom", over, func() Result { return s.Store(ModeSet, []byte("k"), 0, 0, pattern(undoRoom, 4), 0) }, false},
		{"touch", small, func() Result { return s.Touch([]byte("k"), 0) }, true},
		{"touch adding an exptime", small, func() Result { return s.Touch([]byte("k"), 60) }, false},
		{"incr", []byte("10"), func() Result { _, r := s.Arith([]byte("k"), true, 5); return r }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, Stored, s.Store(ModeSet, []byte("k"), 0, 0, tc.first, 0))
			before := refOf(s, []byte("k"))
			_, info := mustGet(t, s, "k")
			require.Contains(t, []Result{Stored, Touched}, tc.change())
			assert.Equal(t, tc.inPlace, refOf(s, []byte("k")) == before, "in place")
			_, info2 := mustGet(t, s, "k")
			if tc.name != "touch" && tc.name != "touch adding an exptime" {
				assert.Greater(t, info2.Cas, info.Cas)
			}
			checkByteStats(t, s, s.Stats())
		})
	}
	require.Equal(t, 1, undoChunks(t, s))

	sh.mu.Lock()
	undo := sh.undo
	require.NotEqual(t, slab.NilRef, undo)
	sh.drainPage(undo.Page(), s.now())
	require.NoError(t, sh.al.EndDrain(0), "the drain left no chunk in use")
	assert.Equal(t, slab.NilRef, sh.undo)
	sh.mu.Unlock()
	assert.Equal(t, 0, undoChunks(t, s))
	for i := range 3 {
		v := fmt.Sprint("value ", i)
		set(t, s, "k", v)
		got, _ := mustGet(t, s, "k")
		assert.Equal(t, v, got)
	}
	assert.Equal(t, 1, undoChunks(t, s), "a new undo chunk")
}
