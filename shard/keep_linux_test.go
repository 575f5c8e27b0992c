package shard

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/leasecached/leasecached/slab"
	"github.com/stretchr/testify/require"
)

// keepStore opens a store on a new data directory mapped and synced periodically, where changes keep the
// versions they replace until a sync (keep.go); the test syncs itself (syncKept).
func keepStore(t *testing.T) (s *Store, dir string, c *clock) {
	t.Helper()
	dir, c = t.TempDir(), newClock()
	if slab.OnTmpfs(dir) {
		t.Skip("versions are kept only where syncs write to a disk, and the test's directory is on tmpfs")
	}
	s = persistStore(t, dir, c, keepConfig())
	require.NotNil(t, s.shards[0].kept)
	return s, dir, c
}

func keepConfig() Config {
	return Config{MemoryLimit: 32 << 20, Shards: 1, DataSync: time.Hour, persistTick: time.Hour}
}

// syncKept syncs s as persistLoop does: the sync, then what it released.
func syncKept(t *testing.T, s *Store) {
	t.Helper()
	require.True(t, s.persist.sync())
	s.releaseSynced()
}

// spanningKeys stores n items of value (key i: "k:%05d") with a far exptime and returns one key whose
// chunk spans two disk blocks and one whose chunk does not.
func spanningKeys(t *testing.T, s *Store, n int, value []byte) (spans, within string) {
	t.Helper()
	for i := range n {
		k := fmt.Sprintf("k:%05d", i)
		require.Equal(t, Stored, s.Store(ModeSet, []byte(k), 0, 3600, value, 0))
		r := refOf(s, []byte(k))
		start, size := int(r.Offset()), len(s.shards[0].chunk(r))
		if start/diskBlock != (start+size-1)/diskBlock {
			spans = k
		} else {
			within = k
		}
	}
	require.NotEmpty(t, spans)
	require.NotEmpty(t, within)
	return spans, within
}

// A change keeps the version it replaces until a sync begun after it has finished, one version a key a
// sync interval; a delete keeps nothing; an item within one disk block changes in place and keeps nothing,
// one that spans two moves to a new chunk the first time its key changes after a sync.
func TestKeptVersionsUntilSync(t *testing.T) {
	big := pattern(3000, 1)
	for _, tc := range []struct {
		name string
		key  func(spans, within string) string
		// change is made twice between two syncs, then once more after one; kept is how many versions the
		// first keeps, moved whether it moves the item to a new chunk. The third keeps one again if the
		// change writes a new chunk whatever the item's (always), or its chunk spans two blocks now.
		change func(s *Store, k string)
		kept   int64
		moved  bool
		always bool
	}{
		{"set into another class", func(spans, _ string) string { return spans },
			func(s *Store, k string) { s.Store(ModeSet, []byte(k), 0, 3600, append(big, k...), 0) }, 1, true, true},
		{"set a chained value", func(spans, _ string) string { return spans },
			func(s *Store, k string) { s.Store(ModeSet, []byte(k), 0, 3600, pattern(700_000, len(k)), 0) }, 1, true, true},
		{"set, spanning blocks", func(spans, _ string) string { return spans },
			func(s *Store, k string) { s.Store(ModeSet, []byte(k), 0, 3600, []byte("54321"), 0) }, 1, true, false},
		{"set, within a block", func(_, within string) string { return within },
			func(s *Store, k string) { s.Store(ModeSet, []byte(k), 0, 3600, []byte("54321"), 0) }, 0, false, false},
		{"touch, spanning blocks", func(spans, _ string) string { return spans },
			func(s *Store, k string) { s.Touch([]byte(k), 7200) }, 1, true, false},
		{"incr, spanning blocks", func(spans, _ string) string { return spans },
			func(s *Store, k string) { s.Arith([]byte(k), true, 1) }, 1, true, false},
		{"incr, within a block", func(_, within string) string { return within },
			func(s *Store, k string) { s.Arith([]byte(k), true, 1) }, 0, false, false},
		{"delete", func(spans, _ string) string { return spans },
			func(s *Store, k string) { s.Delete([]byte(k)) }, 0, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _, _ := keepStore(t)
			k := tc.key(spanningKeys(t, s, 400, []byte("12345")))
			syncKept(t, s)
			before := refOf(s, []byte(k))
			tc.change(s, k)
			require.Equal(t, tc.kept, s.RestartStats().KeptVersions, "kept by the first change")
			if after := refOf(s, []byte(k)); after != slab.NilRef {
				require.Equal(t, tc.moved, after != before, "moved to a new chunk")
			}
			tc.change(s, k)
			require.Equal(t, tc.kept, s.RestartStats().KeptVersions, "the second change keeps no more")
			syncKept(t, s)
			require.Zero(t, s.RestartStats().KeptVersions, "released by a sync begun after the changes")
			again := tc.kept
			if r := refOf(s, []byte(k)); !tc.always && r != slab.NilRef {
				start, size := int(r.Offset()), len(s.shards[0].chunk(r))
				if start/diskBlock == (start+size-1)/diskBlock {
					again = 0
				}
			}
			tc.change(s, k)
			require.Equal(t, again, s.RestartStats().KeptVersions, "kept again after the sync")
		})
	}
}

// A power cut in the middle of a sync (or of the kernel's writeback) leaves on disk any mix of the blocks
// as the last sync wrote them and as written since (restart.md rule 9): a key changed since comes back
// with a value it had from that sync on, never lost, whichever blocks made it; a key nothing changed comes
// back exactly. The images are DIR after a sync and after changes of every kind since (some keys changed
// twice, some deleted), mixed block by block, each as a start after a reboot finds it.
func TestRestartKeepsChangedKeysAfterPowerCut(t *testing.T) {
	s, dir, c := keepStore(t)
	const n = 3000
	key := func(i int) []byte { return fmt.Appendf(nil, "key:%05d", i) }
	// history is every value a key held from the sync on (the first is the synced one); "" is absent.
	history := make([][]string, n)
	set := func(i int, v []byte) {
		require.Equal(t, Stored, s.Store(ModeSet, key(i), 0, 3600, v, 0))
		history[i] = append(history[i], string(v))
	}
	chained := func(i int) bool { return i%500 == 499 }
	for i := range n {
		switch {
		case chained(i):
			set(i, pattern(600_000, i))
		case i%7 == 6:
			set(i, pattern(300+i%200, i)) // a larger class
		default:
			set(i, strconv.AppendInt(nil, int64(1000+i), 10))
		}
	}
	syncKept(t, s)
	for i := range history {
		history[i] = history[i][len(history[i])-1:]
	}
	synced := rebootedImage(dirImage(t, dir))
	rng := rand.New(rand.NewPCG(3, 3))
	changed := 0
	for i := range n {
		for range 1 + i%2 { // every other key changes twice
			v, _, ok := s.Get(nil, key(i))
			switch rng.IntN(6) {
			case 0: // untouched
				continue
			case 1:
				if chained(i) {
					set(i, pattern(600_000+rng.IntN(1000), i+n))
				} else {
					set(i, pattern(700+rng.IntN(1000), i+n)) // another class
				}
			case 2:
				set(i, strconv.AppendInt(nil, int64(rng.IntN(9000)+1000), 10)) // the same class, as a rule
			case 3:
				if ok {
					require.Equal(t, Touched, s.Touch(key(i), 7200))
					history[i] = append(history[i], string(v))
				}
			case 4:
				if _, res := s.Arith(key(i), true, 1); res == Stored {
					got, _, _ := s.Get(nil, key(i))
					history[i] = append(history[i], string(got))
				}
			case 5:
				s.Delete(key(i))
				history[i] = append(history[i], "")
			}
			changed++
		}
	}
	require.Positive(t, s.RestartStats().KeptVersions)
	t.Logf("%d changes, %+v", changed, s.RestartStats())
	later := rebootedImage(dirImage(t, dir))
	s.Close()

	rolledBack := int64(0)
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			s2 := persistStore(t, mixImages(t, synced, later, rand.New(rand.NewPCG(seed, 11))), c, keepConfig())
			defer s2.Close()
			lost, older := 0, int64(0)
			for i := range n {
				got, _, ok := s2.Get(nil, key(i))
				if !ok {
					if !slices.Contains(history[i], "") {
						lost++
					}
					continue
				}
				require.Contains(t, history[i], string(got), "%s: a value it never held since the sync", key(i))
				if string(got) != history[i][len(history[i])-1] {
					older++
				}
			}
			require.Zero(t, lost, "keys never deleted since the sync, lost; %+v", s2.RestartStats())
			// Each kept version taken back serves an older value; a block that kept its synced bytes does too.
			rs := s2.RestartStats()
			require.LessOrEqual(t, rs.RolledBack, older, "%+v", rs)
			t.Logf("%d keys older than their last value, %d of them kept versions taken back", older, rs.RolledBack)
			rolledBack += rs.RolledBack
		})
	}
	require.Positive(t, rolledBack, "no start took a kept version back: the mixes test nothing of keep.go")
}

// The restart after a kill keeps a kept version kept (what replaced it may be in the page cache only)
// until its own first sync, and serves what replaced it; one after a reboot with no sync since serves
// one or the other.
func TestRestartAfterKillKeepsKeptVersions(t *testing.T) {
	s, dir, c := keepStore(t)
	spans, _ := spanningKeys(t, s, 400, []byte("12345"))
	require.Equal(t, Stored, s.Store(ModeSet, []byte("big"), 0, 0, pattern(700_000, 1), 0))
	syncKept(t, s)
	require.Equal(t, Stored, s.Store(ModeSet, []byte(spans), 0, 3600, []byte("99999"), 0))
	require.Equal(t, Stored, s.Store(ModeSet, []byte("big"), 0, 0, pattern(700_000, 2), 0))
	require.EqualValues(t, 2, s.RestartStats().KeptVersions)
	killed := crashImage(t, dir)
	s.Close()

	s2 := persistStore(t, killed, c, keepConfig())
	require.EqualValues(t, 2, s2.RestartStats().KeptVersions, "kept until this process's first sync")
	got, _ := mustGet(t, s2, spans)
	require.Equal(t, "99999", got)
	got, _ = mustGet(t, s2, "big")
	require.Equal(t, string(pattern(700_000, 2)), got)
	// The kept chained version's parts are its own: nothing took them for free chunks.
	sh := &s2.shards[0]
	chains := 0
	for _, v := range sh.kept.cls[s2.classes.Largest()].list {
		if b := sh.chunk(v.ref); itemChained(b) {
			chains++
			for _, part := range chainParts(sh, b) {
				require.Equal(t, byte(kindPart), sh.chunk(part)[offState], "a part of the kept version")
			}
		}
	}
	require.Equal(t, 1, chains)
	for range 40 {
		require.Equal(t, Stored, s2.Store(ModeSet, []byte("other"), 0, 0, pattern(700_000, 3), 0))
	}
	syncKept(t, s2)
	require.Zero(t, s2.RestartStats().KeptVersions)
	for range 40 { // had the restart freed a part of the kept version, its release freed it again
		require.Equal(t, Stored, s2.Store(ModeSet, []byte("third"), 0, 0, pattern(700_000, 4), 0))
	}
	for k, seed := range map[string]int{"big": 2, "other": 3, "third": 4} {
		got, _ = mustGet(t, s2, k)
		require.Equal(t, string(pattern(700_000, seed)), got, k)
	}
}

// A page move takes the kept versions in the page it drains along, as it takes the items (the page parks
// with DIR mapped); without a chunk for them, or a move that rescues nothing, they are freed and counted.
func TestKeptVersionMovesWithItsPage(t *testing.T) {
	s, _, _ := keepStore(t)
	value := pattern(3000, 7)
	for i := range 600 { // two pages and a half of the class
		require.Equal(t, Stored, s.Store(ModeSet, fmt.Appendf(nil, "k:%04d", i), 0, 0, value, 0))
	}
	syncKept(t, s)
	require.Equal(t, Stored, s.Store(ModeSet, []byte("k:0000"), 0, 0, []byte("small now"), 0))
	sh := &s.shards[0]
	id := sh.al.ClassOf(refOf(s, []byte("k:0001")))
	require.Equal(t, 1, sh.kept.cls[id].n)
	old := sh.kept.cls[id].list[0].ref
	seal := *itemSeal(sh.chunk(old))
	parked := movePageTo(t, s, old.Page(), 0)
	require.True(t, parked, "a page a kept version moved from parks")
	nu := sh.kept.cls[id].list[0].ref
	require.NotEqual(t, old.Page(), nu.Page())
	b := sh.chunk(nu)
	require.True(t, isKeptVersion(b))
	require.Equal(t, "k:0000", string(itemKey(b)))
	require.Equal(t, seal, *itemSeal(b))
	at, want := sh.sealFor(b)
	require.Equal(t, want, *sealPtr(b, at), "the copy is whole")
	require.EqualValues(t, 1, s.RestartStats().KeptVersions)
	require.Zero(t, s.RestartStats().KeptDropped)

	sh.mu.Lock()
	sh.drainPage(nu.Page(), s.now(), false)
	sh.endDrain(-1, 0)
	sh.mu.Unlock()
	require.Zero(t, s.RestartStats().KeptVersions)
	require.EqualValues(t, 1, s.RestartStats().KeptDropped)
}

// In a full cache kept versions hold at most a keptShare-th of their class's chunks: past it a change
// frees the oldest kept version rather than evict another item.
func TestKeptVersionsGiveWayInAFullCache(t *testing.T) {
	dir, c := t.TempDir(), newClock()
	if slab.OnTmpfs(dir) {
		t.Skip("versions are kept only where syncs write to a disk, and the test's directory is on tmpfs")
	}
	s := persistStore(t, dir, c, Config{MemoryLimit: 8 << 20, Shards: 1, DataSync: time.Hour, persistTick: time.Hour})
	key := func(i int) []byte { return fmt.Appendf(nil, "k:%05d", i) }
	n := 0
	for ; s.Stats().Evictions == 0; n++ {
		require.Equal(t, Stored, s.Store(ModeSet, key(n), 0, 0, pattern(3000, n), 0))
	}
	syncKept(t, s)
	base := s.Stats().Evictions
	sh := &s.shards[0]
	id := sh.al.ClassOf(refOf(s, key(n-1)))
	for round := range 3 {
		for i := n - 1; i >= 0; i-- { // newest first: CLOCK's hand evicts the oldest, so most are there
			s.Store(ModeSet, key(i), 0, 0, pattern(3000, n*(round+1)+i), 0) // a new chunk each: over undoRoom
		}
	}
	total := sh.al.Stats(id).TotalChunks
	rs := s.RestartStats()
	t.Logf("%d chunks in the class, %d items stored; kept %d, dropped %d, evictions %d", total, n,
		rs.KeptVersions, rs.KeptDropped, s.Stats().Evictions-base)
	require.LessOrEqual(t, rs.KeptVersions*keptShare, int64(total)+keptShare)
	require.Positive(t, rs.KeptDropped)
	require.GreaterOrEqual(t, s.Stats().CurrItems, int64(total-total/keptShare-keptShare),
		"items evicted for kept versions past their share")
}

// storeStateWord changes the state byte, the meta byte and the time field, and nothing else of the chunk.
func TestStoreStateWord(t *testing.T) {
	b := make([]byte, 64)
	for i := range b {
		b[i] = byte(i + 1)
	}
	want := append([]byte(nil), b...)
	storeStateWord(b, kindUndo, 0x80, 0xa1b2c3d4)
	want[offState], want[offMeta] = kindUndo, 0x80
	want[offTime], want[offTime+1], want[offTime+2], want[offTime+3] = 0xd4, 0xc3, 0xb2, 0xa1
	require.Equal(t, want, b)
	require.Equal(t, uint32(0xa1b2c3d4), itemTime(b))
}
