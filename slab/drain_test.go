package slab

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A draining page hands out nothing: the class allocates, sweeps and walks only its other pages while the
// owner empties it, and the page moves or goes back to the arena once its last chunk is free.
func TestDrainPage(t *testing.T) {
	for _, to := range []string{"another class", "the arena"} {
		t.Run(to, func(t *testing.T) {
			al := newTestAllocator(t, 3)
			c := al.Classes()
			id, _ := c.For(1000)
			per := c.PerPage(id)
			var refs []Ref
			for range 2*per + per/2 { // two full pages and half of a third, the one being carved
				r, ok := al.Alloc(id)
				require.True(t, ok)
				mark(al, r)
				refs = append(refs, r)
			}
			p := refs[0].Page()
			al.Free(refs[1]) // a free chunk of p is on the free list
			al.Free(refs[per+1])
			require.Error(t, al.EndDrain(0), "no drain begun")
			require.NoError(t, al.BeginDrain(p))
			require.Error(t, al.BeginDrain(refs[per].Page()), "one drain at a time")
			dp, used, ok := al.Draining()
			require.True(t, ok)
			assert.Equal(t, p, dp)
			assert.Equal(t, per-1, used)
			st := al.Stats(id)
			assert.Equal(t, 2, st.Pages)
			assert.Equal(t, per-1+per/2, st.UsedChunks)
			assert.Equal(t, 1, st.FreeChunks)

			// Allocations come from the other pages, the free list first, never from p.
			r, ok := al.Alloc(id)
			require.True(t, ok)
			assert.Equal(t, refs[per+1], r)
			mark(al, r)
			for {
				r, ok := al.Alloc(id)
				if !ok {
					break
				}
				require.NotEqual(t, p, r.Page(), "allocated from the draining page")
				mark(al, r)
			}
			// The hand and the cursor do not visit p either.
			for range 3 * per {
				require.NotEqual(t, p, al.Hand(id).Page(), "the hand visits the draining page")
			}
			var cur Cursor
			for r := al.Next(&cur); r != NilRef; r = al.Next(&cur) {
				require.NotEqual(t, p, r.Page(), "the cursor visits the draining page")
			}
			// Its chunks stay readable, and freeing one only marks it free.
			first, size, n := al.PageChunks(p)
			assert.Equal(t, per, n)
			assert.Equal(t, refs[0], first)
			assert.Equal(t, c.Size(id), size)
			assert.Equal(t, byte(1), al.Chunk(refs[2])[StateOffset])
			for i, r := range refs[:per] {
				if i == 1 {
					continue // already free
				}
				require.Error(t, al.EndDrain(0), "a used chunk is left")
				al.Free(r)
			}
			_, used, _ = al.Draining()
			assert.Zero(t, used)
			assert.Equal(t, 0, al.Stats(id).FreeChunks, "a chunk of the draining page was put on the free list")
			_, ok = al.Alloc(id)
			assert.False(t, ok, "the class allocated from the draining page")

			taken := al.Arena().PagesTaken()
			if to == "the arena" {
				require.NoError(t, al.EndDrain(-1))
				assert.Equal(t, taken-1, al.Arena().PagesTaken())
				assert.Equal(t, 2, al.OwnedPages())
			} else {
				other, _ := c.For(100)
				require.NoError(t, al.EndDrain(other))
				assert.Equal(t, taken, al.Arena().PagesTaken())
				r, ok := al.Alloc(other)
				require.True(t, ok)
				assert.Equal(t, p, r.Page())
			}
			_, _, ok = al.Draining()
			assert.False(t, ok)
			assert.Equal(t, 2, al.Stats(id).Pages)
		})
	}
}

// The page a class is still carving can drain too: only its carved chunks are its chunks, and it can go
// back to its own class.
func TestDrainCarvingPage(t *testing.T) {
	al := newTestAllocator(t, 1)
	id, _ := al.Classes().For(1000)
	var refs []Ref
	for range 3 {
		r, ok := al.Alloc(id)
		require.True(t, ok)
		mark(al, r)
		refs = append(refs, r)
	}
	p := refs[0].Page()
	require.NoError(t, al.BeginDrain(p))
	_, _, n := al.PageChunks(p)
	assert.Equal(t, 3, n)
	_, ok := al.Alloc(id)
	assert.False(t, ok, "allocated while the only page drains")
	for _, r := range refs {
		al.Free(r)
	}
	require.NoError(t, al.EndDrain(id))
	st := al.Stats(id)
	assert.Equal(t, 1, st.Pages)
	assert.Equal(t, 0, st.UsedChunks)
	for range al.Classes().PerPage(id) {
		r, ok := al.Alloc(id)
		require.True(t, ok)
		mark(al, r)
	}
	_, ok = al.Alloc(id)
	assert.False(t, ok)
}
