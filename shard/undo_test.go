package shard

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leasecached/leasecached/slab"
)

// undoChunks is how many used chunks of s hold no item: its undo chunks, when nothing is chained.
func undoChunks(t *testing.T, s *Store) int {
	t.Helper()
	n := 0
	for _, c := range s.Stats().Classes {
		n += c.UsedChunks - int(c.Number)
	}
	return n
}

// TestUndoChunk checks which changes in a data directory are made in place behind an undo chunk and which
// move the item, that each class changed in place has one undo chunk, and that a page move of an undo
// chunk's page frees it.
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
		undos   int // undo chunks after the change
	}{
		{"set, same size", small, func() Result { return s.Store(ModeSet, []byte("k"), 0, 0, pattern(200, 3), 0) }, true, 1},
		{"set over undoRoom", over, func() Result { return s.Store(ModeSet, []byte("k"), 0, 0, pattern(undoRoom, 4), 0) }, false, 1},
		{"touch", small, func() Result { return s.Touch([]byte("k"), 0) }, true, 1},
		{"touch adding an exptime", small, func() Result { return s.Touch([]byte("k"), 60) }, false, 1},
		{"incr, another class", []byte("10"), func() Result { _, r := s.Arith([]byte("k"), true, 5); return r }, true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, Stored, s.Store(ModeSet, []byte("k"), 0, 0, tc.first, 0))
			before := refOf(s, []byte("k"))
			_, info := mustGet(t, s, "k")
			require.Contains(t, []Result{Stored, Touched}, tc.change())
			assert.Equal(t, tc.inPlace, refOf(s, []byte("k")) == before, "in place")
			_, info2 := mustGet(t, s, "k")
			if !strings.HasPrefix(tc.name, "touch") {
				assert.Greater(t, info2.Cas, info.Cas)
			}
			assert.Equal(t, tc.undos, undoChunks(t, s))
			checkByteStats(t, s, s.Stats())
		})
	}

	require.Equal(t, Stored, s.Store(ModeSet, []byte("k"), 0, 0, small, 0))
	sh.mu.Lock()
	cls := sh.al.ClassOf(refLocked(sh, "k"))
	undo := sh.undo[cls].ref
	require.NotEqual(t, slab.NilRef, undo)
	sh.drainPage(undo.Page(), s.now(), true)
	require.NoError(t, sh.al.EndDrain(0), "the drain left no chunk in use")
	assert.Equal(t, slab.NilRef, sh.undo[cls].ref)
	sh.mu.Unlock()
	assert.Equal(t, 1, undoChunks(t, s), "the incr's class keeps its own")
	for i := range 3 {
		v := fmt.Sprint(string(small[:190]), i)
		set(t, s, "k", v)
		got, _ := mustGet(t, s, "k")
		assert.Equal(t, v, got)
	}
	assert.Equal(t, 2, undoChunks(t, s), "a new undo chunk")
}

// refLocked is refOf for a caller that holds sh's lock.
func refLocked(sh *shard, key string) slab.Ref {
	ref, _ := sh.find(Hash([]byte(key)), []byte(key), sh.st.now())
	return ref
}

// TestUndoChunkInFullCache: in a full cache, the first change in place of a class takes its undo chunk
// from the class, as a store would (one item evicted at most), not a page from another class.
func TestUndoChunkInFullCache(t *testing.T) {
	s := persistStore(t, t.TempDir(), nil, Config{MemoryLimit: 16 << 20, Shards: 1, StaleWindow: -1})
	var keys []string
	for i := 0; s.Stats().Evictions < 100; i++ {
		require.Less(t, i, 1_000_000, "the cache never filled")
		k := fmt.Sprint("fill:", i)
		set(t, s, k, string(pattern(100, i)))
		keys = append(keys, k)
	}
	k := keys[len(keys)-1]
	before := s.Stats()
	require.Equal(t, Stored, s.Store(ModeSet, []byte(k), 0, 0, pattern(100, -1), 0))
	after := s.Stats()
	assert.Equal(t, 1, undoChunks(t, s))
	assert.LessOrEqual(t, after.Evictions-before.Evictions, uint64(1), "evictions")
	assert.Equal(t, before.SlabsMoved, after.SlabsMoved, "pages moved")
	v, _ := mustGet(t, s, k)
	assert.Equal(t, string(pattern(100, -1)), v)
}
