package integration

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A corrupted data directory (issue 30: "a corrupted file (bytes flipped at random offsets) never crashes
// the server or yields a wrong value"). The directory of a graceful stop is copied, damaged (bytes flipped
// at random offsets in every data file, a file truncated, a file zeroed) and served: the server must start,
// finish loading, answer every request, and serve for each key only a value that was stored for it.

const (
	corruptKeys = 2000
	// corruptFlipsPerFile is how many bytes a flip round changes in each file: half at uniformly random
	// offsets (most of an item file is untouched zeros), half at bytes that are not zero (item data).
	corruptFlipsPerFile = 300
	corruptFlipRounds   = 2
	// corruptBlock is the unit in which flipBytes looks for data.
	corruptBlock = 4 << 10
)

// corruptModel is every value stored for each key over the test (older ones and deleted ones included:
// a damaged directory may lose the newest copy of an item, but must never make one up).
type corruptModel map[string][]rsItem

func (m corruptModel) allows(key string, got rsItem) (latest, ok bool) {
	vs := m[key]
	for i, v := range vs {
		if v.flags == got.flags && string(v.val) == string(got.val) {
			return i == len(vs)-1, true
		}
	}
	return false, false
}

// fillCorrupt stores corruptKeys keys, some of them twice, some appended to, some deleted, a few large.
func fillCorrupt(t *testing.T, c *rsConn, rng *rand.Rand) (corruptModel, []string) {
	t.Helper()
	m := corruptModel{}
	var keys []string
	for i := range corruptKeys {
		key := fmt.Sprintf("cr%d", i)
		keys = append(keys, key)
		n := rng.Intn(400)
		if i%200 == 0 {
			n = 100_000 + rng.Intn(800_000)
		}
		it := rsItem{flags: uint32(rng.Int63()), val: rsValue(key, 0, n)}
		mustStore(t, c, "set", key, it.flags, 0, it.val)
		m[key] = append(m[key], it)
		switch i % 5 {
		case 1: // overwritten
			it = rsItem{flags: uint32(i), val: rsValue(key, 1, rng.Intn(400))}
			mustStore(t, c, "set", key, it.flags, 0, it.val)
			m[key] = append(m[key], it)
		case 2: // appended to
			piece := rsValue(key, 2, 1+rng.Intn(100))
			mustStore(t, c, "append", key, 0, 0, piece)
			it = rsItem{flags: it.flags, val: append(append([]byte{}, it.val...), piece...)}
			m[key] = append(m[key], it)
		case 3: // deleted: any value is an old one
			l, err := c.call("delete " + key + "\r\n")
			require.NoError(t, err)
			require.Equal(t, "DELETED", l)
		}
	}
	return m, keys
}

// flipBytes changes n bytes of the file: half at uniformly random offsets, half in blocks that are not
// all zeros (item data: most of a file of pages may be holes).
func flipBytes(t *testing.T, path string, n int, rng *rand.Rand) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	if len(b) == 0 {
		return
	}
	zero := make([]byte, corruptBlock)
	var data []int // offsets of blocks with a non-zero byte
	for off := 0; off < len(b); off += corruptBlock {
		if !bytes.Equal(b[off:min(off+corruptBlock, len(b))], zero[:min(corruptBlock, len(b)-off)]) {
			data = append(data, off)
		}
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	for i := range n {
		off := rng.Intn(len(b))
		if i%2 == 1 && len(data) > 0 {
			off = data[rng.Intn(len(data))] + rng.Intn(corruptBlock)
			off = min(off, len(b)-1)
		}
		b[off] ^= byte(1 + rng.Intn(255))
		_, err = f.WriteAt(b[off:off+1], int64(off)) // byte by byte: the file's holes stay holes
		require.NoError(t, err)
	}
}

// corruption is one way to damage a copy of the directory.
type corruption struct {
	name   string
	damage func(t *testing.T, dir string, rng *rand.Rand)
}

// corruptions are the rounds: flips in every file (corruptFlipRounds times), flips in each file alone (a
// damaged header makes the server start empty, so flips everywhere rarely reach the items), a truncated
// file and a zeroed file, each file in turn.
func corruptions(files []string) []corruption {
	// The first round damages nothing: every live item must be served, which shows that the copy and the
	// model are right, so that the other rounds' checks are not empty.
	out := []corruption{{"none", func(*testing.T, string, *rand.Rand) {}}}
	flips := func(files ...string) func(t *testing.T, dir string, rng *rand.Rand) {
		return func(t *testing.T, dir string, rng *rand.Rand) {
			for _, f := range files {
				flipBytes(t, filepath.Join(dir, f), corruptFlipsPerFile, rng)
			}
		}
	}
	for r := range corruptFlipRounds {
		out = append(out, corruption{fmt.Sprintf("flips %d", r), flips(files...)})
	}
	for _, f := range files {
		out = append(out, corruption{"flips " + f, flips(f)})
	}
	// Flips everywhere but the header's file: damaged items and damaged seals together, which the rounds
	// above reach only when their flips miss the header (they rarely do).
	var noMeta []string
	for _, f := range files {
		if f != "meta" {
			noMeta = append(noMeta, f)
		}
	}
	if len(noMeta) > 1 {
		out = append(out, corruption{"flips " + strings.Join(noMeta, " and "), flips(noMeta...)})
	}
	for _, f := range files {
		out = append(out, corruption{"truncate " + f, func(t *testing.T, dir string, rng *rand.Rand) {
			p := filepath.Join(dir, f)
			info, err := os.Stat(p)
			require.NoError(t, err)
			require.NoError(t, os.Truncate(p, rng.Int63n(max(info.Size(), 1))))
		}})
		out = append(out, corruption{"zero " + f, func(t *testing.T, dir string, rng *rand.Rand) {
			p := filepath.Join(dir, f)
			info, err := os.Stat(p)
			require.NoError(t, err)
			require.NoError(t, os.Truncate(p, 0)) // the same size of zeros, as holes
			require.NoError(t, os.Truncate(p, info.Size()))
		}})
	}
	return out
}

// serveCorrupt gets every key and fails the test for each value served that was never stored for its key;
// it returns what was served and how many of those were older or deleted values.
func serveCorrupt(t *testing.T, c *rsConn, model corruptModel, keys []string, what string) (map[string]rsItem, int) {
	t.Helper()
	got, err := c.getItems("get", keys)
	require.NoError(t, err, "%s: get of every key", what)
	var older, wrong int
	for k, g := range got {
		latest, ok := model.allows(k, g)
		switch {
		case !ok:
			wrong++
			if wrong <= 10 {
				t.Errorf("%s: %s served with flags %d and %d bytes: never stored", what, k, g.flags, len(g.val))
			}
		case !latest:
			older++
		}
	}
	return got, older
}

// TestRestartCorruptedLiveCopy damages the live copy (--data-live) a kill -9 left, which a restart uses
// as it is: it must start, serve only values stored for their keys, and answer stats.
func TestRestartCorruptedLiveCopy(t *testing.T) {
	requireRestart(t)
	seed := restartSeed(t)
	for i, tc := range []struct {
		name   string
		damage func(t *testing.T, liveDir string, rng *rand.Rand)
	}{
		{"flips items", func(t *testing.T, liveDir string, rng *rand.Rand) {
			flipBytes(t, filepath.Join(liveDir, "items"), corruptFlipsPerFile, rng)
		}},
		{"truncate items", func(t *testing.T, liveDir string, rng *rand.Rand) {
			p := filepath.Join(liveDir, "items")
			info, err := os.Stat(p)
			require.NoError(t, err)
			require.NoError(t, os.Truncate(p, rng.Int63n(max(info.Size(), 1))))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed + int64(i)))
			live := liveArgs(t)
			dir := t.TempDir()
			d := startOnDir(t, dir, live...)
			waitLoaded(t, d)
			model, keys := fillCorrupt(t, mustDialRS(t, d), rng)
			stopDaemon(t, d, stopKill)
			copies, err := filepath.Glob(filepath.Join(live[1], "leasecached-*"))
			require.NoError(t, err)
			require.Len(t, copies, 1, "one live copy under the root")
			tc.damage(t, copies[0], rng)

			d = startOnDir(t, dir, live...)
			st := waitLoaded(t, d)
			c := mustDialRS(t, d)
			got, older := serveCorrupt(t, c, model, keys, tc.name)
			t.Logf("%s=%s %s=%s; %d of %d keys served, %d of them with an older or deleted value", statLoaded,
				st[statLoaded], statDropped, st[statDropped], len(got), len(keys), older)
			_, err = c.stats()
			require.NoError(t, err)
			assert.True(t, d.proc.Running(), "the server exited")
		})
	}
}

// TestRestartCorruptedFiles damages copies of a directory left by a graceful stop in several ways and
// starts a server on each: it must start, finish loading, answer every get and stats, serve only values
// that were stored for their keys, take new writes, and do the same again after a graceful restart.
func TestRestartCorruptedFiles(t *testing.T) {
	requireRestart(t)
	seed := restartSeed(t)
	rng := rand.New(rand.NewSource(seed))
	base := t.TempDir()
	d := startOnDir(t, base)
	waitLoaded(t, d)
	c := mustDialRS(t, d)
	model, keys := fillCorrupt(t, c, rng)
	before, err := c.getItems("gets", keys)
	require.NoError(t, err)
	casBefore := maxCAS(before) // CAS uniques keep growing, whatever the files lost
	live := len(before)
	stopDaemon(t, d, stopTerm)
	files := dataFiles(t, base)
	t.Logf("data files: %v", files)

	for i, cr := range corruptions(files) {
		t.Run(cr.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			copyDir(t, base, dir)
			cr.damage(t, dir, rand.New(rand.NewSource(seed+int64(i)+1)))
			var written map[string]rsItem // what pass 0 stored after its start
			for pass := range 2 {
				d := startOnDir(t, dir)
				st := waitLoaded(t, d)
				c := mustDialRS(t, d)
				if written != nil {
					expectItems(t, c, written, "stored after the start on a damaged directory, then a graceful restart")
				}
				got, older := serveCorrupt(t, c, model, keys, fmt.Sprintf("pass %d", pass))
				if cr.name == "none" {
					assert.Equal(t, live, len(got), "pass %d: an undamaged directory serves every live item", pass)
					assert.Zero(t, older, "pass %d: an undamaged directory serves only the newest values", pass)
				}
				t.Logf("pass %d: %s=%s %s=%s; %d of %d keys served, %d of them with an older or deleted value; "+
					"--data-dir lines %q", pass, statLoaded, st[statLoaded], statDropped, st[statDropped], len(got),
					len(keys), older, dataDirLines(d))
				// New writes land and read back, and a stats answers.
				w := map[string]rsItem{}
				for j := range 20 {
					key := fmt.Sprintf("cr_new%d_%d", pass, j)
					w[key] = rsItem{flags: uint32(j), val: rsValue(key, 0, j*100)}
					mustStore(t, c, "set", key, uint32(j), 0, w[key].val)
				}
				expectItems(t, c, w, "stored after the start on a damaged directory")
				written = w
				var newKeys []string
				for k := range w {
					newKeys = append(newKeys, k)
				}
				stored, err := c.getItems("gets", newKeys)
				require.NoError(t, err)
				for k, it := range stored {
					if it.cas <= casBefore {
						t.Errorf("pass %d: %s stored with CAS %d, not above %d handed out before the damage", pass, k,
							it.cas, casBefore)
						break
					}
				}
				_, err = c.stats()
				require.NoError(t, err)
				assert.True(t, d.proc.Running(), "pass %d: the server exited", pass)
				stopDaemon(t, d, stopTerm)
			}
		})
	}
}
