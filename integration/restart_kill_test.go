package integration

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// kill -9 during a write-heavy load (issue 30, "Tests in make test"): writers on several connections keep
// a model of every key they own (the state the server acknowledged, and the states of requests sent but
// not answered yet); the server is killed at a random moment, started again on the same directory, and
// every key must hold the acknowledged state or one in flight: never a value that was not stored, never a
// torn one, never a key whose acknowledged delete was undone.

const (
	killWriters       = 4    // writer connections: the even ones pipeline, the odd ones send one at a time
	killKeysPerWriter = 1500 // keys each writer owns (no two writers share a key)
	killNumericEvery  = 5    // every fifth key holds a number (incr)
	killMaxBatch      = 48   // the most requests a pipelining writer sends before reading replies
	// killRounds is make test's; make restart-soak sets killRoundsEnv.
	killRounds = 3
	killMaxOps = 2_000_000 // bounds a writer's requests in one round (it is stopped by the kill)
	// killMinRun and killMaxRun bound how long the load runs before SIGKILL.
	killMinRun, killMaxRun = 300 * time.Millisecond, 1500 * time.Millisecond
	// killMaxValue bounds a string value; an append that would pass it is a set instead.
	killMaxValue = 16 << 10
	// restartSeedEnv fixes the seed of the randomised restart tests, to replay a failure.
	restartSeedEnv = "LEASECACHED_RESTART_SEED"
	// killRoundsEnv sets the kill -9 tests' rounds instead of killRounds (make restart-soak).
	killRoundsEnv = "LEASECACHED_KILL_ROUNDS"
)

// killRoundsFor is how many rounds the kill -9 tests run: killRoundsEnv, or killRounds.
func killRoundsFor(t testing.TB) int {
	t.Helper()
	s := os.Getenv(killRoundsEnv)
	if s == "" {
		return killRounds
	}
	n, err := strconv.Atoi(s)
	require.NoError(t, err, killRoundsEnv)
	require.Positive(t, n, killRoundsEnv)
	return n
}

// restartSeed is the seed a randomised restart test uses: restartSeedEnv, or the clock. The test logs it.
func restartSeed(t testing.TB) int64 {
	t.Helper()
	seed := time.Now().UnixNano()
	if s := os.Getenv(restartSeedEnv); s != "" {
		var err error
		seed, err = strconv.ParseInt(s, 10, 64)
		require.NoError(t, err, restartSeedEnv)
	}
	t.Logf("seed %d (replay with %s=%d)", seed, restartSeedEnv, seed)
	return seed
}

// kState is a state of a key: absent, or an item.
type kState struct {
	present bool
	flags   uint32
	val     []byte
}

func (s kState) String() string {
	if !s.present {
		return "absent"
	}
	return fmt.Sprintf("flags %d, %d bytes %s", s.flags, len(s.val), describeKillValue(s.val))
}

func (s kState) same(o kState) bool {
	return s.present == o.present && (!s.present || s.flags == o.flags && bytes.Equal(s.val, o.val))
}

// kKey is the model of one key: what the server acknowledged last, and the states requests in flight
// (sent, not answered) lead to, oldest first. The requests of one key go over one connection, in order,
// so after a crash the key holds acked or one of inflight.
type kKey struct {
	name     string
	numeric  bool
	acked    kState
	inflight []kState
	cas      uint64 // the CAS unique seen at the last check (0: absent)
	touched  bool   // a request for it was sent since the last check
}

func (k *kKey) last() kState {
	if n := len(k.inflight); n > 0 {
		return k.inflight[n-1]
	}
	return k.acked
}

// allowed reports whether got is a state the key may hold after a crash, and which: 0 the acknowledged
// one, i > 0 the i-th in flight.
func (k *kKey) allowed(got kState) (int, bool) {
	if got.same(k.acked) {
		return 0, true
	}
	for i, s := range k.inflight {
		if got.same(s) {
			return i + 1, true
		}
	}
	return -1, false
}

// describeKillValue names a string value by its header (key|seq|), to tell a stale or foreign value
// from a torn one in a failure message.
func describeKillValue(v []byte) string {
	if m := killHeader.Find(v); m != nil {
		return fmt.Sprintf("(%q, %d appends)", m, len(killAppend.FindAll(v, -1)))
	}
	return fmt.Sprintf("(starting %x)", v[:min(len(v), 8)])
}

// killHeader is the start of a killValue, killAppend the start of an appended piece.
var killHeader, killAppend = regexp.MustCompile(`^kw\d+_\d+\|\d+\|`), regexp.MustCompile(`\+\d+\|`)

// killWriter is one connection's load: its keys and its random source.
type killWriter struct {
	id        int
	pipelined bool
	rng       *rand.Rand
	keys      []*kKey
	seq       int
	ops, acks int
	err       error // a reply that was wrong while the server lived
}

// kOp is one request: its bytes are queued, its key and expected reply remembered.
type kOp struct {
	key  *kKey
	want string
}

// next queues one request for a random key on w and returns what it expects.
func (w *killWriter) next(c *rsConn) kOp {
	k := w.keys[w.rng.Intn(len(w.keys))]
	cur := k.last()
	w.seq++
	seq := w.seq
	var op kOp
	var next kState
	p := w.rng.Intn(100)
	switch {
	case p < 12: // delete
		fmt.Fprintf(c.w, "delete %s\r\n", k.name)
		op.want = map[bool]string{true: "DELETED", false: "NOT_FOUND"}[cur.present]
		next = kState{}
	case k.numeric && p < 70 && cur.present: // incr
		delta := uint64(1 + w.rng.Intn(1_000_000))
		n, err := strconv.ParseUint(string(cur.val), 10, 64)
		if err != nil {
			panic(fmt.Sprintf("numeric key %s holds %q", k.name, cur.val))
		}
		fmt.Fprintf(c.w, "incr %s %d\r\n", k.name, delta)
		op.want = strconv.FormatUint(n+delta, 10)
		next = kState{present: true, flags: cur.flags, val: []byte(op.want)}
	case k.numeric: // set a number
		v := []byte(strconv.FormatUint(uint64(w.rng.Int63n(1_000_000_000_000)), 10))
		next = kState{present: true, flags: uint32(seq), val: v}
		c.queueStore("set", k.name, next.flags, 0, v)
		op.want = "STORED"
	case p < 40 && cur.present && len(cur.val) < killMaxValue: // append
		piece := append([]byte(fmt.Sprintf("+%d|", seq)), rsValue(k.name, seq, w.rng.Intn(200))...)
		c.queueStore("append", k.name, 0, 0, piece)
		op.want = "STORED"
		next = kState{present: true, flags: cur.flags, val: append(append([]byte{}, cur.val...), piece...)}
	case p < 45: // add: stores only when absent
		v := killValue(k.name, seq, w.rng)
		c.queueStore("add", k.name, uint32(seq), 0, v)
		if cur.present {
			op.want, next = "NOT_STORED", cur
		} else {
			op.want, next = "STORED", kState{present: true, flags: uint32(seq), val: v}
		}
	default: // set
		v := killValue(k.name, seq, w.rng)
		c.queueStore("set", k.name, uint32(seq), 0, v)
		op.want = "STORED"
		next = kState{present: true, flags: uint32(seq), val: v}
	}
	op.key = k
	k.touched = true
	k.inflight = append(k.inflight, next)
	return op
}

// killValue is a string value that names its key and step, then deterministic bytes: mostly small,
// sometimes some KB.
func killValue(key string, seq int, rng *rand.Rand) []byte {
	n := rng.Intn(300)
	if rng.Intn(20) == 0 {
		n = rng.Intn(12 << 10)
	}
	return append([]byte(fmt.Sprintf("%s|%d|", key, seq)), rsValue(key, seq, n)...)
}

// run sends requests until stop is closed, the connection fails (the kill) or killMaxOps.
func (w *killWriter) run(c *rsConn, stop <-chan struct{}) {
	var batch []kOp
	for w.ops < killMaxOps {
		select {
		case <-stop:
			return
		default:
		}
		n := 1
		if w.pipelined {
			n = 1 + w.rng.Intn(killMaxBatch)
		}
		batch = batch[:0]
		for range n {
			batch = append(batch, w.next(c))
		}
		w.ops += n
		// From here the batch is in flight: the server may have any prefix of it when it dies.
		if err := c.flush(); err != nil {
			return
		}
		for _, op := range batch {
			l, err := c.line()
			if err != nil {
				return // the server died; this request and the ones after it stay in flight
			}
			if l != op.want {
				w.err = fmt.Errorf("writer %d, key %s: reply %q, want %q", w.id, op.key.name, l, op.want)
				return
			}
			op.key.acked = op.key.inflight[0]
			op.key.inflight = op.key.inflight[1:]
			w.acks++
		}
	}
}

// TestRestartAfterKillDuringWrites kills the server with SIGKILL at a random moment of a write-heavy load
// (set, add, append, incr, delete over pipelined and one-at-a-time connections), starts it on the same
// directory, and checks every key against the model; killRounds times (killRoundsFor), each round going on from what the
// previous one recovered. Unchanged keys keep their CAS unique; a key written after a restart gets one
// larger than every one seen before that restart.
func TestRestartAfterKillDuringWrites(t *testing.T) {
	requireRestart(t)
	killDuringWrites(t, killRoundsFor(t), func(dir string) *daemon { return startOnDir(t, dir) },
		func(d *daemon) { stopDaemon(t, d, stopKill) })
}

// TestRestartAfterKillDuringWritesLive is TestRestartAfterKillDuringWrites with --data-live: the items
// the server maps are on tmpfs, which outlives the process, and the data directory's files are written
// from them at each sync (the first sync after each restart copies every block).
func TestRestartAfterKillDuringWritesLive(t *testing.T) {
	requireRestart(t)
	live := liveArgs(t)
	killDuringWrites(t, killRoundsFor(t), func(dir string) *daemon { return startOnDir(t, dir, append(live, "--data-sync", "1s")...) },
		func(d *daemon) { stopDaemon(t, d, stopKill) })
}

// TestRestartAfterKillDuringWritesSwitchingRoots is TestRestartAfterKillDuringWritesLive with the live
// copy's root changed at each restart (one root, another, --data-live off, the first again): a start on
// another root, or off, first writes the killed server's copy, ahead of the directory by what came after
// the last sync, into the directory (doc/design/restart-live.md), so no value goes back.
func TestRestartAfterKillDuringWritesSwitchingRoots(t *testing.T) {
	requireRestart(t)
	roots := [][]string{liveArgs(t), liveArgs(t), {"--data-live", "off"}}
	starts := 0
	// The copy a killed server left under the previous root is written into DIR first, and the start says
	// so (--data-live off clears DIR's instance: the start after it has no copy to write). Checked once
	// the daemon has exited, when all it wrote has been read.
	caughtUp := map[*daemon]bool{}
	check := func(d *daemon) {
		require.Equal(t, caughtUp[d], strings.Contains(d.out.String(), "was newer"), "its output:\n%s", d.out.String())
	}
	var last *daemon
	killDuringWrites(t, killRoundsFor(t), func(dir string) *daemon {
		args := append(roots[starts%len(roots)], "--data-sync", "1s")
		last = startOnDir(t, dir, args...)
		caughtUp[last] = starts%len(roots) != 0
		starts++
		return last
	}, func(d *daemon) {
		stopDaemon(t, d, stopKill)
		check(d)
	})
	stopDaemon(t, last, stopKill)
	check(last)
}

// killDuringWrites is TestRestartAfterKillDuringWrites' body, for any number of rounds and any way to die:
// start starts a daemon on the directory, and kill must end it at a round's random moment.
func killDuringWrites(t *testing.T, rounds int, start func(dir string) *daemon, kill func(d *daemon)) {
	seed := restartSeed(t)
	rng := rand.New(rand.NewSource(seed))
	dir := t.TempDir()

	writers := make([]*killWriter, killWriters)
	var all []*kKey
	for i := range writers {
		w := &killWriter{id: i, pipelined: i%2 == 0, rng: rand.New(rand.NewSource(seed + int64(i) + 1))}
		for j := range killKeysPerWriter {
			k := &kKey{name: fmt.Sprintf("kw%d_%d", i, j), numeric: j%killNumericEvery == 0}
			w.keys = append(w.keys, k)
			all = append(all, k)
		}
		writers[i] = w
	}
	names := make([]string, len(all))
	for i, k := range all {
		names[i] = k.name
	}

	d := start(dir)
	waitLoaded(t, d)
	var casBefore uint64 // the largest CAS seen before the last restart
	for round := range rounds {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for _, w := range writers {
			w.ops, w.acks = 0, 0
			c, err := dialRS(d)
			require.NoError(t, err)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				w.run(c, stop)
			}()
		}
		run := killMinRun + time.Duration(rng.Int63n(int64(killMaxRun-killMinRun)))
		time.Sleep(run)
		kill(d)
		close(stop)
		wg.Wait()
		var ops, acks, inflight int
		for _, w := range writers {
			require.NoError(t, w.err, "round %d: a wrong reply before the kill", round)
			ops, acks = ops+w.ops, acks+w.acks
		}
		for _, k := range all {
			inflight += len(k.inflight)
		}

		d = start(dir)
		st := waitLoaded(t, d)
		c := mustDialRS(t, d)
		got, err := c.getItems("gets", names)
		require.NoError(t, err)
		var atAcked, atInflight, wrong int
		var casMax uint64
		for _, k := range all {
			g, ok := got[k.name]
			s := kState{present: ok, flags: g.flags, val: g.val}
			i, allowed := k.allowed(s)
			switch {
			case !allowed:
				wrong++
				if wrong <= 20 {
					var fl []string
					for _, f := range k.inflight {
						fl = append(fl, f.String())
					}
					diff := ""
					if s.present && k.acked.present {
						diff = "; against the acknowledged value: " + firstDiff(s.val, k.acked.val)
					}
					t.Errorf("round %d, key %s: got %s; acknowledged %s; in flight [%s]%s", round, k.name, s,
						k.acked, strings.Join(fl, "; "), diff)
				}
			case i == 0:
				atAcked++
			default:
				atInflight++
			}
			if ok && !k.touched && g.cas != k.cas {
				// No request since the last check: the restart must keep its CAS.
				t.Errorf("round %d, key %s: CAS %d after the restart, %d before it", round, k.name, g.cas, k.cas)
			}
			if ok && k.touched && g.cas != k.cas && g.cas <= casBefore {
				t.Errorf("round %d, key %s: written after the last restart with CAS %d, not above %d seen before it",
					round, k.name, g.cas, casBefore)
			}
			casMax = max(casMax, g.cas)
			// The next round goes on from what is there now.
			k.acked, k.inflight, k.cas, k.touched = s, nil, g.cas, false
		}
		t.Logf("round %d: the kill began after %v; %d requests sent, %d acknowledged, %d in flight; after the "+
			"restart %d keys at the acknowledged state, %d at one in flight, %d wrong; %s=%s %s=%s %s=%s", round, run, ops,
			acks, inflight, atAcked, atInflight, wrong, statLoaded, st[statLoaded], statDropped, st[statDropped],
			statSeconds, st[statSeconds])
		if wrong > 20 {
			t.Errorf("round %d: %d wrong keys in all", round, wrong)
		}
		require.False(t, t.Failed(), "round %d failed", round)
		casBefore = max(casBefore, casMax)
	}
	if d.proc != nil { // nil: a daemon this test did not start (vm_test.go)
		assert.True(t, d.proc.Running(), "the server exited")
	}
}
