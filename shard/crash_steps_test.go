//go:build crashsteps

package shard

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leasecached/leasecached/slab"
)

// The tests here need the crashsteps build tag (make test runs them): crashStep is a hook in those builds.

// TestRestartUndoSteps runs a set, an incr, a touch, an md I, and an ma and md I with a TTL through the store, takes a crash image at
// each step of the change in place (undo.go, crashStep) and restarts on it: the item comes back whole, as it
// was before the change until the changed item is sealed and as the change left it after (a touch, which
// keeps the CAS, either way once both are sealed), never missing; the restart frees the undo chunk.
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
		// A command is one change: the value or mark and the exptime together.
		{"ma T", "41", 600, func(s *Store) {
			res := s.MetaArith([]byte(key), &MetaArithRequest{Incr: true, Delta: 1, Ops: ops(ExpTouch, 1200)})
			require.Equal(t, Stored, res.Result)
		}},
		{"md I T", "invalidated", 600, func(s *Store) {
			require.Equal(t, Deleted, s.MetaDelete([]byte(key), &MetaDeleteRequest{Invalidate: true, SetTTL: true, Exptime: 1200}))
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
				crashStepHook = func(_ *shard, at int) {
					if at > undoDone {
						return // a new item's steps: TestRestartNewHeadStep's
					}
					steps++
					if at == step {
						img = crashImage(t, dir)
					}
				}
				t.Cleanup(func() { crashStepHook = nil })
				op.change(s)
				crashStepHook = nil
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

// TestRestartNewHeadStep takes a crash image when a store has just made a free chunk the head of a new
// item (allocItem, step newHeadTaken), its header not yet written: the chunk still holds the key and value
// of the item deleted from it. The restart must not bring that item back, nor keep the new one, whose
// store was not answered (doc/design/restart.md rule 1). Free wrote the free-list link over the item's
// CAS, and allocItem clears the CAS before the state byte: the second case puts the CAS back in the chunk
// once the store has taken it (as for a chunk of a drained page, which Free only marks free), and fails
// without that clearing.
func TestRestartNewHeadStep(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mode    Mode
		keepCas bool // the chunk taken still holds the deleted item's CAS
	}{
		{"set", ModeSet, false},
		{"add", ModeAdd, false},
		{"set into a chunk that kept its item", ModeSet, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, c := t.TempDir(), newClock()
			cfg := Config{Shards: 1, StaleWindow: -1}
			s := persistStore(t, dir, c, cfg)
			sh := &s.shards[0]
			set(t, s, "new:other", "a neighbour")
			require.Equal(t, Stored, s.Store(ModeSet, []byte("new:gone"), 0, 0, pattern(100, 1), 0))
			sh.mu.Lock()
			gone := refLocked(sh, "new:gone")
			cas := itemCas(sh.chunk(gone))
			sh.mu.Unlock()
			require.Equal(t, Deleted, s.Delete([]byte("new:gone")))

			var img string
			took := false
			t.Cleanup(func() { crashStepHook = nil })
			crashStepHook = func(sh *shard, at int) {
				b := sh.chunk(gone)
				switch at {
				case newChunkTaken:
					took = b[offState] == slab.StateFree && string(itemKey(b)) == "new:gone"
					if took && tc.keepCas {
						le.PutUint64(b[offCas:], cas)
					}
				case newHeadTaken:
					if took {
						img = crashImage(t, dir)
					}
				}
			}
			// Same key length, flags, exptime and value length: the same layout and class, so the store
			// takes the chunk the delete freed (the free list is last in, first out).
			require.Equal(t, Stored, s.Store(tc.mode, []byte("new:here"), 0, 0, pattern(100, 2), 0))
			crashStepHook = nil
			require.True(t, took, "the store took the chunk the delete freed")
			require.NotEmpty(t, img)

			s2 := persistStore(t, img, c, cfg)
			_, _, ok := s2.Get(nil, []byte("new:gone"))
			assert.False(t, ok, "a deleted item came back")
			_, _, ok = s2.Get(nil, []byte("new:here"))
			assert.False(t, ok, "an item whose header was not written yet")
			v, _ := mustGet(t, s2, "new:other")
			assert.Equal(t, "a neighbour", v)
			assert.EqualValues(t, 1, s2.RestartStats().Loaded)
		})
	}
}

// TestRestartMoveStepCasLast: a move keeps the item's CAS (a touch that cannot change the item in place,
// moveItem; a page move, rescue), and the chunk it takes may hold an earlier version of the same item,
// sealed, with that CAS: the free list is last in, first out, so back-to-back moves swap an item between
// two chunks. The move writes the CAS last, after every other byte the seal covers (step movedButCas: the
// CAS still 0, the rest written), so a kill never leaves the earlier version whole; in each case the chunk
// taken is the one holding it, and a restart on the image at that step, and on the same image with the
// CAS stored as the next store does, keeps the exptime of the last answered touch.
func TestRestartMoveStepCasLast(t *testing.T) {
	const key = "move:key"
	cases := []struct {
		name string
		vlen int
		// setup stores the item and moves it once, so that the chunk it left holds its first version
		// and is the next the move under test takes; it returns that chunk and the move to make.
		setup func(t *testing.T, s *Store, val []byte) (slab.Ref, func())
	}{
		{"touch of an item over undoRoom", 2000, touchTwice},
		{"touch of a chained item", slab.ChunkMax + 100, touchTwice},
		{"page move", 2000, func(t *testing.T, s *Store, val []byte) (slab.Ref, func()) {
			sh := &s.shards[0]
			// Fill the class's first page, then take a chunk of a second page for the item.
			var fill []string
			for i := 0; ; i++ {
				require.Less(t, i, 10_000)
				k := fmt.Sprint("move:fill:", i)
				require.Equal(t, Stored, s.Store(ModeSet, []byte(k), 0, 3600, val, 0))
				if fill = append(fill, k); refOf(s, []byte(k)).Page() != refOf(s, []byte(fill[0])).Page() {
					break
				}
			}
			first := refOf(s, []byte(fill[0])).Page()
			require.Equal(t, Deleted, s.Delete([]byte(fill[len(fill)-1])))
			require.Equal(t, Stored, s.Store(ModeSet, []byte(key), 0, 3600, val, 0))
			a := refOf(s, []byte(key))
			require.NotEqual(t, first, a.Page())
			// Move the item into the first page (touch: a new chunk there), then read it, so that the
			// page move keeps it and takes the chunk it left.
			require.Equal(t, Deleted, s.Delete([]byte(fill[0])))
			require.Equal(t, Touched, s.Touch([]byte(key), 60))
			require.Equal(t, first, refOf(s, []byte(key)).Page())
			mustGet(t, s, key)
			return a, func() {
				sh.mu.Lock()
				defer sh.mu.Unlock()
				sh.drainPage(first, s.now(), true)
				require.NoError(t, sh.al.EndDrain(0))
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir, c := t.TempDir(), newClock()
			cfg := Config{Shards: 1, StaleWindow: -1}
			s := persistStore(t, dir, c, cfg)
			sh := &s.shards[0]
			val := pattern(tc.vlen, 7)
			a, move := tc.setup(t, s, val)
			_, answered := mustGet(t, s, key)

			var img string
			var seen []byte
			t.Cleanup(func() { crashStepHook = nil })
			crashStepHook = func(sh *shard, at int) {
				if at == movedButCas {
					b := sh.chunk(a)
					assert.Zero(t, itemCas(b), "the CAS is written last")
					seen = bytes.Clone(b)
					img = crashImage(t, dir)
				}
			}
			move()
			crashStepHook = nil
			require.NotEmpty(t, img, "the move went through movedButCas")
			require.Equal(t, a, refOf(s, []byte(key)), "the move took the chunk that holds the item's first version")
			sh.mu.Lock()
			b := sh.chunk(a)
			at := sealAt(b)
			assert.True(t, bytes.Equal(b[offMeta:at], seen[offMeta:at]), "everything the seal covers but the CAS was written before it")
			cas := itemCas(b)
			sh.mu.Unlock()

			for _, withCas := range []bool{false, true} {
				img := img
				if withCas { // the next store: the CAS
					img = crashImage(t, img)
					f, err := os.OpenFile(filepath.Join(img, "items"), os.O_RDWR, 0)
					require.NoError(t, err)
					_, err = f.WriteAt(le.AppendUint64(nil, cas), int64(a.Page())*slab.PageSize+int64(a.Offset())+offCas)
					require.NoError(t, err)
					require.NoError(t, f.Close())
				}
				s2 := persistStore(t, img, c, cfg)
				v, info := mustGet(t, s2, key)
				assert.Equal(t, string(val), v, "with the CAS: %v", withCas)
				assert.Equal(t, answered.Exptime, info.Exptime, "with the CAS: %v: the exptime of the last answered touch", withCas)
				s2.Close()
			}
		})
	}
}

// touchTwice stores the item with a long exptime and touches it with a shorter one, which moves it (too
// large for an undo copy, or chained), and returns the chunk it left and a touch with a longer exptime.
func touchTwice(t *testing.T, s *Store, val []byte) (slab.Ref, func()) {
	require.Equal(t, Stored, s.Store(ModeSet, []byte("move:key"), 0, 3600, val, 0))
	a := refOf(s, []byte("move:key"))
	require.Equal(t, Touched, s.Touch([]byte("move:key"), 60))
	require.NotEqual(t, a, refOf(s, []byte("move:key")), "the touch moved the item")
	return a, func() { require.Equal(t, Touched, s.Touch([]byte("move:key"), 7200)) }
}
