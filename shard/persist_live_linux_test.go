package shard

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/leasecached/leasecached/internal/tmpfstest"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
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

// A start that makes a live copy on a tmpfs with no room left cannot list a shard as read into the copy
// (slab.Backing.ShardLoaded): each such shard stays locked until the copy is whole (LiveLoaded, which
// needs no room), so that none changes what a start after a kill would read from DIR again. Stores sent
// while the last shard's failure is reported wait until the copy has its origin; then every shard serves.
func TestLiveCopyShardsHeldOnFullTmpfs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	root, dir, c := t.TempDir(), t.TempDir(), newClock()
	require.NoError(t, unix.Mount("tmpfs", root, "tmpfs", 0, "size=16m"))
	t.Cleanup(func() { _ = unix.Unmount(root, unix.MNT_DETACH) })
	const keys = 50
	cfg := Config{MemoryLimit: 8 << 20, Shards: 2, DataLive: root}
	s := persistStore(t, dir, c, cfg)
	for i := range keys {
		require.Equal(t, Stored, s.Store(ModeSet, key(i), 0, 0, pattern(100, i), 0))
	}
	reboot(t, s, root)

	// Room for the copy's loading file only: the loaded file's reservation and each page are refused.
	filler := filepath.Join(root, "filler")
	f, err := os.Create(filler)
	require.NoError(t, err)
	buf := make([]byte, 64<<10)
	for err == nil {
		_, err = f.Write(buf)
	}
	require.ErrorIs(t, err, unix.ENOSPC)
	for {
		var st unix.Statfs_t
		require.NoError(t, unix.Statfs(root, &st))
		if st.Bavail > 0 {
			break
		}
		fi, err := f.Stat()
		require.NoError(t, err)
		require.NoError(t, f.Truncate((fi.Size()-1)&^4095))
	}
	require.NoError(t, f.Close())

	hasOrigin := func() bool {
		m, _ := filepath.Glob(filepath.Join(root, "leasecached-*", "origin"))
		return len(m) > 0
	}
	var mu sync.Mutex
	var failed []error
	var early []int // keys stored before the copy was whole
	started := make(chan *Store, 1)
	stored := make(chan int, keys)
	cfg.SyncFailed = func(err error) {
		mu.Lock()
		failed = append(failed, err)
		last := len(failed) == cfg.Shards
		mu.Unlock()
		if !last {
			return
		}
		// Every other shard has reported its failure and gone on: a shard unlocked then would serve
		// these stores now, before LiveLoaded.
		s := <-started
		for i := range keys {
			go func() {
				s.Store(ModeSet, key(i), 0, 0, pattern(100, -i), 0)
				stored <- i
			}()
		}
		deadline := time.After(500 * time.Millisecond)
		for {
			select {
			case i := <-stored:
				if !hasOrigin() {
					mu.Lock()
					early = append(early, i)
					mu.Unlock()
				}
				stored <- i // counted again below
				return
			case <-deadline:
				return
			}
		}
	}
	s = startPersistStore(t, dir, c, cfg)
	started <- s
	waitRestart(t, s)
	require.True(t, hasOrigin(), "the copy is whole")
	mu.Lock()
	errs, earlyKeys := append([]error(nil), failed...), append([]int(nil), early...)
	mu.Unlock()
	require.Len(t, errs, cfg.Shards, "one ShardLoaded failure a shard, and none for LiveLoaded: %v", errs)
	for _, err := range errs {
		require.ErrorIs(t, err, unix.ENOSPC)
	}
	require.Empty(t, earlyKeys, "stored into a shard that ShardLoaded failed for, before the copy was whole")

	timeout := time.After(10 * time.Second)
	for range keys { // the stores sent while held (into a full tmpfs: refused or evicting, either is fine)
		select {
		case <-stored:
		case <-timeout:
			// Not FailNow, nor a panic: the cleanup's Close would wait on the shard too.
			fmt.Fprintln(os.Stderr, "FAIL: TestLiveCopyShardsHeldOnFullTmpfs: a held shard was never unlocked")
			_ = unix.Unmount(root, unix.MNT_DETACH)
			os.Exit(1)
		}
	}
	require.NoError(t, os.Remove(filler))
	for i := range keys {
		require.Equal(t, Stored, s.Store(ModeSet, key(i), 0, 0, pattern(100, -i), 0), "key %d", i)
		v, _, ok := s.Get(nil, key(i))
		require.True(t, ok, "key %d", i)
		require.Equal(t, pattern(100, -i), v, "key %d", i)
	}
}
