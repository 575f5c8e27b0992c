package shard

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/leasecached/leasecached/slab"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zeebo/xxh3"
)

// persistStore opens a store on dir with the test clock c (nil: a new one), and waits for its rebuild.
func persistStore(t testing.TB, dir string, c *clock, cfg Config) *Store {
	t.Helper()
	s := startPersistStore(t, dir, c, cfg)
	waitRestart(t, s)
	return s
}

// startPersistStore is persistStore without the wait: its shards may still be rebuilding.
func startPersistStore(t testing.TB, dir string, c *clock, cfg Config) *Store {
	t.Helper()
	if c == nil {
		c = newClock()
	}
	cfg.DataDir = dir
	cfg.Now = c.now
	cfg.NowNano = func() int64 { return c.now() * int64(time.Second) }
	if cfg.MemoryLimit == 0 {
		cfg.MemoryLimit = 64 << 20
	}
	if cfg.ReclaimInterval == 0 {
		cfg.ReclaimInterval = -1
	}
	s, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

// waitRestart waits until s has rebuilt its index.
func waitRestart(t testing.TB, s *Store) {
	t.Helper()
	require.Eventually(t, func() bool { return !s.RestartStats().Loading }, 30*time.Second, time.Millisecond)
}

// crashImage copies dir's files as they are now: what a process killed at this moment leaves (its writes
// are in the page cache, which reading the files sees).
func crashImage(t testing.TB, dir string) string {
	t.Helper()
	out := t.TempDir()
	for _, name := range []string{"meta", "items"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(out, name), b, 0o600))
	}
	return out
}

// snapshot is every live key of s among keys, with its value and metadata.
type snapshot map[string]struct {
	val  string
	info Info
}

func takeSnapshot(s *Store, keys []string) snapshot {
	m := snapshot{}
	for _, k := range keys {
		if v, info, ok := s.Get(nil, []byte(k)); ok {
			m[k] = struct {
				val  string
				info Info
			}{string(v), info}
		}
	}
	return m
}

func TestRestartKeepsItems(t *testing.T) {
	for _, how := range []string{"close", "crash"} {
		t.Run(how, func(t *testing.T) {
			dir := t.TempDir()
			c := newClock()
			s := persistStore(t, dir, c, Config{MaxItemSize: 2 << 20})
			big := bytes.Repeat([]byte("0123456789abcdef"), 700_000/16) // chained
			items := []struct {
				key   string
				flags uint32
				exp   int64
				val   []byte
			}{
				{"plain", 0, 0, []byte("v")},
				{"flags", 0xdeadbeef, 0, []byte("with flags")},
				{"exp", 7, 3600, []byte("expires later")},
				{"empty", 0, 0, nil},
				{"big", 3, 0, big},
				{"two-byte-len", 0, 0, bytes.Repeat([]byte("x"), 3000)},
			}
			var keys []string
			for _, it := range items {
				require.Equal(t, Stored, s.Store(ModeSet, []byte(it.key), it.flags, it.exp, it.val, 0), it.key)
				keys = append(keys, it.key)
			}
			set(t, s, "counter", "41")
			_, r := s.Arith([]byte("counter"), true, 1) // in place
			require.Equal(t, Stored, r)
			set(t, s, "counter9", "9")
			_, r = s.Arith([]byte("counter9"), true, 1) // a longer value: a new item
			require.Equal(t, Stored, r)
			set(t, s, "appended", "head")
			require.Equal(t, Stored, s.Store(ModeAppend, []byte("appended"), 0, 0, []byte("+tail"), 0))
			set(t, s, "touched", "t")
			require.Equal(t, Touched, s.Touch([]byte("touched"), 600)) // moves the item to a chunk with an exptime
			set(t, s, "deleted", "gone")
			require.Equal(t, Deleted, s.Delete([]byte("deleted")))
			keys = append(keys, "counter", "counter9", "appended", "touched", "deleted")
			want := takeSnapshot(s, keys)
			require.Len(t, want, len(keys)-1)

			reopen := dir
			if how == "crash" {
				reopen = crashImage(t, dir)
			}
			s.Close()
			s2 := persistStore(t, reopen, c, Config{MaxItemSize: 2 << 20})
			got := takeSnapshot(s2, keys)
			assert.Equal(t, want, got)
			rs := s2.RestartStats()
			assert.EqualValues(t, len(want), rs.Loaded)
			assert.Empty(t, rs.StartedEmpty)
			var maxCas uint64
			for _, v := range want {
				maxCas = max(maxCas, v.info.Cas)
			}
			set(t, s2, "new", "n")
			_, info := mustGet(t, s2, "new")
			assert.Greater(t, info.Cas, maxCas, "a CAS after the restart must be above every CAS before it")
		})
	}
}

func TestRestartDropsExpiredFlushedAndTorn(t *testing.T) {
	dir := t.TempDir()
	c := newClock()
	s := persistStore(t, dir, c, Config{})
	require.Equal(t, Stored, s.Store(ModeSet, []byte("short"), 0, 5, []byte("expires soon"), 0))
	set(t, s, "flushed", "old")
	c.advance(2)
	s.FlushAll(0)
	require.Equal(t, Stored, s.Store(ModeSet, []byte("long"), 0, 3600, []byte("stays"), 0))
	set(t, s, "after-flush", "new")
	set(t, s, "torn", "this value is torn by the crash")
	s.Close()

	// Tear "torn": change a byte of its value in the file, as a write cut short would leave it.
	items := filepath.Join(dir, "items")
	b, err := os.ReadFile(items)
	require.NoError(t, err)
	i := bytes.Index(b, []byte("this value is torn"))
	require.Positive(t, i)
	b[i] ^= 0x20
	require.NoError(t, os.WriteFile(items, b, 0o600))

	c.advance(10) // "short" expired while the server was down
	s2 := persistStore(t, dir, c, Config{})
	miss(t, s2, "short")
	miss(t, s2, "flushed")
	miss(t, s2, "torn")
	v, _ := mustGet(t, s2, "long")
	assert.Equal(t, "stays", v)
	v, _ = mustGet(t, s2, "after-flush")
	assert.Equal(t, "new", v)
	rs := s2.RestartStats()
	assert.EqualValues(t, 2, rs.Loaded)
	assert.EqualValues(t, 3, rs.Dropped) // short, flushed, torn
}

func TestRestartSettings(t *testing.T) {
	t.Run("another shard count starts empty", func(t *testing.T) {
		dir := t.TempDir()
		s := persistStore(t, dir, nil, Config{Shards: 2})
		set(t, s, "k", "v")
		_, before := mustGet(t, s, "k")
		s.Close()
		s2 := persistStore(t, dir, nil, Config{Shards: 4})
		miss(t, s2, "k")
		assert.Contains(t, s2.RestartStats().StartedEmpty, "2 shards")
		set(t, s2, "k2", "v2") // and works
		_, after := mustGet(t, s2, "k2")
		assert.Greater(t, after.Cas, before.Cas, "CAS uniques keep growing when the stored data is not used")
	})
	t.Run("a smaller -I keeps what fits", func(t *testing.T) {
		dir := t.TempDir()
		s := persistStore(t, dir, nil, Config{MaxItemSize: 1 << 20})
		set(t, s, "small", "v")
		require.Equal(t, Stored, s.Store(ModeSet, []byte("large"), 0, 0, make([]byte, 500_000), 0))
		s.Close()
		s2 := persistStore(t, dir, nil, Config{MaxItemSize: 100_000})
		mustGet(t, s2, "small")
		miss(t, s2, "large")
		assert.EqualValues(t, 1, s2.RestartStats().Dropped)
	})
	t.Run("a larger -m keeps everything", func(t *testing.T) {
		dir := t.TempDir()
		s := persistStore(t, dir, nil, Config{Shards: 2, MemoryLimit: 64 << 20})
		set(t, s, "k", "v")
		s.Close()
		s2 := persistStore(t, dir, nil, Config{Shards: 2, MemoryLimit: 128 << 20})
		mustGet(t, s2, "k")
	})
	t.Run("an automatic shard count keeps the stored one within a factor of two", func(t *testing.T) {
		dir := t.TempDir()
		s := persistStore(t, dir, nil, Config{MemoryLimit: 64 << 20}) // one shard
		set(t, s, "k", "v")
		s.Close()
		for _, tc := range []struct {
			mb, shards int
			kept       bool
		}{
			{128, 1, true},  // -m 128 alone gives 2
			{64, 1, true},   // the same again
			{256, 4, false}, // 4: more than twice 1
			{128, 4, true},  // 4 is twice 2: kept from now on
		} {
			s := persistStore(t, dir, nil, Config{MemoryLimit: int64(tc.mb) << 20})
			require.Len(t, s.shards, tc.shards, "-m %d", tc.mb)
			if tc.kept {
				mustGet(t, s, "k")
				assert.Empty(t, s.RestartStats().StartedEmpty, "-m %d", tc.mb)
			} else {
				miss(t, s, "k")
				assert.Contains(t, s.RestartStats().StartedEmpty, "stored with 1 shards, this start has 4")
				set(t, s, "k", "v")
			}
			s.Close()
		}
		for _, tc := range []struct {
			stored, auto, pages int
			want                bool
		}{
			{1, 2, 100, true}, {2, 1, 100, true}, {1, 4, 100, false}, {4, 1, 100, false},
			{16, 8, 600, true}, {32, 16, 31, false}, {0, 1, 100, false}, {MaxShards * 2, MaxShards, 1 << 20, false},
		} {
			assert.Equal(t, tc.want, keepsShards(tc.stored, tc.auto, tc.pages), "%+v", tc)
		}
	})
	t.Run("-L on and off keeps everything", func(t *testing.T) {
		dir := t.TempDir()
		want := map[string]string{}
		for round, large := range []bool{true, false, true} {
			s := persistStore(t, dir, nil, Config{Shards: 2, LargePages: large, MemoryLimit: 256 << 20})
			for k, v := range want {
				got, _ := mustGet(t, s, k)
				require.Equal(t, v, got, "round %d", round)
			}
			for i := range 5000 {
				k, v := fmt.Sprintf("r%d-%d", round, i), fmt.Sprintf("v%d-%0*d", round, i%700, i)
				set(t, s, k, v)
				want[k] = v
			}
			require.Zero(t, s.Stats().Evictions, "round %d", round)
			s.Close()
		}
	})
	t.Run("a smaller -m keeps what fits", func(t *testing.T) {
		dir := t.TempDir()
		s := persistStore(t, dir, nil, Config{Shards: 2, MemoryLimit: 64 << 20})
		const n = 200_000 // about 30 MB of items
		for i := range n {
			require.Equal(t, Stored, s.Store(ModeSet, fmt.Appendf(nil, "k%d", i), 0, 0, fmt.Appendf(nil, "value-%d-%090d", i, i), 0))
		}
		s.Close()
		s2 := persistStore(t, dir, nil, Config{Shards: 2, MemoryLimit: 24 << 20})
		rs := s2.RestartStats()
		assert.Empty(t, rs.StartedEmpty)
		assert.Positive(t, rs.PagesLeft)
		assert.Positive(t, rs.Loaded)
		assert.Less(t, rs.Loaded, int64(n))
		found := 0
		for i := range n {
			if v, _, ok := s2.Get(nil, fmt.Appendf(nil, "k%d", i)); ok {
				found++
				require.Equal(t, fmt.Sprintf("value-%d-%090d", i, i), string(v))
			}
		}
		assert.EqualValues(t, rs.Loaded, found)
		assert.Positive(t, rs.ItemsLeft)
		assert.EqualValues(t, n, rs.Loaded+rs.Dropped, "every stored item is loaded or counted dropped")
		set(t, s2, "more", "v") // and it works within its new limit
		mustGet(t, s2, "more")
	})
	t.Run("one directory, one store", func(t *testing.T) {
		dir := t.TempDir()
		persistStore(t, dir, nil, Config{})
		_, err := New(Config{MemoryLimit: 64 << 20, DataDir: dir, ReclaimInterval: -1})
		require.ErrorContains(t, err, "in use")
	})
}

// churn stores, replaces, appends to and deletes values of many sizes under memory pressure, so that pages
// move between classes and items are evicted, rescued and relocated: what a restart must then make sense
// of. It returns the keys it used.
func churn(t testing.TB, s *Store, rng *rand.Rand, ops int) []string {
	keys := make([]string, 2000)
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%d", i)
	}
	for n := range ops {
		k := []byte(keys[rng.IntN(len(keys))])
		switch op := rng.IntN(10); {
		case op < 6:
			size := 1 + rng.IntN(200)
			switch rng.IntN(500) {
			case 0:
				size = slab.ChunkMax + rng.IntN(200_000) // chained
			case 1, 2, 3, 4, 5, 6, 7, 8, 9, 10:
				size = 300 + rng.IntN(40_000)
			}
			v := bytes.Repeat([]byte{byte('a' + n%26)}, size)
			s.Store(ModeSet, k, uint32(n), int64(rng.IntN(3))*1000, v, 0)
		case op < 7:
			s.Store(ModeAppend, k, 0, 0, []byte("+"), 0)
		case op < 8:
			s.Delete(k)
		case op < 9:
			s.Touch(k, 500)
		default:
			s.Arith(k, true, 1)
		}
	}
	return keys
}

func TestRestartAfterChurn(t *testing.T) {
	for seed := range uint64(2) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			dir := t.TempDir()
			c := newClock()
			s := persistStore(t, dir, c, Config{MemoryLimit: 64 << 20, Shards: 2})
			rng := rand.New(rand.NewPCG(seed, 1))
			keys := churn(t, s, rng, 20_000)
			s.reclaimTick() // page moves and releases happen here too
			churn(t, s, rng, 5_000)
			want := takeSnapshot(s, keys)
			img := crashImage(t, dir)
			s2 := persistStore(t, img, c, Config{MemoryLimit: 64 << 20, Shards: 2})
			got := takeSnapshot(s2, keys)
			require.Greater(t, len(want), 500, "the churn should leave many keys live (more classes than pages: it evicts)")
			require.Equal(t, len(want), len(got))
			require.Equal(t, want, got)
			assert.EqualValues(t, len(want), s2.RestartStats().Loaded)
			// The rebuilt store keeps working: more churn, then a clean restart, and still the same.
			churn(t, s2, rng, 10_000)
			want = takeSnapshot(s2, keys)
			s2.Close()
			s3 := persistStore(t, img, c, Config{MemoryLimit: 64 << 20, Shards: 2})
			require.Equal(t, want, takeSnapshot(s3, keys))
		})
	}
}

// TestRestartDamagedFiles flips bytes at random in a stored directory: the store must open (or start
// empty), never panic, and every value it serves must be the one stored under that key.
func TestRestartDamagedFiles(t *testing.T) {
	dir := t.TempDir()
	c := newClock()
	s := persistStore(t, dir, c, Config{MemoryLimit: 64 << 20, Shards: 2})
	keys := churn(t, s, rand.New(rand.NewPCG(7, 7)), 10_000)
	want := takeSnapshot(s, keys)
	s.Close()
	// Each case damages one file: where in it, and how.
	cases := []struct {
		file     string
		from, to int // the range flipped (to 0: the file's end)
		cut      bool
		zero     bool
	}{
		{file: "items"}, {file: "items"}, {file: "items"}, {file: "items"},
		{file: "items"}, {file: "items"}, {file: "items"},
		{file: "meta", from: 4096, to: 4096 + 8*64}, {file: "meta", from: 4096, to: 4096 + 8*64}, // page records
		{file: "meta", from: 64, to: 88},  // the CAS and flush marks
		{file: "meta", from: 0, to: 4096}, // the header
		{file: "items", cut: true}, {file: "items", zero: true}, {file: "meta", zero: true},
	}
	for i, tc := range cases {
		t.Run(fmt.Sprint(i, tc.file), func(t *testing.T) {
			img := crashImage(t, dir)
			rng := rand.New(rand.NewPCG(uint64(i), 99))
			p := filepath.Join(img, tc.file)
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			switch {
			case tc.cut:
				b = b[:len(b)/3]
			case tc.zero:
				clear(b)
			default:
				to := tc.to
				if to == 0 {
					to = len(b)
				}
				for range 200 {
					b[tc.from+rng.IntN(to-tc.from)] ^= byte(1 + rng.IntN(255))
				}
			}
			require.NoError(t, os.WriteFile(p, b, 0o600))
			s2 := persistStore(t, img, c, Config{MemoryLimit: 64 << 20, Shards: 2})
			served := 0
			for _, k := range keys {
				v, info, ok := s2.Get(nil, []byte(k))
				if !ok {
					continue
				}
				served++
				w, stored := want[k]
				require.True(t, stored, "key %q served but was not stored", k)
				require.Equal(t, w.val, string(v), k)
				require.Equal(t, w.info.Flags, info.Flags, k)
			}
			t.Logf("served %d of %d; restart: %+v", served, len(want), s2.RestartStats())
			set(t, s2, "still-works", "yes")
			mustGet(t, s2, "still-works")
		})
	}
}

// TestRestartDamagedChainLink damages the top byte of a chained item's links in a stored directory. Such
// a link names the right chunk once its high bits are dropped (Ref.Page), but a page move compares whole
// refs and walked off the chain looking for it (a nil dereference): a restart must drop the item. So
// must a part whose back-pointer is damaged so, which took the head for its own twin (twinOf).
func TestRestartDamagedChainLink(t *testing.T) {
	for _, where := range []string{"head link", "part link", "part back-pointer"} {
		t.Run(where, func(t *testing.T) {
			const vlen = 1_300_000 // a head and two parts
			dir, c := t.TempDir(), newClock()
			cfg := Config{MemoryLimit: 32 << 20, Shards: 1, MaxItemSize: 2 << 20, StaleWindow: -1}
			s := persistStore(t, dir, c, cfg)
			key := []byte("chained")
			require.Equal(t, Stored, s.Store(ModeSet, key, 0, 0, pattern(vlen, 7), 0))
			sh := &s.shards[0]
			r := refOf(s, key)
			sh.mu.Lock()
			head := sh.chunk(r)
			parts := chainParts(sh, head)
			sh.mu.Unlock()
			require.Len(t, parts, 2)
			link := map[string]int64{"head link": fileOffset(r) + int64(chainOff(head)),
				"part link": fileOffset(parts[0]) + offPartNext, "part back-pointer": fileOffset(parts[1]) + offPartHead}[where]
			img := crashImage(t, dir)
			f, err := os.OpenFile(filepath.Join(img, "items"), os.O_RDWR, 0)
			require.NoError(t, err)
			_, err = f.WriteAt([]byte{0x80}, link+7) // bit 63 of a little-endian ref
			require.NoError(t, err)
			require.NoError(t, f.Close())

			s2 := persistStore(t, img, c, cfg)
			_, _, ok := s2.Get(nil, key)
			require.False(t, ok, "an item with a damaged link is served")
			require.Equal(t, int64(1), s2.RestartStats().Dropped)
			for _, p := range append(parts, r) { // move every page the chain was in
				drainTo(t, s2, p.Page(), s2.shards[0].al.ClassOf(p))
			}
			set(t, s2, "still-works", "yes")
			mustGet(t, s2, "still-works")
		})
	}
}

// fileOffset is where chunk r starts in a data directory's items file.
func fileOffset(r slab.Ref) int64 { return int64(r.Page())*slab.PageSize + int64(r.Offset()) }

// chainParts is the part chunks of chained head b, in order (the caller holds sh's lock).
func chainParts(sh *shard, b []byte) []slab.Ref {
	var parts []slab.Ref
	for p := readRef(b[chainOff(b):]); p != slab.NilRef; p = readRef(sh.chunk(p)[offPartNext:]) {
		parts = append(parts, p)
	}
	return parts
}

// TestRestartServesWhileLoading reads from many goroutines while the index is being rebuilt: every read
// answers as the stored data says, none misses an item it holds.
func TestRestartServesWhileLoading(t *testing.T) {
	dir := t.TempDir()
	c := newClock()
	s := persistStore(t, dir, c, Config{MemoryLimit: 64 << 20})
	const n = 100_000
	for i := range n {
		require.Equal(t, Stored, s.Store(ModeSet, fmt.Appendf(nil, "k%d", i), 0, 0, fmt.Appendf(nil, "value-%d", i), 0))
	}
	s.Close()
	cfg := Config{MemoryLimit: 64 << 20, DataDir: dir, Now: c.now, ReclaimInterval: -1,
		NowNano: func() int64 { return c.now() * int64(time.Second) }}
	s2, err := New(cfg)
	require.NoError(t, err)
	defer s2.Close()
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < n; i += 97 {
				v, _, ok := s2.Get(nil, fmt.Appendf(nil, "k%d", i))
				if !ok || string(v) != fmt.Sprintf("value-%d", i) {
					errs <- fmt.Sprintf("k%d: %q %v", i, v, ok)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	waitRestart(t, s2)
	assert.EqualValues(t, n, s2.RestartStats().Loaded)
}

// TestRestartMixedImages stands for a machine that went down between syncs: the kernel writes pages back
// in any order, so the files hold some 4 KiB pages as of one moment and some as of a later one. Every
// value the restarted store serves must be one that was stored under that key at one of the two moments.
func TestRestartMixedImages(t *testing.T) {
	dir := t.TempDir()
	c := newClock()
	s := persistStore(t, dir, c, Config{MemoryLimit: 64 << 20, Shards: 2})
	rng := rand.New(rand.NewPCG(5, 5))
	keys := churn(t, s, rng, 10_000)
	older := takeSnapshot(s, keys)
	imgA := crashImage(t, dir)
	churn(t, s, rng, 10_000)
	newer := takeSnapshot(s, keys)
	imgB := crashImage(t, dir)
	s.Close()
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			mixed := t.TempDir()
			pick := rand.New(rand.NewPCG(seed, 77))
			for _, name := range []string{"meta", "items"} {
				a, err := os.ReadFile(filepath.Join(imgA, name))
				require.NoError(t, err)
				b, err := os.ReadFile(filepath.Join(imgB, name))
				require.NoError(t, err)
				out := append([]byte(nil), b...)
				for off := 0; off < len(out); off += 4096 {
					if off < len(a) && pick.IntN(2) == 0 {
						copy(out[off:min(off+4096, len(out))], a[off:min(off+4096, len(a))])
					}
				}
				require.NoError(t, os.WriteFile(filepath.Join(mixed, name), out, 0o600))
			}
			s2 := persistStore(t, mixed, c, Config{MemoryLimit: 64 << 20, Shards: 2})
			served := 0
			for _, k := range keys {
				v, info, ok := s2.Get(nil, []byte(k))
				if !ok {
					continue
				}
				served++
				a, inA := older[k]
				b, inB := newer[k]
				okA := inA && a.val == string(v) && a.info.Flags == info.Flags
				okB := inB && b.val == string(v) && b.info.Flags == info.Flags
				require.True(t, okA || okB, "key %q: served a value stored at neither moment", k)
			}
			t.Logf("served %d (older %d, newer %d); %+v", served, len(older), len(newer), s2.RestartStats())
		})
	}
}

// setHeaderWord overwrites the 8-byte header counter at off (slab's hdrCasHigh 64 and its copy 88,
// hdrOldestLive 72, hdrOldestCas 80) in dir's meta file.
func setHeaderWord(t *testing.T, dir string, off int64, v uint64) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, "meta"), os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.WriteAt(binary.LittleEndian.AppendUint64(nil, v), off)
	require.NoError(t, err)
}

// TestRestartDamagedFlushMarks: a stored oldest CAS above the stored CAS mark cannot come from flush_all,
// and trusted it would hide every item, new ones too (found by TestRestartCorruptedFiles): the store starts
// empty with its reason, takes new items, and keeps them across the next restart.
func TestRestartDamagedFlushMarks(t *testing.T) {
	for _, tc := range []struct {
		name string
		off  int64
		v    func(now int64) uint64
	}{
		{"oldest CAS raised", 80, func(int64) uint64 { return 1 << 62 }},
		{"oldest_live set to now", 72, func(now int64) uint64 { return uint64(now) }},
		{"check word", 96, func(int64) uint64 { return 12345 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			c := newClock()
			s := persistStore(t, dir, c, Config{})
			set(t, s, "before", "v")
			s.Close()
			setHeaderWord(t, dir, tc.off, tc.v(c.now()))

			s2 := persistStore(t, dir, c, Config{})
			assert.Contains(t, s2.RestartStats().StartedEmpty, "damaged flush_all marks")
			miss(t, s2, "before")
			set(t, s2, "after", "w")
			v, _ := mustGet(t, s2, "after")
			require.Equal(t, "w", v)
			s2.Close()

			s3 := persistStore(t, dir, c, Config{})
			assert.Empty(t, s3.RestartStats().StartedEmpty)
			v, _ = mustGet(t, s3, "after")
			require.Equal(t, "w", v)
		})
	}
}

// TestRestartFlushAfterRaisedCounter: when the rebuild raises the CAS counter above the stored mark (an
// item's CAS above it, which a directory written by another build could hold), a flush_all at once and a
// crash must not leave an oldest CAS above the mark, which the next start would take for damage and start
// empty.
func TestRestartFlushAfterRaisedCounter(t *testing.T) {
	dir := t.TempDir()
	c := newClock()
	persistStore(t, dir, c, Config{}).Close()
	setHeaderWord(t, dir, 64, 1<<50) // the counter starts there: "a" gets a CAS far above 2^32
	s := persistStore(t, dir, c, Config{})
	set(t, s, "a", "1")
	s.Close()
	setHeaderWord(t, dir, 64, 1) // the mark (both copies) far below the item's CAS
	setHeaderWord(t, dir, 88, 1)

	s2 := persistStore(t, dir, c, Config{})
	mustGet(t, s2, "a")
	c.advance(1)
	s2.FlushAll(0)
	set(t, s2, "b", "2")
	image := crashImage(t, dir)

	s3 := persistStore(t, image, c, Config{})
	assert.Empty(t, s3.RestartStats().StartedEmpty)
	miss(t, s3, "a")
	v, _ := mustGet(t, s3, "b")
	require.Equal(t, "2", v)
}

// TestRestartDamagedCasMark: one copy of the stored CAS mark damaged, larger or smaller, still leaves every
// new CAS above every CAS handed out before (found by TestRestartCorruptedFiles: a lowered mark, whose
// largest item was dropped, handed out a CAS again).
func TestRestartDamagedCasMark(t *testing.T) {
	for _, tc := range []struct {
		name string
		off  int64
		v    uint64
	}{{"first copy zeroed", 64, 0}, {"second copy zeroed", 88, 0}, {"first copy raised", 64, 1 << 60}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := persistStore(t, dir, nil, Config{})
			var top uint64
			for i := range 100 {
				require.Equal(t, Stored, s.Store(ModeSet, fmt.Appendf(nil, "k%d", i), 0, 0, []byte("v"), 0))
				_, info := mustGet(t, s, fmt.Sprintf("k%d", i))
				top = max(top, info.Cas)
			}
			require.Equal(t, Deleted, s.Delete([]byte("k99"))) // the largest CAS is not stored any more
			s.Close()
			setHeaderWord(t, dir, tc.off, tc.v)

			s2 := persistStore(t, dir, nil, Config{})
			assert.Empty(t, s2.RestartStats().StartedEmpty)
			mustGet(t, s2, "k0")
			set(t, s2, "new", "w")
			_, info := mustGet(t, s2, "new")
			assert.Greater(t, info.Cas, top)
		})
	}
}

// TestDataSyncCounted: each periodic sync is counted with its time, and a failed one is counted apart,
// reported to Config.SyncFailed, and leaves the time of the last one done.
func TestDataSyncCounted(t *testing.T) {
	t.Run("the loop syncs every DataSync", func(t *testing.T) {
		s := persistStore(t, t.TempDir(), nil, Config{DataSync: time.Millisecond})
		set(t, s, "k", "v")
		require.Eventually(t, func() bool { return s.RestartStats().Syncs >= 1 }, 10*time.Second, 10*time.Millisecond)
		rs := s.RestartStats()
		assert.Zero(t, rs.SyncFailures)
		assert.InDelta(t, time.Now().Unix(), rs.SyncedAt, 2)
	})
	t.Run("a failure", func(t *testing.T) {
		failed := make(chan error, 1)
		s := persistStore(t, t.TempDir(), nil, Config{DataSync: time.Hour, SyncFailed: func(err error) { failed <- err }})
		p := s.persist
		assert.Zero(t, s.RestartStats().SyncedAt, "no sync yet")
		p.sync()
		rs := s.RestartStats()
		require.EqualValues(t, 1, rs.Syncs)
		assert.InDelta(t, time.Now().Unix(), rs.SyncedAt, 2)
		diskFull := errors.New("no space left on device")
		p.syncFn = func() error { return diskFull } // the loop syncs hourly: it is not reading syncFn now
		p.sync()
		after := s.RestartStats()
		assert.EqualValues(t, 1, after.Syncs)
		assert.EqualValues(t, 1, after.SyncFailures)
		assert.Equal(t, rs.SyncedAt, after.SyncedAt, "a failed sync keeps the time of the last one done")
		select {
		case err := <-failed:
			assert.ErrorIs(t, err, diskFull)
		default:
			t.Fatal("SyncFailed was not told")
		}
	})
}

// A process killed while a page move points a chained head's parts at the head's copy (drain.go rescue)
// leaves two sealed heads, each named by some of the parts. The restart keeps the item, not neither head,
// and points every part back at the head it keeps (restart.md rule 2).
func TestRestartTornHeadRescue(t *testing.T) {
	const vlen = 1_300_000 // a head and two parts
	for _, tc := range []struct {
		named     int  // how many parts the kill left naming the copy
		otherCas  bool // the old head has another CAS: no twin, and the item has no whole chain
		copyFirst bool // the copy is in a page before the old head's, so the restart sees it first
	}{{0, false, false}, {1, false, false}, {2, false, false}, {1, true, false}, {1, false, true}} {
		named := tc.named
		t.Run(fmt.Sprintf("%d of 2 parts moved, other CAS %v, copy first %v", named, tc.otherCas, tc.copyFirst), func(t *testing.T) {
			dir, c := t.TempDir(), newClock()
			cfg := Config{MemoryLimit: 32 << 20, Shards: 1, MaxItemSize: 2 << 20, StaleWindow: -1}
			s := persistStore(t, dir, c, cfg)
			key := []byte("chained")
			if tc.copyFirst { // a chained item's chunks, freed, in the first pages: the move takes its head's
				require.Equal(t, Stored, s.Store(ModeSet, []byte("filler"), 0, 0, pattern(vlen, 8), 0))
			}
			require.Equal(t, Stored, s.Store(ModeSet, key, 0, 0, pattern(vlen, 7), 0))
			if tc.copyFirst {
				require.Equal(t, Deleted, s.Delete([]byte("filler")))
			}
			mustGet(t, s, string(key)) // visited: a page move keeps it
			sh := &s.shards[0]
			old := refOf(s, key)

			sh.mu.Lock()
			sh.drainPage(old.Page(), s.now(), true)
			img := crashImage(t, dir) // the kill: before EndDrain, the page is still the heads' class
			require.NoError(t, sh.al.EndDrain(0))
			sh.mu.Unlock()
			fresh := refOf(s, key)
			require.NotEqual(t, old, fresh, "the page move copied the head")
			require.Equal(t, tc.copyFirst, fresh.Page() < old.Page(), "the copy's page comes first")

			// Make the image what a kill after `named` back-pointers were rewritten leaves: the old head
			// not yet freed (the drain's Free cleared its state byte), the later parts still naming it.
			sh.mu.Lock()
			head := sh.chunk(fresh)
			parts := chainParts(sh, head)
			headCopy := append([]byte(nil), head...)
			if tc.otherCas {
				setItemCas(headCopy, itemCas(headCopy)+1)
			}
			sh.mu.Unlock()
			require.Len(t, parts, 2)
			items := filepath.Join(img, "items")
			f, err := os.OpenFile(items, os.O_RDWR, 0)
			require.NoError(t, err)
			_, err = f.WriteAt(headCopy, fileOffset(old))
			require.NoError(t, err)
			for _, p := range parts[named:] {
				var ref [8]byte
				writeRef(ref[:], old)
				_, err = f.WriteAt(ref[:], fileOffset(p)+offPartHead)
				require.NoError(t, err)
			}
			require.NoError(t, f.Close())

			s2 := persistStore(t, img, c, cfg)
			if tc.otherCas {
				miss(t, s2, string(key))
				assert.EqualValues(t, 2, s2.RestartStats().Dropped)
				return
			}
			v, _ := mustGet(t, s2, string(key))
			require.True(t, bytes.Equal([]byte(v), pattern(vlen, 7)), "the value after the restart")
			rs := s2.RestartStats()
			assert.EqualValues(t, 1, rs.Loaded)
			assert.EqualValues(t, 1, rs.Dropped, "the other head")
			kept := refOf(s2, key)
			if tc.copyFirst {
				assert.Equal(t, fresh, kept, "the head seen first is kept")
			} else {
				assert.Equal(t, old, kept, "the head seen first is kept")
			}
			sh2 := &s2.shards[0]
			sh2.mu.Lock()
			b := sh2.chunk(kept)
			for _, p := range chainParts(sh2, b) {
				assert.Equal(t, kept, readRef(sh2.chunk(p)[offPartHead:]), "part %d names the kept head", p)
			}
			sh2.mu.Unlock()
			checkIndexInvariants(t, sh2)
		})
	}
}

// TestSealGolden pins format 6's seal (restart.md rule 1): a change to what sealOf computes or where it
// puts it makes every stored item miss after an upgrade, so it must come with a new format version
// (slab's identity), which starts such a directory empty instead. Flat items of three layouts, and a
// chained one, whose bytes are streamed.
func TestSealGolden(t *testing.T) {
	for _, tc := range []struct {
		key, val   string
		flags, exp uint32
		at         int
		seal       uint32
	}{
		{"k", "", 0, 0, 20, 0xa9a7d8d4},
		{"golden", "value", 7, 1_900_000_000, 36, 0x1ab7a91e},
		{"wide", string(make([]byte, 300)), 1 << 31, 0, 328, 0xd8b9b54a},
	} {
		b := make([]byte, 512)
		b[offState], b[offMeta] = kindHead, layoutOf(tc.flags, tc.exp, len(tc.val))
		writeHeader(b, 0x1122334455667788, tc.exp, 1_800_000_000, tc.flags, []byte(tc.key), len(tc.val), 0)
		copy(b[dataOff(b):], tc.val)
		at, seal := sealOf(0x0123456789abcdef, b, nil, nil)
		assert.Equal(t, tc.at, at, "%q: where the seal goes", tc.key)
		assert.Equal(t, tc.seal, seal, "%q: the seal", tc.key)
	}

	// A chained item: its parts are streamed through the hasher, the head's link left out.
	s := persistStore(t, t.TempDir(), nil, Config{MaxItemSize: 2 << 20})
	key, val := []byte("chained"), bytes.Repeat([]byte("0123456789abcdef"), 700_000/16)
	require.Equal(t, Stored, s.Store(ModeSet, key, 9, 0, val, 0))
	h := Hash(key)
	sh := s.shardOf(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	_, b := sh.find(h, key, s.now())
	require.True(t, itemChained(b))
	setItemCas(b, 0x1122334455667788)
	at, seal := sealOf(0x0123456789abcdef, b, sh.al, xxh3.New())
	assert.Equal(t, len(b)-sealLen, at, "chained: where the seal goes")
	assert.Equal(t, uint32(0x3ee2c067), seal, "chained: the seal")
}

// TestSealPlacement: with a data directory every item's seal is in its own chunk, 4-byte aligned (so
// that it can be stored atomically), after the value and within the chunk, or in the last 4 bytes of a
// chained head, which no value byte reaches; it matches the item; and the value reads back exact.
func TestSealPlacement(t *testing.T) {
	s := persistStore(t, t.TempDir(), nil, Config{MaxItemSize: 2 << 20})
	val := func(n int) []byte { return bytes.Repeat([]byte("0123456789abcdef"), n/16+1)[:n] }
	for _, klen := range []int{1, 2, 3, 14, 250} {
		for _, vlen := range []int{0, 1, 2, 3, 5, 100, 255, 256, 4093, 65535, 65536, slab.ChunkMax - 40, 700_000} {
			for _, fe := range []struct {
				flags uint32
				exp   int64
			}{{0, 0}, {1, 0}, {0, 3600}, {0xffffffff, 3600}} {
				key := bytes.Repeat([]byte("k"), klen)
				name := fmt.Sprintf("klen %d vlen %d flags %d exp %d", klen, vlen, fe.flags, fe.exp)
				require.Equal(t, Stored, s.Store(ModeSet, key, fe.flags, fe.exp, val(vlen), 0), name)
				h := Hash(key)
				sh := s.shardOf(h)
				sh.mu.Lock()
				_, b := sh.find(h, key, s.now())
				var (
					at, end, size int
					chained       bool
					seal, want    uint32
					got           []byte
				)
				if b != nil {
					at, end, size, chained = sealAt(b), dataOff(b)+vlen, len(b), itemChained(b)
					if at+sealLen <= size {
						var wantAt int
						wantAt, want = sh.sealFor(b)
						seal = *itemSeal(b)
						assert.Equal(t, at, wantAt, "%s: sealOf and sealAt disagree", name)
					}
					got = appendValue(sh.al, []byte{}, b)
					assert.LessOrEqual(t, dataOff(b), valueEnd(b), name)
					assert.Zero(t, uintptr(unsafe.Pointer(&b[at]))%4, "%s: seal not aligned", name)
				}
				sh.mu.Unlock()
				require.NotNil(t, b, name)
				require.LessOrEqual(t, at+sealLen, size, name)
				if chained {
					assert.Equal(t, size-sealLen, at, name)
				} else {
					assert.GreaterOrEqual(t, at, end, name)
				}
				assert.Equal(t, want, seal, name)
				require.Equal(t, val(vlen), got, name)
			}
		}
	}
}

// TestRestartForgedItem: a client's value can hold the bytes of a whole item, seal included, and a page
// read with another class's geometry (its record newer than its contents after a reboot that follows a
// page move, rule 9) has chunk starts inside values. The directory's seal key keeps such an item out:
// the client could not compute its seal. The test plants, in a value, an item for another key sealed as
// anyone could without the key, gives the value's page the smallest class's record, and restarts.
func TestRestartForgedItem(t *testing.T) {
	dir := t.TempDir()
	c := newClock()
	s := persistStore(t, dir, c, Config{Shards: 1})
	set(t, s, "small", "") // a page of the smallest class, whose record the value's page will get
	const vlen = 600
	require.Equal(t, Stored, s.Store(ModeSet, []byte("probe"), 0, 0, make([]byte, vlen), 0))
	probe, small := refOf(s, []byte("probe")), refOf(s, []byte("small"))
	sh := &s.shards[0]
	size, tiny := s.classes.Size(sh.al.ClassOf(probe)), s.classes.Size(sh.al.ClassOf(small))
	require.Zero(t, sh.al.ClassOf(small))
	require.NotEqual(t, probe.Page(), small.Page())

	// The next chunk of probe's class is the one after it (a fresh page is carved in order): where the
	// planted value starts, and the first chunk start of the smallest class inside it.
	key := []byte("attacker")
	start := int(probe.Offset()) + size + headerLen(layoutOf(0, 0, vlen), false) + len(key)
	at := (start + tiny - 1) / tiny * tiny
	forged := make([]byte, tiny)
	forged[offState], forged[offMeta] = kindHead, layoutOf(0, 0, 4)
	writeHeader(forged, 1, 0, uint32(c.now()), 0, []byte("victim"), 4, 0)
	copy(forged[dataOff(forged):], "evil")
	_, *itemSeal(forged) = sealOf(0, forged, nil, nil) // no key known
	value := make([]byte, vlen)
	copy(value[at-start:], forged)
	require.Equal(t, Stored, s.Store(ModeSet, key, 0, 0, value, 0))
	require.Equal(t, probe+slab.Ref(size), refOf(s, key), "the value is not where the test planned it")
	s.Close()

	meta := filepath.Join(dir, "meta")
	b, err := os.ReadFile(meta)
	require.NoError(t, err)
	const records = 4096 // the header's size: the page records follow it
	copy(b[records+8*int(probe.Page()):], b[records+8*int(small.Page()):records+8*int(small.Page())+8])
	require.NoError(t, os.WriteFile(meta, b, 0o600))

	s2 := persistStore(t, dir, c, Config{Shards: 1})
	mustGet(t, s2, "small")
	miss(t, s2, "victim")
}

// Config.Emptying is told why the stored data cannot be used before any of it is discarded, so that a
// server killed right after has logged why its next start finds nothing; a fresh directory, which holds
// nothing to discard, is not a reason.
func TestRestartEmptyingToldFirst(t *testing.T) {
	dir := t.TempDir()
	told := 0
	s := persistStore(t, dir, nil, Config{Shards: 1, Emptying: func(string) { told++ }})
	require.Zero(t, told, "a fresh directory")
	require.Equal(t, Stored, s.Store(ModeSet, []byte("k"), 0, 0, []byte("v"), 0))
	s.Close()

	var why string
	var itemsSize int64
	s = persistStore(t, dir, nil, Config{Shards: 2, Emptying: func(r string) {
		why = r
		fi, err := os.Stat(filepath.Join(dir, "items"))
		require.NoError(t, err)
		itemsSize = fi.Size()
	}})
	assert.Contains(t, why, "stored with 1 shards")
	assert.Equal(t, why, s.RestartStats().StartedEmpty)
	assert.Positive(t, itemsSize, "told after the stored items were discarded")
	_, _, ok := s.Get(nil, []byte("k"))
	assert.False(t, ok)
}

// holdAt is a hook for a step of a start that a test holds: it closes entered and waits for release, at
// most 10 s, so that a New that waited for it fails (startHeld) instead of hanging.
func holdAt() (hook func(), entered, release chan struct{}) {
	entered, release = make(chan struct{}), make(chan struct{})
	return func() {
		close(entered)
		select {
		case <-release:
		case <-time.After(10 * time.Second):
		}
	}, entered, release
}

// startHeld starts a store on dir whose step held by holdAt must come after New returns: it checks that
// New did not wait for it, and that the step was reached.
func startHeld(t *testing.T, dir string, c *clock, cfg Config, entered chan struct{}, step string) *Store {
	t.Helper()
	begun := time.Now()
	s := startPersistStore(t, dir, c, cfg)
	require.Less(t, time.Since(begun), 5*time.Second, "New waited for %s", step)
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s never ran", step)
	}
	return s
}

// A restart with a smaller -m reads every stored page it has no room for, to count its items, and
// empties it (a second or more for a few GB): the adoption runs after New returns, every shard locked, so
// that the listener opens at once (restart.md rule 7); a request waits and is answered once its shard is
// rebuilt.
func TestSmallerLimitAdoptsAfterNew(t *testing.T) {
	dir, c := t.TempDir(), newClock()
	s := persistStore(t, dir, c, Config{Shards: 1, MemoryLimit: 16 << 20})
	for i := range 4000 { // 12 MB
		require.Equal(t, Stored, s.Store(ModeSet, key(i), 0, 0, pattern(3000, i), 0))
	}
	s.Close()
	hold, entered, release := holdAt()
	cfg := Config{Shards: 1, MemoryLimit: 4 << 20, Opened: func(RestartStats) { hold() }}
	s2 := startHeld(t, dir, c, cfg, entered, "the adoption")
	require.True(t, s2.RestartStats().Loading)
	got := make(chan int, 1)
	go func() {
		n := 0
		for i := range 4000 {
			if v, _, ok := s2.Get(nil, key(i)); ok {
				assert.Equal(t, pattern(3000, i), v)
				n++
			}
		}
		got <- n
	}()
	select {
	case n := <-got:
		t.Fatalf("%d items answered before the adoption ended", n)
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	select {
	case n := <-got:
		rs := s2.RestartStats()
		require.Positive(t, rs.PagesLeft)
		require.EqualValues(t, rs.Loaded, n)
		require.Positive(t, n)
	case <-time.After(30 * time.Second):
		t.Fatal("the requests were never answered")
	}
}

// TestNewWaitsForAStoppingStore: a store told that its server is stopping (Stopping, which the server's
// Stop calls) keeps its directory until Close, and a New on the directory meanwhile waits for it, says so
// once, and then serves what was stored, where a New beside a store that is not stopping is refused at once.
func TestNewWaitsForAStoppingStore(t *testing.T) {
	dir := t.TempDir()
	c := newClock()
	s := persistStore(t, dir, c, Config{})
	set(t, s, "kept", "value")

	_, err := New(Config{DataDir: dir, MemoryLimit: 64 << 20, ReclaimInterval: -1, Now: c.now,
		Waiting: func(string) { t.Error("told to wait for a store that is not stopping") }})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is in use by another leasecached")

	s.Stopping()
	var told []string
	opened := make(chan *Store, 1)
	failed := make(chan error, 1)
	go func() {
		s2, err := New(Config{DataDir: dir, MemoryLimit: 64 << 20, ReclaimInterval: -1, Now: c.now,
			NowNano: func() int64 { return c.now() * int64(time.Second) }, Waiting: func(owner string) { told = append(told, owner) }})
		if err != nil {
			failed <- err
			return
		}
		opened <- s2
	}()
	select {
	case s2 := <-opened:
		s2.Close()
		t.Fatal("New returned while the store on its directory was stopping")
	case err := <-failed:
		t.Fatalf("New while the store on its directory was stopping: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	s.Close()
	select {
	case s2 := <-opened:
		t.Cleanup(s2.Close)
		waitRestart(t, s2)
		assert.Equal(t, []string{fmt.Sprintf("pid %d, which is stopping", os.Getpid())}, told)
		v, _ := mustGet(t, s2, "kept")
		assert.Equal(t, "value", string(v))
	case err := <-failed:
		t.Fatalf("New once the stopping store had closed: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("New did not return once the stopping store had closed")
	}
}
