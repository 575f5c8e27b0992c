//go:build linux

package integration

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A power cut on a disk with a volatile write cache (issue 30: "with periodic flushing it survives a
// machine reboot too, losing at most the last interval"; doc/design/restart.md rule 9). TestRestartAfterReboot
// copies a loop device's file: every write the kernel issued is in the copy, in order. A real disk keeps
// only what a flush (or a FUA write) made durable, and of the writes after the last flush any subset.
// Here the data directory is on ext4 on a log-writes device (logwrites_test.go), and the daemon takes
// rounds of changes; after each round the test waits for two syncs and marks the log. The log is then
// replayed to many points (each mark, a prefix ending anywhere, and every flush before a point followed by
// a random subset of the writes after it), and each image is mounted (ext4 replays its journal) and
// restarted on:
//   - the daemon starts and loads, whatever the point;
//   - a key nothing changed since the last mark before the point is back exactly (with -m overfilled,
//     or absent: evicted);
//   - a key changed since holds one of the values it had from that mark on, or is absent if one of them was
//     a delete (or, with -m overfilled, evicted) (rule 9);
//   - never an older value, a value a key never held, or a torn one;
//   - CAS uniques exceed every one handed out before that mark.
//
// The kernel of CI's machines has no device-mapper: the test skips there and `make vm-tests` runs it in
// Debian 12's kernel.

const (
	powerCutImageBytes = 192 << 20
	powerCutLogBytes   = 4 << 30 // sparse: only what is written takes room
	powerCutRounds     = 4       // marked rounds; one more after the last mark is synced only before the kill
	powerCutSpanCuts   = 3       // random points between two marks (the first a prefix, the others subsets)
	powerCutCasKey     = "pc-cas-probe"
	powerCutAtMark     = "at the mark" // the kind of the point that is a mark
)

// powerCutScenario is one daemon configuration and load.
type powerCutScenario struct {
	name       string
	live       bool
	mem        string
	keys       int // "k0" .. the pool of keys
	changes    int // keys changed in a round
	overfilled bool
	size       func(rng *rand.Rand, key, round, seq int) int
}

var powerCutScenarios = []powerCutScenario{
	{name: "fits, DIR mapped", mem: "64", keys: 1500, changes: 400, size: powerCutFitSize},
	{name: "fits, live copy", live: true, mem: "64", keys: 1500, changes: 400, size: powerCutFitSize},
	{name: "overfilled, DIR mapped", mem: "16", keys: 6000, changes: 2500, overfilled: true, size: powerCutShiftSize},
	{name: "overfilled, live copy", live: true, mem: "16", keys: 6000, changes: 2500, overfilled: true, size: powerCutShiftSize},
}

// powerCutFitSize is rebootSize's mix: mostly small values, some spanning pages, a few chained.
func powerCutFitSize(_ *rand.Rand, key, _, seq int) int { return rebootSize(key, seq) }

// powerCutShiftSize moves the load between size classes each round (small, then a few KB), so that pages
// move between classes (and, with DIR mapped, are parked) while -m is full.
func powerCutShiftSize(rng *rand.Rand, key, round, _ int) int {
	switch {
	case key%997 == 0:
		return 300_000 + rng.IntN(1000)
	case round%2 == 0:
		return 100 + rng.IntN(500)
	}
	return 2000 + rng.IntN(4000)
}

// powerCutModel is every state each key went through, and where each key stood at each mark.
type powerCutModel struct {
	keys  []string
	hist  map[string][]rsItem // in order; a nil val is absent
	marks []powerCutMark
}

type powerCutMark struct {
	name   string
	at     map[string]int // the index into hist of each key's state when the mark was set
	maxCas uint64         // the largest CAS unique handed out before it
	entry  int            // its index in the log (set after the log is read)
}

// powerCutCut is a point to replay to: the entries before base, then extra (indexes after base).
type powerCutCut struct {
	entry int // the last entry the point includes
	base  int
	extra []int
	kind  string
}

func TestRestartAfterPowerCut(t *testing.T) {
	requireRestart(t)
	requireLogWrites(t)
	for _, sc := range powerCutScenarios {
		t.Run(sc.name, func(t *testing.T) { powerCut(t, sc, restartSeed(t)) })
	}
}

func powerCut(t *testing.T, sc powerCutScenario, seed int64) {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15))
	root := t.TempDir()
	lw := newLogWrites(t, root, powerCutImageBytes, powerCutLogBytes)
	mustRun(t, "mkfs.ext4", "-q", "-F", "-b", "4096", lw.dev()) // 4 KiB blocks, as on any disk of some size
	lw.flush(t)
	lw.mark(t, "mkfs")
	mnt := filepath.Join(root, "mnt")
	require.NoError(t, os.Mkdir(mnt, 0o755))
	mustRun(t, "mount", lw.dev(), mnt)
	mounted := true
	t.Cleanup(func() {
		if mounted {
			unmount(t, mnt)
		}
	})

	// Each daemon keeps its live copy under a root of its own: a cut's image may get the device and inode
	// numbers an earlier one had, and must not find that one's copy.
	args := func(t *testing.T, more ...string) []string {
		out := append([]string{"-m", sc.mem}, more...)
		if sc.live {
			out = append(out, liveArgs(t)...)
		}
		return out
	}
	d := startOnDir(t, filepath.Join(mnt, "data"), args(t, "--data-sync", "1s")...)
	waitLoaded(t, d)
	c := mustDialRS(t, d)
	m := &powerCutModel{hist: map[string][]rsItem{}}
	for i := range sc.keys {
		k := fmt.Sprintf("k%d", i)
		m.keys = append(m.keys, k)
		m.hist[k] = []rsItem{{}}
	}
	for round := range powerCutRounds + 1 {
		powerCutRound(t, c, sc, m, rng, round)
		if round == powerCutRounds {
			// No mark follows the last round: the points after the last mark see it partly written. It is
			// synced before the kill all the same, for the replay's check (requireSameFile): with a live
			// copy a sync writes DIR with O_DIRECT from the live mapping while the round may change it, so
			// the log holds such a block as it was when the write was issued and the device as the loop
			// device read it later; the next sync writes it again from memory that no longer changes.
			waitSyncs(t, c, 2)
			break
		}
		maxCas := storeCAS(t, c, powerCutCasKey)
		waitSyncs(t, c, 2)                            // the second began after the round's last reply
		name := fmt.Sprintf("round-%d-synced", round) // a mark is one word
		lw.mark(t, name)
		at := make(map[string]int, len(m.keys))
		for _, k := range m.keys {
			at[k] = len(m.hist[k]) - 1
		}
		m.marks = append(m.marks, powerCutMark{name: name, at: at, maxCas: maxCas})
	}
	st, err := c.stats()
	require.NoError(t, err)
	t.Logf("before the cut: evictions %s, slabs_moved %s, data_syncs %s, data_parked_pages %s",
		st["evictions"], st["slabs_moved"], st["data_syncs"], st["data_parked_pages"])
	if sc.overfilled {
		require.NotEqual(t, "0", st["evictions"], "the load must overfill -m")
	} else {
		require.Equal(t, "0", st["evictions"], "everything must fit -m: an eviction is not what is tested")
	}
	stopDaemon(t, d, stopKill)
	unmount(t, mnt) // ext4 writes what it had cached: more writes no flush may cover
	mounted = false
	lw.close(t)

	ents := lw.entries(t)
	t.Logf("the log: %s", lwSummary(ents))
	cuts := powerCutPoints(t, ents, m, rng)
	r := newReplayer(t, lw, ents, filepath.Join(root, "replay.img"))
	lostMost := 0
	for _, cut := range cuts {
		r.upTo(t, cut.base)
		mk := -1 // the last mark the point includes
		for i, mark := range m.marks {
			if mark.entry <= cut.entry {
				mk = i
			}
		}
		after := "no mark"
		if mk >= 0 {
			after = m.marks[mk].name
		}
		t.Run(fmt.Sprintf("entry %d of %d, %s, after %s", cut.entry, len(ents), cut.kind, after), func(t *testing.T) {
			img := filepath.Join(root, "cut.img")
			t.Cleanup(func() { _ = os.Remove(img) })
			r.copyWith(t, img, cut.extra)
			dir := filepath.Join(mountImage(t, img), "data")
			// A cut before the directory's header was written has no boot to change.
			if fi, err := os.Stat(filepath.Join(dir, "meta")); err == nil && fi.Size() >= metaBootOff+8 {
				asAfterReboot(t, dir)
			}
			d := startOnDir(t, dir, args(t)...)
			st := waitLoaded(t, d)
			c := mustDialRS(t, d)
			kept, lost := powerCutCheck(t, c, sc, m, mk)
			t.Logf("%s=%s %s=%s restart_items_rolled_back=%s; %d keys as they were last, %d others absent "+
				"(overfilled: evicted)", statLoaded, st[statLoaded], statDropped, st[statDropped],
				st["restart_items_rolled_back"], kept, lost)
			lostMost = max(lostMost, lost)
			if cut.kind == powerCutAtMark {
				// Every change before a mark was synced by a sync begun after it, so no version it replaced
				// is to be taken back, whether or not what replaced it is there to win on CAS.
				assert.Equal(t, "0", st["restart_items_rolled_back"], "kept versions taken back at a mark")
			}
			if mk >= 0 {
				assert.Greater(t, storeCAS(t, c, "pc-cas-after"), m.marks[mk].maxCas,
					"a CAS unique after the cut must exceed every one handed out before %s", m.marks[mk].name)
			}
			stopDaemon(t, d, stopKill)
		})
	}
	t.Logf("%d points; at most %d keys absent at one that the model did not have absent (overfilled: evicted)",
		len(cuts), lostMost)
	// The replay itself: all of the log makes the data device's bytes.
	r.upTo(t, len(ents))
	requireSameFile(t, r.img.Name(), lw.data)
}

// powerCutRound changes sc.changes distinct keys (a quarter of the present ones deleted, the others set to
// a new value) through a pipeline and records each new state.
func powerCutRound(t *testing.T, c *rsConn, sc powerCutScenario, m *powerCutModel, rng *rand.Rand, round int) {
	t.Helper()
	picked := rng.Perm(sc.keys)[:sc.changes]
	for len(picked) > 0 {
		batch := picked[:min(len(picked), 64)]
		picked = picked[len(batch):]
		next := make([]rsItem, len(batch))
		for j, i := range batch {
			k := m.keys[i]
			h := m.hist[k]
			if h[len(h)-1].val != nil && rng.IntN(4) == 0 {
				fmt.Fprintf(c.w, "delete %s\r\n", k)
				continue
			}
			seq := len(h)
			next[j] = rsItem{flags: uint32(seq), val: rsValue(k, seq, sc.size(rng, i, round, seq))}
			c.queueStore("set", k, next[j].flags, 0, next[j].val)
		}
		require.NoError(t, c.flush())
		for j, i := range batch {
			k := m.keys[i]
			l, err := c.line()
			require.NoError(t, err)
			switch {
			case next[j].val != nil:
				require.Equal(t, "STORED", l, "set %s", k)
			case sc.overfilled && l == "NOT_FOUND": // evicted
			default:
				require.Equal(t, "DELETED", l, "delete %s", k)
			}
			m.hist[k] = append(m.hist[k], next[j])
		}
	}
}

// powerCutPoints picks the points to replay to, in the order of the log: each mark, the end, and
// powerCutSpanCuts random points between two marks (before the first, after the last); it also sets
// each mark's entry.
func powerCutPoints(t *testing.T, ents []lwEntry, m *powerCutModel, rng *rand.Rand) []powerCutCut {
	t.Helper()
	var marks []int // "mkfs", each round's, dm-log-writes' own at the end
	for i, e := range ents {
		if e.flags&lwFlagMark == 0 {
			continue
		}
		marks = append(marks, i)
		if n := len(marks) - 2; n >= 0 && n < len(m.marks) {
			require.Equal(t, m.marks[n].name, e.mark, "mark %d", len(marks)-1)
			m.marks[n].entry = i
		}
	}
	require.Len(t, marks, len(m.marks)+2, "the marks in the log")
	require.Equal(t, "mkfs", ents[marks[0]].mark)
	lastBarrier := func(i int) int {
		for ; i >= 0 && !ents[i].barrier(); i-- {
		}
		return i
	}
	// prefix is the point after entry i as a disk that kept every write to it has it: the entries up to
	// the last barrier, then every write after that.
	prefix := func(i int, kind string) powerCutCut {
		b := lastBarrier(i)
		cut := powerCutCut{entry: i, base: b + 1, kind: kind}
		for j := b + 1; j <= i; j++ {
			if ents[j].writes() {
				cut.extra = append(cut.extra, j)
			}
		}
		return cut
	}
	var cuts []powerCutCut
	for s := 0; s+1 < len(marks); s++ {
		if s > 0 {
			cuts = append(cuts, prefix(marks[s], powerCutAtMark))
		}
		lo, hi := marks[s]+1, marks[s+1]
		if hi <= lo {
			continue
		}
		for n := range powerCutSpanCuts {
			i := lo + rng.IntN(hi-lo)
			if n == 0 {
				cuts = append(cuts, prefix(i, "a prefix"))
				continue
			}
			cut := prefix(i, "")
			all := len(cut.extra)
			cut.extra = slices.DeleteFunc(cut.extra, func(int) bool { return rng.IntN(2) == 0 })
			cut.kind = fmt.Sprintf("%d of the %d writes after entry %d", len(cut.extra), all, cut.base-1)
			cuts = append(cuts, cut)
		}
	}
	cuts = append(cuts, prefix(len(ents)-1, "the whole log"))
	sort.SliceStable(cuts, func(a, b int) bool { return cuts[a].base < cuts[b].base })
	return cuts
}

// powerCutCheck reads every key and fails the test for a state the model does not allow after mark mk
// (-1: none): a key untouched since the mark is back exactly (unless -m is overfilled: then it may be
// evicted); a key changed since holds one of the values it had from the mark on, or is absent only if
// one of them was a delete (the version a change replaces is kept until a sync has written its successor,
// shard/keep.go); nothing else. It returns how many keys are as they were last, and with -m overfilled how
// many keys other than those are absent (evicted, or lost).
func powerCutCheck(t *testing.T, c *rsConn, sc powerCutScenario, m *powerCutModel, mk int) (kept, lost int) {
	t.Helper()
	got, err := c.getItems("get", m.keys)
	require.NoError(t, err)
	errs := errorCap{t: t}
	absent := func(it rsItem) bool { return it.val == nil }
	for _, k := range m.keys {
		h := m.hist[k]
		from := 0
		if mk >= 0 {
			from = m.marks[mk].at[k]
		}
		allowed := h[from:]
		g, ok := got[k]
		last := h[len(h)-1]
		if !ok {
			switch {
			case absent(last):
				kept++
			case slices.ContainsFunc(allowed, absent):
			case sc.overfilled:
				lost++ // or evicted
			case len(allowed) > 1:
				errs.add("%s: missing; changed since %q and never deleted, it held %d bytes (flags %d) then", k,
					m.marks[mk].name, len(allowed[0].val), allowed[0].flags)
			default:
				errs.add("%s: missing; it held %d bytes (flags %d) at %q and nothing changed it since", k,
					len(allowed[0].val), allowed[0].flags, m.marks[mk].name)
			}
			continue
		}
		same := func(it rsItem) bool { return it.val != nil && it.flags == g.flags && string(it.val) == string(g.val) }
		if !slices.ContainsFunc(allowed, same) {
			why := "none of the values it held"
			if slices.ContainsFunc(h[:from], same) {
				why = "a value it held before the last mark only"
			}
			errs.add("%s: back with flags %d and %d bytes: %s", k, g.flags, len(g.val), why)
		} else if same(last) {
			kept++
		}
	}
	errs.done()
	return kept, lost
}
