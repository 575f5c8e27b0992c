package shard

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leasecached/leasecached/slab"
)

// drainTo drains page p of shard 0 (drainPage) and gives it to class to, under the shard lock.
func drainTo(t *testing.T, s *Store, p uint32, to int) {
	t.Helper()
	sh := &s.shards[0]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.drainPage(p, s.now(), true)
	require.NoError(t, sh.al.EndDrain(to))
}

// A page move keeps what CLOCK keeps (drain.go): one item per state an item can be in when its page
// goes, all in the first page of a full class, which then moves to another class.
func TestDrainPageKeepsWhatClockKeeps(t *testing.T) {
	const vlen = 3000
	s, clk := newStore(t, Config{MemoryLimit: 16 << 20, Shards: 1})
	sh := &s.shards[0]
	id, _ := s.classes.For(headerLen(layoutOf(0, 0, vlen), false) + len("item:000") + vlen)
	perPage := s.classes.PerPage(id)
	val := func(i int) []byte { return pattern(vlen, i) }
	key := func(i int) string { return fmt.Sprintf("item:%03d", i) }
	// Three full pages of the class, no free chunk: a rescue must evict in another page.
	for i := range 3 * perPage {
		exp := int64(0)
		if i == 4 {
			exp = 2 // expires before the move
		}
		require.Equal(t, Stored, s.Store(ModeSet, []byte(key(i)), 0, exp, val(i), 0))
	}
	sh.mu.Lock()
	sh.al.SetMaxPages(sh.al.OwnedPages()) // no page to take from the arena either
	sh.mu.Unlock()
	page := refOf(s, []byte(key(0))).Page()
	for i := range perPage {
		require.Equal(t, page, refOf(s, []byte(key(i))).Page(), "the first page holds the first items")
	}
	clearBit := func(i int) { // what the CLOCK hand does when it passes a visited item
		r := refOf(s, []byte(key(i)))
		sh.mu.Lock()
		sh.chunk(r)[offState] &^= flagVisited
		sh.mu.Unlock()
	}
	// item:003 was read, twice, long before the move, and the hand has passed it since.
	mustGet(t, s, key(3))
	mustGet(t, s, key(3))
	clearBit(3)
	clk.advance(5)
	mustGet(t, s, key(1)) // item:001 was read since the hand last passed: visited
	// item:002 is read several times a second, but the hand passed it a moment ago.
	mustGet(t, s, key(2))
	mustGet(t, s, key(2))
	clearBit(2)
	require.Equal(t, Deleted, s.Delete([]byte(key(5)))) // item:005 is a stale value kept for lease-get
	// item:000 and item:006... were never read.

	before := s.Stats()
	drainTo(t, s, page, 0)
	after := s.Stats()

	for _, i := range []int{1, 2} {
		v, _ := mustGet(t, s, key(i))
		assert.Equal(t, string(val(i)), v, "%s kept, intact", key(i))
		assert.NotEqual(t, page, refOf(s, []byte(key(i))).Page(), "%s moved out of the page", key(i))
	}
	for _, i := range []int{0, 3, 4, 5, 6, perPage - 1} {
		miss(t, s, key(i))
	}
	for i := perPage + 2; i < 3*perPage; i++ { // the rest of the class is untouched but for the two evicted
		v, _ := mustGet(t, s, key(i))
		require.Equal(t, string(val(i)), v)
	}
	miss(t, s, key(perPage))
	miss(t, s, key(perPage+1))
	// Evicted: the page's items but the two kept, the expired one and the stale value; and the two that
	// made room for the kept ones in the next page (under the hand).
	assert.Equal(t, uint64(perPage-4+2), after.Evictions-before.Evictions, "evictions")
	assert.Equal(t, uint64(2), after.SlabRescues-before.SlabRescues, "rescues")
	assert.Equal(t, 2, after.Classes[id].TotalPages, "pages left in the class")
	assert.Equal(t, 1, after.Classes[0].TotalPages, "pages of the class the page moved to")
	checkIndexInvariants(t, sh)
}

// A page move keeps chained items (values over slab.ChunkMax) whole: the heads and the parts of hot items
// move, every link is rewritten, and cold chained items sharing the pages are evicted whole.
func TestDrainPageMovesChainedItems(t *testing.T) {
	const vlen = 700_000 // a head in the largest class and one part in a smaller one
	s, _ := newStore(t, Config{MemoryLimit: 32 << 20, Shards: 1})
	sh := &s.shards[0]
	hot := func(i int) string { return fmt.Sprintf("hot:%d", i) }
	cold := func(i int) string { return fmt.Sprintf("cold:%d", i) }
	for i := range 4 {
		require.Equal(t, Stored, s.Store(ModeSet, []byte(hot(i)), 0, 0, pattern(vlen, i), 0))
		require.Equal(t, Stored, s.Store(ModeSet, []byte(cold(i)), 0, 0, pattern(vlen, -i), 0))
		mustGet(t, s, hot(i))
	}
	partOf := func(key string) slab.Ref {
		head := refOf(s, []byte(key))
		sh.mu.Lock()
		defer sh.mu.Unlock()
		b := sh.chunk(head)
		require.True(t, itemChained(b))
		return readRef(b[chainOff(b):])
	}
	headPage, partPage := refOf(s, []byte(hot(0))).Page(), partOf(hot(0)).Page()
	require.NotEqual(t, sh.al.ClassOf(refOf(s, []byte(hot(0)))), sh.al.ClassOf(partOf(hot(0))), "head and part in different classes")
	require.Equal(t, headPage, refOf(s, []byte(cold(0))).Page(), "hot:0 and cold:0 share their head's page")

	small := 0 // both pages go to the smallest class
	drainTo(t, s, headPage, small)
	drainTo(t, s, partPage, small)

	for i := range 4 {
		v, _ := mustGet(t, s, hot(i))
		require.True(t, bytes.Equal([]byte(v), pattern(vlen, i)), "%s intact", hot(i))
	}
	miss(t, s, cold(0))
	// Every part of every item names its head, and every chain ends.
	var heads [4]slab.Ref
	for i := range heads {
		heads[i] = refOf(s, []byte(hot(i)))
	}
	sh.mu.Lock()
	for i, head := range heads {
		b := sh.chunk(head)
		n := 0
		for r := readRef(b[chainOff(b):]); r != slab.NilRef; r = readRef(sh.chunk(r)[offPartNext:]) {
			require.Equal(t, head, readRef(sh.chunk(r)[offPartHead:]), "%s: a part names another head", hot(i))
			require.NotEqual(t, headPage, r.Page())
			require.NotEqual(t, partPage, r.Page())
			n++
		}
		require.Equal(t, 1, n, "%s: parts", hot(i))
	}
	sh.mu.Unlock()
	assert.Positive(t, s.Stats().SlabRescues)
	checkIndexInvariants(t, sh)
}
