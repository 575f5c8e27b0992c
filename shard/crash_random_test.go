//go:build crashsteps

package shard

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leasecached/leasecached/slab"
)

// TestRestartRandomCrashSteps runs a seeded random sequence of commands over a few dozen keys on one shard
// of a data directory small enough that stores evict and pages move between classes: sets, adds,
// replaces and cas of small values, values over undoRoom and chained ones, appends and prepends, deletes,
// touches, gats, mg with T, incr and decr, md I, reads, page moves of a random page (drainTo, to its own
// class or another) and clock steps. A model holds what each key should be; after every command every key
// is read back (a read that changes nothing) and must be what the model says, or missing, which is taken
// as an eviction and counted.
//
// At a random step of some commands (crashStep: undo.go's steps, allocItem's, a move's) it takes a crash
// image, and once the command has returned it restarts a store on the image. For every key, what the
// restart serves (value, flags, exptime and CAS) must be what a restart of the state before the command
// would serve, or of the state after it: a command not answered yet may or may not have happened, but
// nothing torn, no older version, no deleted item back, no key of another command changed
// (doc/design/restart.md rules 1-3). A key is missing after the restart only when it is missing on one
// side: a delete, or an eviction or drop the command made (such misses are counted). An item md I marked
// stale is a live item, kept with its mark (TestRestartUndoSteps); the stale values rule 3 and rule 6 drop
// are lease-get's ghosts, which StaleWindow -1 turns off. Token bits are not compared (mg's W/Z).
//
// CRASH_RANDOM_OPS (commands per seed) and CRASH_RANDOM_SEEDS (a number of seeds, 1..n) make a longer
// campaign; the default runs a few seconds under -race. CRASH_RANDOM_TRACE=1 logs every command.
func TestRestartRandomCrashSteps(t *testing.T) {
	cases := []struct {
		seed  uint64
		limit int64 // MemoryLimit: 8 to 12 pages for ten-odd classes, so pages move
		parks bool  // synced periodically (an hour: the run syncs itself), so that page moves park
	}{
		{1, 8 << 20, false},
		{2, 12 << 20, false},
		{3, 8 << 20, false},
		{8, 12 << 20, true},
	}
	ops := 250
	if testing.Short() {
		ops = 60
	}
	if v := os.Getenv("CRASH_RANDOM_OPS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "CRASH_RANDOM_OPS")
		ops = n
	}
	if v := os.Getenv("CRASH_RANDOM_SEEDS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "CRASH_RANDOM_SEEDS")
		limits := []int64{8 << 20, 12 << 20, 16 << 20}
		cases = cases[:0]
		for i := range n {
			cases = append(cases, struct {
				seed  uint64
				limit int64
				parks bool
			}{uint64(i + 1), limits[i%len(limits)], i%4 == 3})
		}
	}
	t.Cleanup(func() { crashStepHook = nil })
	steps := map[int]int{} // steps gone through, over every seed
	for _, tc := range cases {
		t.Run(fmt.Sprintf("seed %d", tc.seed), func(t *testing.T) {
			cfg := Config{Shards: 1, StaleWindow: -1, MemoryLimit: tc.limit}
			if tc.parks {
				cfg.DataSync = time.Hour
			}
			r := newCrashRun(t, tc.seed, cfg)
			for i := range ops {
				if !r.step(i) {
					return
				}
			}
			st := r.s.Stats()
			t.Logf("seed %d: %d ops, images by step %v, %d keys missing from an image where allowed, "+
				"steps %v; %d evictions seen (store: %d evictions, %d pages moved, %d rescues)",
				tc.seed, ops, r.images, r.absent, r.steps, r.evicted, st.Evictions, st.SlabsMoved, st.SlabRescues)
			for at, n := range r.steps {
				steps[at] += n
			}
		})
	}
	if ops >= 250 {
		for at := undoCopied; at <= movedButCas; at++ {
			assert.Greater(t, steps[at], 20, "step %d: the mix hardly reaches it", at)
		}
	}
}

// crashItem is what a read of a key gives, as far as a restart must keep it.
type crashItem struct {
	val   string
	flags uint32
	exp   int64
	cas   uint64 // 0 in a command's expectation: a new one, not known until read
	stale bool   // md I marked it (mg's X): a restart keeps the item and the mark
}

func (it crashItem) String() string {
	v := it.val
	if len(v) > 24 {
		v = fmt.Sprintf("%q...(%d B)", v[:24], len(v))
	} else {
		v = strconv.Quote(v)
	}
	return fmt.Sprintf("{%s flags %d exp %d cas %d stale %v}", v, it.flags, it.exp, it.cas, it.stale)
}

// crashRun is one seed's store, model and random sequence.
type crashRun struct {
	t     *testing.T
	cfg   Config
	clk   *clock
	dir   string
	s     *Store
	rng   *rand.Rand
	odds  *rand.Rand // for images alone: the commands are the same whatever imageOdds says
	keys  []string
	model map[string]crashItem // what every key holds; absent: none
	last  string               // the previous command's key, which commands come back to (see key)
	moved bool                 // the command was a page move
	// refilled counts down the commands after a page move back to its own class: its chunks, free, still
	// hold the items they held, seals and all (only their state bytes were written), and the next stores
	// of the class take them: images at newHeadTaken are likelier then (TestRestartNewHeadStep).
	refilled int
	images   map[int]int // crash images taken, by step
	steps    map[int]int // steps gone through, by step
	// absent counts keys missing after a restart where that was allowed, evicted those the live store
	// lost to memory pressure (or a page move) under a command.
	absent, evicted int
}

func newCrashRun(t *testing.T, seed uint64, cfg Config) *crashRun {
	r := &crashRun{t: t, cfg: cfg, clk: newClock(), dir: t.TempDir(), rng: rand.New(rand.NewPCG(seed, 0x5eed)),
		odds:  rand.New(rand.NewPCG(seed, 0x0dd5)),
		model: map[string]crashItem{}, images: map[int]int{}, steps: map[int]int{}}
	r.s = persistStore(t, r.dir, r.clk, cfg)
	for i := range 40 {
		r.keys = append(r.keys, fmt.Sprintf("rk:%02d", i))
	}
	return r
}

// readItem is key k in s, by a read that changes nothing (no bump, no token), and its value's length; the
// value only when asked (a copy of a chained value costs milliseconds under -race).
func readItem(s *Store, k string, value bool) (crashItem, int, bool) {
	v, res := s.MetaGet(nil, []byte(k), &MetaGetRequest{NoUpdate: true, Aborted: true, Value: value})
	if !res.Hit {
		return crashItem{}, 0, false
	}
	return crashItem{string(v), res.Info.Flags, res.Info.Exptime, res.Info.Cas, res.Stale}, res.Info.Len, true
}

// imageOdds is the chance of a crash image at each step of a command (at most one a command): an image and
// a restart on it cost a quarter of a second under -race, where a command costs a millisecond. Steps where
// the item is whole in one chunk only and torn in the other weigh more (undoRewritten, newHeadTaken,
// movedButCas); every store goes through newChunkTaken and newHeadTaken, few commands move an item.
var imageOdds = [...]float64{undoCopied: 0.005, undoRewritten: 0.03, undoSealed: 0.01, undoDone: 0.005,
	newChunkTaken: 0.003, newHeadTaken: 0.008, movedButCas: 0.06}

// step runs command i, with a crash image at a random step of it now and then, and checks the live store
// and the restart on the image; false when a check failed.
func (r *crashRun) step(i int) bool {
	took, img := 0, ""
	crashStepHook = func(_ *shard, step int) {
		r.steps[step]++
		odds := imageOdds[step]
		if step == newHeadTaken && r.refilled > 0 {
			odds = 0.3
		}
		if img == "" && r.odds.Float64() < odds {
			took, img = step, crashImage(r.t, r.dir)
		}
	}
	before := r.model
	after := maps.Clone(before)
	r.moved = false
	r.refilled--
	what := r.command(i, after)
	crashStepHook = nil
	what = fmt.Sprintf("op %d: %s", i, what)
	if os.Getenv("CRASH_RANDOM_TRACE") != "" {
		r.t.Log(what)
	}
	if !r.checkLive(what, before, after, r.moved || i%25 == 24) {
		return false
	}
	r.model = after
	if i%50 == 49 {
		checkIndexInvariants(r.t, &r.s.shards[0])
	}
	if img == "" {
		return true
	}
	r.images[took]++
	return r.t.Run(fmt.Sprintf("op %d step %d", i, took), func(t *testing.T) {
		defer os.RemoveAll(img)
		s2 := persistStore(t, img, r.clk, r.cfg)
		defer s2.Close()
		for _, k := range r.keys {
			got, _, ok := readItem(s2, k, true)
			b, bok := before[k]
			a, aok := after[k]
			if ok == bok && (!ok || got == b) || ok == aok && (!ok || got == a) {
				if !ok && (bok || aok) {
					r.absent++
				}
				continue
			}
			t.Fatalf("%s, image at step %d: restart serves %s = %s; before %s, after %s",
				what, took, k, show(got, ok), show(b, bok), show(a, aok))
		}
		checkIndexInvariants(t, &s2.shards[0])
	})
}

// checkLive reads every key of the live store after a command: each must be as the model says (after,
// whose new CAS it fills in), or missing, which is an eviction (after then drops it). Values are read for
// the keys the command changed, and for every key when full (a page move); otherwise their length.
func (r *crashRun) checkLive(what string, before, after map[string]crashItem, full bool) bool {
	for _, k := range r.keys {
		want, in := after[k]
		got, n, ok := readItem(r.s, k, full || want != before[k])
		switch {
		case !ok && in:
			delete(after, k)
			r.evicted++
			continue
		case !ok:
			continue
		case got.val == "" && n == len(want.val):
			got.val = want.val // not read: the CAS says it is the same item
		}
		if want.cas == 0 {
			want.cas = got.cas
		}
		if !in || got != want {
			r.t.Errorf("%s: %s holds %s, want %s", what, k, show(got, ok), show(want, in))
			return false
		}
		after[k] = got
	}
	return true
}

// show is a key's state for a failure message.
func show(it crashItem, ok bool) string {
	if !ok {
		return "none"
	}
	return it.String()
}

// key is the key of the next command: often the previous one again, so that moves come back to the chunk
// they left (TestRestartMoveStepCasLast) and changes in place follow one another; often one the model
// holds, so that most commands find an item.
func (r *crashRun) key() string {
	switch x := r.rng.IntN(10); {
	case x < 3 && r.last != "":
	case x < 7 && len(r.model) > 0:
		var held []string
		for _, k := range r.keys {
			if _, ok := r.model[k]; ok {
				held = append(held, k)
			}
		}
		r.last = held[r.rng.IntN(len(held))]
	default:
		r.last = r.keys[r.rng.IntN(len(r.keys))]
	}
	return r.last
}

// value is a new value: small, under undoRoom in a larger class, over undoRoom, chained, or a counter.
func (r *crashRun) value(i int) []byte {
	switch x := r.rng.IntN(20); {
	case x < 7:
		return pattern(10+r.rng.IntN(91), i)
	case x < 9:
		return pattern(200+r.rng.IntN(700), i)
	case x < 13:
		return pattern(1500+r.rng.IntN(1501), i)
	case x < 15:
		return pattern(slab.ChunkMax+100+r.rng.IntN(60_000), i)
	default:
		return []byte(strconv.FormatUint(r.rng.Uint64N(1000), 10) + strings.Repeat(" ", r.rng.IntN(4)))
	}
}

// exptime is a command's exptime: none, or hours away (the clock moves seconds: nothing expires).
func (r *crashRun) exptime() int64 {
	if r.rng.IntN(3) == 0 {
		return 0
	}
	return 3600 + r.rng.Int64N(86400)
}

// command runs command i, a random one, and records its answered effect in model (model's key
// missing where the store was to drop it: then the check counts an eviction). It returns what it did.
func (r *crashRun) command(i int, model map[string]crashItem) string {
	t, s := r.t, r.s
	now := r.clk.now()
	abs := func(exptime int64) int64 { return int64(absExptime(exptime, now)) }
	k := r.key()
	old, in := model[k]
	switch x := r.rng.IntN(100); {
	case x < 28: // set, add, replace, cas
		mode := []Mode{ModeSet, ModeSet, ModeAdd, ModeReplace, ModeCas}[r.rng.IntN(5)]
		val, flags, exp := r.value(i), r.rng.Uint32N(4), r.exptime()
		cas := old.cas
		if r.rng.IntN(4) == 0 {
			cas++
		}
		res := s.Store(mode, []byte(k), flags, exp, val, cas)
		want := Stored
		switch {
		case mode == ModeAdd && in, mode == ModeReplace && !in:
			want = NotStored
		case mode == ModeCas && !in:
			want = NotFound
		case mode == ModeCas && cas != old.cas:
			want = Exists
		}
		if res != want {
			require.True(t, want == Stored && res == NoMemory, "%s %s: %s, want %s", mode, k, res, want)
		}
		switch {
		case res == Stored:
			model[k] = crashItem{val: string(val), flags: flags, exp: abs(exp)}
		case res == NoMemory && mode == ModeSet:
			delete(model, k) // a failed set drops the old value
		}
		return fmt.Sprintf("%s %s %d B flags %d exp %d: %s", mode, k, len(val), flags, exp, res)
	case x < 37: // append, prepend
		mode, data := ModeAppend, r.value(i)
		if x >= 32 {
			mode = ModePrepend
		}
		if len(data) > undoRoom*3 {
			data = data[:100]
		}
		res := s.Store(mode, []byte(k), 0, 0, data, 0)
		if !in {
			require.Equal(t, NotStored, res, "%s %s", mode, k)
		} else if res == Stored {
			v := old.val + string(data)
			if mode == ModePrepend {
				v = string(data) + old.val
			}
			model[k] = crashItem{val: v, flags: old.flags, exp: old.exp}
		} else {
			require.Equal(t, NotStored, res, "%s %s", mode, k) // too large, or no memory
		}
		return fmt.Sprintf("%s %s %d B: %s", mode, k, len(data), res)
	case x < 42:
		res := s.Delete([]byte(k))
		require.Equal(t, map[bool]Result{true: Deleted, false: NotFound}[in], res, "delete %s", k)
		delete(model, k)
		return fmt.Sprintf("delete %s: %s", k, res)
	case x < 58: // touch, gat, mg T, mg N T
		exp, how := r.exptime(), r.rng.IntN(4)
		if how == 3 {
			req := MetaGetRequest{Ops: ops(ExpVivify, int(exp)), Vivify: true, Locked: true}
			_, res := s.MetaGet(nil, []byte(k), &req)
			require.Equal(t, !in, res.Created, "mg %s N: created", k)
			if res.Created {
				model[k] = crashItem{exp: abs(exp)} // made with its exptime: one change
			}
			return fmt.Sprintf("mg %s N%d: created %v", k, exp, res.Created)
		}
		var hit bool
		switch how {
		case 0:
			hit = s.Touch([]byte(k), exp) == Touched
		case 1:
			var v []byte
			v, _, hit = s.GetAndTouch(nil, []byte(k), exp)
			assert.True(t, !hit || string(v) == old.val, "gat %s: the value", k)
		default:
			req := MetaGetRequest{Ops: ops(ExpTouch, int(exp)), Locked: true, Value: true}
			var v []byte
			var res MetaGetResult
			v, res = s.MetaGet(nil, []byte(k), &req)
			hit = res.Hit
			assert.True(t, !hit || string(v) == old.val, "mg T %s: the value", k)
		}
		require.False(t, hit && !in, "touch %s: a hit on no item", k)
		if hit {
			old.exp = abs(exp)
			model[k] = old // same CAS
		}
		return fmt.Sprintf("%s %s exp %d: hit %v", []string{"touch", "gat", "mg T"}[how], k, exp, hit)
	case x < 70 && !in: // ma N T on a miss: a counter made with its exptime
		initial, exp := r.rng.Uint64N(1000), r.exptime()
		res := s.MetaArith([]byte(k), &MetaArithRequest{Incr: true, Delta: 1, Vivify: true, Initial: initial, Ops: ops(ExpVivify, int(exp))})
		require.True(t, res.Created || res.Result == NoMemory, "ma %s N: %s", k, res.Result)
		if res.Created {
			model[k] = crashItem{val: strconv.FormatUint(initial, 10), exp: abs(exp)}
		}
		return fmt.Sprintf("ma %s N%d J%d: %s", k, exp, initial, res.Result)
	case x < 68: // get: marks the item read, which page moves keep
		v, _, hit := s.Get(nil, []byte(k))
		require.Equal(t, in, hit, "get %s", k)
		require.True(t, !hit || string(v) == old.val, "get %s: the value", k)
		return fmt.Sprintf("get %s: hit %v", k, hit)
	case x < 78: // incr, decr; ma with T now and then
		incr, delta := r.rng.IntN(2) == 0, r.rng.Uint64N(2000)
		if r.rng.IntN(10) == 0 {
			delta = r.rng.Uint64()
		}
		var n uint64
		var res Result
		ttl, exp := r.rng.IntN(3) == 0, r.exptime()
		if ttl {
			out := s.MetaArith([]byte(k), &MetaArithRequest{Incr: incr, Delta: delta, Ops: ops(ExpTouch, int(exp))})
			n, res = out.Value, out.Result
		} else {
			n, res = s.Arith([]byte(k), incr, delta)
		}
		what := fmt.Sprintf("incr %v %s by %d (T %v %d): %s", incr, k, delta, ttl, exp, res)
		cur, numeric := parseCounter([]byte(old.val))
		switch {
		case !in:
			require.Equal(t, NotFound, res, what)
		case !numeric || len(old.val) > slab.ChunkMax/2: // a chained item is not a counter
			require.Equal(t, NonNumeric, res, what)
		case res == Stored:
			switch {
			case incr:
				cur += delta
			case delta > cur:
				cur = 0
			default:
				cur -= delta
			}
			require.Equal(t, cur, n, what)
			it := crashItem{val: strconv.FormatUint(cur, 10), flags: old.flags, exp: old.exp, stale: old.stale}
			if len(it.val) <= len(old.val) { // in place, padded: the item keeps its bits, and takes T
				it.val += strings.Repeat(" ", len(old.val)-len(it.val))
				if ttl {
					it.exp = abs(exp)
				}
			} else {
				it.stale = false // a new item
			}
			model[k] = it
		default:
			require.Equal(t, NoMemory, res, what)
		}
		return what
	case x < 88: // md I, with T now and then
		req := MetaDeleteRequest{Invalidate: true, SetTTL: r.rng.IntN(2) == 0, Exptime: r.exptime()}
		res := s.MetaDelete([]byte(k), &req)
		require.Equal(t, map[bool]Result{true: Deleted, false: NotFound}[in], res, "md %s I", k)
		if in && req.SetTTL {
			old.exp = abs(req.Exptime)
		}
		if in {
			old.cas, old.stale = 0, true
			model[k] = old
		}
		return fmt.Sprintf("md %s I (T %v %d): %s", k, req.SetTTL, req.Exptime, res)
	case x < 96:
		return r.pageMove()
	default:
		d := 1 + r.rng.Int64N(3)
		r.clk.advance(d)
		return fmt.Sprintf("clock +%ds", d)
	}
}

// pageMove drains a random page of the shard and gives it to its own class or another (drainTo): what
// the rebalancer does, on a page it would not have picked.
func (r *crashRun) pageMove() string {
	r.moved = true
	sh := &r.s.shards[0]
	sh.mu.Lock()
	var pages, shared []uint32 // shared: of a class with other pages, where a rescue finds a chunk
	for id := range r.s.classes.Count() {
		for i := range sh.al.Pages(id) {
			pages = append(pages, sh.al.PageAt(id, i))
			if sh.al.Pages(id) > 1 {
				shared = append(shared, sh.al.PageAt(id, i))
			}
		}
	}
	if len(shared) > 0 && r.rng.IntN(4) > 0 {
		pages = shared
	}
	if len(pages) == 0 {
		sh.mu.Unlock()
		return "page move: no page"
	}
	p := pages[r.rng.IntN(len(pages))]
	first, _, _ := sh.al.PageChunks(p)
	from := sh.al.ClassOf(first)
	sh.mu.Unlock()
	to := from
	if r.rng.IntN(2) == 0 {
		to = r.rng.IntN(r.s.classes.Count())
	}
	if !r.s.shards[0].al.Parks() {
		drainTo(r.t, r.s, p, to)
		if to == from {
			r.refilled = 4
		}
		return fmt.Sprintf("page move of page %d: class %d to %d", p, from, to)
	}
	// Where pages park, a sync now and then gives the parked ones back (drain.go).
	synced := sh.al.ParkedPages() > 0 && r.rng.IntN(2) == 0
	if synced {
		r.s.persist.sync()
		r.s.releaseSynced()
	}
	sh.mu.Lock()
	gave, parked := sh.endDrain(to, sh.drainPage(p, r.s.now(), true))
	sh.mu.Unlock()
	if gave && to == from {
		r.refilled = 4
	}
	return fmt.Sprintf("page move of page %d: class %d to %d (synced first %v): parked %v", p, from, to, synced, parked)
}
