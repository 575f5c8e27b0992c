package shard

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/leasecached/leasecached/internal/tmpfstest"
	"github.com/stretchr/testify/require"
)

// reboot stands for a machine reboot after a clean stop of s: tmpfs is emptied, so the next start on dir
// finds only what the syncs wrote into it (restart.md rule 9, restart-live.md rules 10-11).
func reboot(t *testing.T, s *Store, root string) {
	t.Helper()
	s.Close() // a clean stop syncs
	copies, err := filepath.Glob(filepath.Join(root, "leasecached-*"))
	require.NoError(t, err)
	require.Len(t, copies, 1, "the live copy")
	require.NoError(t, os.RemoveAll(copies[0]))
}

// Every change a restart from DIR must see reaches it through a marked block (rule 10), changes made in
// place included: a delete that keeps the item as a stale value changes its state byte where it is, and
// the token an mg hands out (W, then Z for the next readers) is a bit outside the seal. A clean stop
// followed by a reboot keeps them, as a kill does: no deleted item comes back live, and no second reader
// wins the token and refills too.
func TestLiveCopyInPlaceChangesReachDir(t *testing.T) {
	recache := MetaGetRequest{Ops: ops(ExpRecache, 30)}
	cases := []struct {
		name   string
		change func(t *testing.T, s *Store, k []byte) // made after the sync, on every other key
		after  func(t *testing.T, s *Store, k []byte) // the same key, after the reboot
	}{
		{"delete", func(t *testing.T, s *Store, k []byte) {
			require.Equal(t, Deleted, s.Delete(k))
		}, func(t *testing.T, s *Store, k []byte) {
			_, _, ok := s.Get(nil, k)
			require.False(t, ok, "%s: deleted before the clean stop, back after the reboot", k)
		}},
		{"token handed out", func(t *testing.T, s *Store, k []byte) {
			_, res := s.MetaGet(nil, k, &recache)
			require.True(t, res.Won, "%s: the first reader wins the token", k)
		}, func(t *testing.T, s *Store, k []byte) {
			_, res := s.MetaGet(nil, k, &recache)
			require.True(t, res.Hit, "%s", k)
			require.False(t, res.Won, "%s: its token was handed out before the clean stop, again after the reboot", k)
			require.True(t, res.TokenSent, "%s", k)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root, dir, c := tmpfstest.Dir(t, "lc-shard-live-"), t.TempDir(), newClock()
			cfg := Config{MemoryLimit: 64 << 20, DataLive: root}
			s := persistStore(t, dir, c, cfg)
			for i := range 200 {
				require.Equal(t, Stored, s.Store(ModeSet, key(i), 0, 10, pattern(100, i), 0))
			}
			s.persist.sync() // the items reach DIR; the changes below come after
			for i := 0; i < 200; i += 2 {
				tc.change(t, s, key(i))
			}
			reboot(t, s, root)

			s = persistStore(t, dir, c, cfg)
			for i := range 200 {
				if i%2 == 0 {
					tc.after(t, s, key(i))
					continue
				}
				v, _, ok := s.Get(nil, key(i))
				require.True(t, ok, "key %d", i)
				require.Equal(t, pattern(100, i), v, "key %d", i)
			}
		})
	}
}

// A page move rewrites chunks where they are (the parts of a rescued head, a rescued part's link), and a
// rescued chunk is a copy nothing else marks: all of it must reach DIR, or a reboot after a clean stop
// finds broken chains and drops the items. TestDrainPageMovesChainedItems's moves, with a live copy.
func TestLiveCopyPageMoveReachesDir(t *testing.T) {
	const vlen = 700_000 // a head in the largest class and one part in a smaller one
	for _, tc := range []struct {
		name       string
		head, part bool // whose pages move
	}{
		{"the heads' page", true, false},
		{"the parts' page", false, true},
		{"both", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, dir, c := tmpfstest.Dir(t, "lc-shard-live-"), t.TempDir(), newClock()
			cfg := Config{MemoryLimit: 32 << 20, Shards: 1, DataLive: root}
			s := persistStore(t, dir, c, cfg)
			hot := func(i int) []byte { return fmt.Appendf(nil, "hot:%d", i) }
			for i := range 4 {
				require.Equal(t, Stored, s.Store(ModeSet, hot(i), 0, 0, pattern(vlen, i), 0))
				require.Equal(t, Stored, s.Store(ModeSet, fmt.Appendf(nil, "cold:%d", i), 0, 0, pattern(vlen, -i), 0))
				mustGet(t, s, string(hot(i)))
			}
			sh := &s.shards[0]
			head := refOf(s, hot(0))
			sh.mu.Lock()
			b := sh.chunk(head)
			part := readRef(b[chainOff(b):])
			sh.mu.Unlock()
			s.persist.sync() // the items reach DIR where they were first stored
			if tc.head {
				drainTo(t, s, head.Page(), 0)
			}
			if tc.part {
				drainTo(t, s, part.Page(), 0)
			}
			require.Positive(t, s.Stats().SlabRescues)
			reboot(t, s, root)

			s = persistStore(t, dir, c, cfg)
			for i := range 4 {
				v, _, ok := s.Get(nil, hot(i))
				require.True(t, ok, "%s: moved before the clean stop, gone after the reboot", hot(i))
				require.True(t, bytes.Equal(v, pattern(vlen, i)), "%s intact", hot(i))
			}
		})
	}
}
