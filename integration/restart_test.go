package integration

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasecached/leasecached/internal/testdaemon"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Warm restart (issue 30, the contract in doc/design and the issue): what a server started again on the
// same --data-dir serves. The kill -9 test is restart_kill_test.go, the corruption test
// restart_corrupt_test.go, serving while loading restart_loading_test.go.

// gracefulModel is what TestRestartGracefulKeepsEverything stored.
type gracefulModel struct {
	text    map[string]rsItem // key -> flags and value
	bin     map[string]rsItem // base64 of a binary key -> flags and value
	binKeys []string          // bin's keys in a fixed order
	expires map[string]int64  // text key -> absolute exptime (unix seconds), for keys stored with one
}

// Sizes of the large values of the graceful test (-I 2m): past a slab page (1 MiB) they are chained.
var gracefulLargeSizes = []int{1, 1000, 100_000, 512 << 10, 1_000_000, 1 << 20, 1_500_000, 2_000_000}

// gracefulFlags are the flags the small items cycle through (both ends of the 32-bit range).
var gracefulFlags = []uint32{0, 1, 65535, 4294967295, 2654435761}

const (
	gracefulSmall  = 2000 // small items (0..4 KB), pipelined
	gracefulBinary = 40   // keys stored with `ms <base64> ... b`
	gracefulAppend = 20   // keys built by set + append + prepend
	// ttlSlack is how far a remaining TTL may be from the one computed from the absolute exptime: the
	// server's clock ticks in seconds.
	ttlSlack = 2
)

// fillGraceful stores the graceful test's mix through c and returns its model.
func fillGraceful(t *testing.T, c *rsConn) gracefulModel {
	t.Helper()
	m := gracefulModel{text: map[string]rsItem{}, bin: map[string]rsItem{}, expires: map[string]int64{}}
	now := time.Now().Unix()
	// Small items: every size 0..300 (empty values included) and some up to 4 KB; no exptime, a relative
	// one, an absolute one.
	for i := range gracefulSmall {
		key := fmt.Sprintf("gs%04d", i)
		n := i % 301
		if i%5 == 0 {
			n = (i * 37) % 4097
		}
		it := rsItem{flags: gracefulFlags[i%len(gracefulFlags)], val: rsValue(key, 0, n)}
		var exp int64
		switch i % 3 {
		case 1:
			exp, m.expires[key] = 3600, now+3600
		case 2:
			exp = now + 7200
			m.expires[key] = exp
		}
		c.queueStore("set", key, it.flags, exp, it.val)
		m.text[key] = it
		if (i+1)%rsGetBatch == 0 || i == gracefulSmall-1 {
			require.NoError(t, c.flush())
			for range (i % rsGetBatch) + 1 {
				l, err := c.line()
				require.NoError(t, err)
				require.Equal(t, "STORED", l)
			}
		}
	}
	// Large values, chained past a page.
	for i, n := range gracefulLargeSizes {
		key := fmt.Sprintf("gl%d", i)
		it := rsItem{flags: uint32(i), val: rsValue(key, 0, n)}
		l, err := c.store("set", key, it.flags, 0, it.val)
		require.NoError(t, err)
		require.Equal(t, "STORED", l, "set %s of %d bytes", key, n)
		m.text[key] = it
	}
	// Values made by incr and decr; the model takes the bytes the server shows (memcached pads a shorter
	// decr result with spaces in place), after checking the number.
	for i, tc := range []struct {
		start, op string
		want      uint64
	}{
		{"10", "incr gn0 5", 15},
		{"99", "incr gn1 1", 100},
		{"18446744073709551615", "incr gn2 1", 0},
		{"1000", "decr gn3 1", 999},
		{"5", "decr gn4 9", 0},
	} {
		key := fmt.Sprintf("gn%d", i)
		l, err := c.store("set", key, 7, 0, []byte(tc.start))
		require.NoError(t, err)
		require.Equal(t, "STORED", l)
		l, err = c.call(tc.op + "\r\n")
		require.NoError(t, err)
		require.Equal(t, strconv.FormatUint(tc.want, 10), l, tc.op)
		got, err := c.getItems("get", []string{key})
		require.NoError(t, err)
		require.Contains(t, got, key)
		require.Equal(t, strconv.FormatUint(tc.want, 10), strings.TrimRight(string(got[key].val), " "))
		m.text[key] = got[key]
	}
	// Values made by append and prepend.
	for i := range gracefulAppend {
		key := fmt.Sprintf("ga%d", i)
		val := rsValue(key, 0, 10+i)
		l, err := c.store("set", key, 3, 0, val)
		require.NoError(t, err)
		require.Equal(t, "STORED", l)
		for j := range i % 4 {
			piece := rsValue(key, j+1, 1+j*100)
			l, err = c.store("append", key, 0, 0, piece)
			require.NoError(t, err)
			require.Equal(t, "STORED", l)
			val = append(val, piece...)
		}
		piece := []byte(fmt.Sprintf("p%d-", i))
		l, err = c.store("prepend", key, 0, 0, piece)
		require.NoError(t, err)
		require.Equal(t, "STORED", l)
		m.text[key] = rsItem{flags: 3, val: append(piece, val...)}
	}
	// Binary keys (any byte, NUL and space included), stored with ms ... b.
	for i := range gracefulBinary {
		raw := rsValue("binkey", i, 1+i*4) // up to 157 bytes: the base64 form is the key, at most 250
		b64 := base64.StdEncoding.EncodeToString(raw)
		it := rsItem{flags: uint32(i * 1000), val: rsValue(b64, 0, i*50)}
		l, err := c.call(fmt.Sprintf("ms %s %d b F%d T%d\r\n%s\r\n", b64, len(it.val), it.flags, 3600*(i%2), it.val))
		require.NoError(t, err)
		require.Equal(t, "HD", l, "ms of binary key %x", raw)
		m.bin[b64] = it
		m.binKeys = append(m.binKeys, b64)
	}
	return m
}

// gracefulSnapshot is what a server shows of a gracefulModel.
type gracefulSnapshot struct {
	items map[string]rsItem // gets of every text key
	bin   []mgReply         // mg <b64> b k v f c, in binKeys order
}

// readGraceful reads every key of m from c and checks it against the model: each present, with its
// flags and value byte-exact, and the remaining TTL of those with an exptime the one the absolute
// exptime gives now.
func readGraceful(t *testing.T, c *rsConn, m gracefulModel) gracefulSnapshot {
	t.Helper()
	keys := make([]string, 0, len(m.text))
	for k := range m.text {
		keys = append(keys, k)
	}
	items, err := c.getItems("gets", keys)
	require.NoError(t, err)
	errs := errorCap{t: t}
	for _, k := range keys {
		got, ok := items[k]
		want := m.text[k]
		switch {
		case !ok:
			errs.add("key %s missing", k)
		case want.flags != got.flags || string(want.val) != string(got.val):
			errs.add("%s: flags %d and %d bytes, want flags %d and %d bytes (%s)", k, got.flags, len(got.val),
				want.flags, len(want.val), firstDiff(got.val, want.val))
		}
	}
	bin, err := c.metaGets(m.binKeys, "b k v f c")
	require.NoError(t, err)
	for i, r := range bin {
		b64 := m.binKeys[i]
		want := m.bin[b64]
		wantHead := fmt.Sprintf("VA %d k%s b f%d c", len(want.val), b64, want.flags)
		if !strings.HasPrefix(r.head, wantHead) || string(want.val) != string(r.val) {
			errs.add("mg of binary key %s: %q and %d bytes, want %q<cas> and %d bytes", b64, r.head, len(r.val),
				wantHead, len(want.val))
		}
	}
	var expKeys []string
	for k := range m.expires {
		expKeys = append(expKeys, k)
	}
	ttls, err := c.metaGets(expKeys, "t")
	require.NoError(t, err)
	now := time.Now().Unix()
	for i, r := range ttls {
		k := expKeys[i]
		var ttl int64
		if _, err := fmt.Sscanf(r.head, "HD t%d", &ttl); err != nil {
			errs.add("mg %s t: %q", k, r.head)
		} else if want := m.expires[k] - now; ttl < want-ttlSlack || ttl > want+ttlSlack {
			errs.add("remaining TTL of %s: %d, want %d (absolute exptime %d, now %d)", k, ttl, want, m.expires[k], now)
		}
	}
	errs.done()
	return gracefulSnapshot{items: items, bin: bin}
}

// errorCap reports the first errorCapMax errors of a check, then how many there were in all: a server
// that lost everything should not print a line per key.
type errorCap struct {
	t testing.TB
	n int
}

const errorCapMax = 10

func (e *errorCap) add(format string, args ...any) {
	e.t.Helper()
	e.n++
	if e.n <= errorCapMax {
		e.t.Errorf(format, args...)
	}
}

// done reports how many errors were left out.
func (e *errorCap) done() {
	e.t.Helper()
	if e.n > errorCapMax {
		e.t.Errorf("... %d errors in all", e.n)
	}
}

// firstDiff describes where two values first differ, for a failure message.
func firstDiff(got, want []byte) string {
	for i := 0; i < min(len(got), len(want)); i++ {
		if got[i] != want[i] {
			return fmt.Sprintf("first difference at byte %d", i)
		}
	}
	if len(got) != len(want) {
		return fmt.Sprintf("one is a prefix of the other, lengths %d and %d", len(got), len(want))
	}
	return "equal"
}

// TestRestartGracefulKeepsEverything: after a graceful stop (SIGTERM, SIGINT, SIGUSR1) and a start on the
// same directory, every item is back byte-exact: flags, value (empty to 2 MB, chained past a page, made by
// incr, decr, append, prepend), binary keys as mg shows them, absolute exptimes, and the CAS unique of
// every unchanged item; the first store after the restart gets a CAS larger than any before it.
// The shutdown command (with -A) stops it as well.
func TestRestartGracefulKeepsEverything(t *testing.T) {
	requireRestart(t)
	for _, how := range []stopHow{stopTerm, stopInt, stopUsr1, stopCommand} {
		t.Run(string(how), func(t *testing.T) {
			dir := t.TempDir()
			d := startOnDir(t, dir, "-I", "2m", "-A")
			st := waitLoaded(t, d)
			assert.Equal(t, "0", st[statLoaded], "a fresh directory has nothing to load")
			// The contract said 0.000000 on a fresh directory; the implementation times its look at the empty
			// files (0.0003 s), which is as true.
			assert.Regexp(t, `^0\.\d{6}$`, st[statSeconds], "restart_seconds on a fresh directory")
			c := mustDialRS(t, d)
			m := fillGraceful(t, c)
			before := readGraceful(t, c, m)
			require.False(t, t.Failed(), "the server did not serve the model before the restart")
			stopDaemon(t, d, how)

			d2 := startOnDir(t, dir, "-I", "2m")
			st = waitLoaded(t, d2)
			t.Logf("after %s: %s=%s %s=%s %s=%s", how, statLoaded, st[statLoaded], statDropped, st[statDropped],
				statSeconds, st[statSeconds])
			assert.Equal(t, int64(len(m.text)+len(m.bin)), statInt(t, st, statLoaded), statLoaded)
			assert.Regexp(t, `^\d+\.\d{6}$`, st[statSeconds], statSeconds)
			c2 := mustDialRS(t, d2)
			after := readGraceful(t, c2, m)
			errs := errorCap{t: t}
			for k, b := range before.items {
				if a, ok := after.items[k]; ok && a.cas != b.cas {
					errs.add("CAS of the unchanged item %s: %d after the restart, %d before", k, a.cas, b.cas)
				}
			}
			for i := range before.bin {
				if a, b := after.bin[i].head, before.bin[i].head; a != b {
					errs.add("mg of binary key %s: %q after the restart, %q before", m.binKeys[i], a, b)
				}
			}
			errs.done()

			// CAS uniques keep growing: a store over an old key and a new key both get larger ones.
			maxBefore := maxCAS(before.items)
			for _, k := range []string{"gs0000", "new-after-restart"} {
				l, err := c2.store("set", k, 0, 0, []byte("v"))
				require.NoError(t, err)
				require.Equal(t, "STORED", l)
				got, err := c2.getItems("gets", []string{k})
				require.NoError(t, err)
				assert.Greater(t, got[k].cas, maxBefore, "CAS of %s stored after the restart", k)
			}
		})
	}
}

// expectAbsent fails the test for every key of keys that get finds.
func expectAbsent(t *testing.T, c *rsConn, keys []string, why string) {
	t.Helper()
	got, err := c.getItems("get", keys)
	require.NoError(t, err)
	errs := errorCap{t: t}
	for _, k := range keys {
		if it, ok := got[k]; ok {
			errs.add("%s: %s is back (%d bytes, flags %d)", why, k, len(it.val), it.flags)
		}
	}
	errs.done()
}

// expectItems fails the test for every key of want that get does not find with its flags and value.
func expectItems(t *testing.T, c *rsConn, want map[string]rsItem, why string) {
	t.Helper()
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	got, err := c.getItems("get", keys)
	require.NoError(t, err)
	errs := errorCap{t: t}
	for _, k := range keys {
		g, ok := got[k]
		switch {
		case !ok:
			errs.add("%s: %s missing", why, k)
		case g.flags != want[k].flags || string(g.val) != string(want[k].val):
			errs.add("%s: %s has flags %d and %d bytes, want flags %d and %d bytes (%s)", why, k, g.flags,
				len(g.val), want[k].flags, len(want[k].val), firstDiff(g.val, want[k].val))
		}
	}
	errs.done()
}

// mustStore stores key through c and requires STORED.
func mustStore(t *testing.T, c *rsConn, verb, key string, flags uint32, exptime int64, val []byte) {
	t.Helper()
	l, err := c.store(verb, key, flags, exptime, val)
	require.NoError(t, err)
	require.Equal(t, "STORED", l, "%s %s", verb, key)
}

// expiryGroup is a class of keys of TestRestartExpiredWhileDown: how they are stored, and whether they
// must be there after the restart.
type expiryGroup struct {
	prefix string
	exp    int64  // exptime of the set (relative seconds, or absolute when large)
	then   string // a command after the set, %s the key ("" none), and its reply
	reply  string
	alive  bool  // still live after the restart
	ttl    int64 // its remaining TTL then (relative to the set or its then command, or to start when exp is -1), when alive and not 0
}

// storeThen sets key with exp and sends g.then for it. A set whose exptime is over before the command
// arrives (a stalled machine: more than a second between the two) is set again, at most three times.
func storeThen(t *testing.T, c *rsConn, g expiryGroup, key string, it rsItem, exp int64) {
	t.Helper()
	for try := 1; ; try++ {
		mustStore(t, c, "set", key, it.flags, exp, it.val)
		if g.then == "" {
			return
		}
		cmd := fmt.Sprintf(g.then, key)
		l, err := c.call(cmd)
		require.NoError(t, err)
		if (l == "NOT_FOUND" || l == "END") && try < 3 {
			t.Logf("%q: %q after set with exptime %d, set again", cmd, l, exp)
			continue
		}
		require.True(t, strings.HasPrefix(l, g.reply), "%q: %q", cmd, l)
		if g.reply == "VALUE" {
			_, err = c.data(len(it.val))
			require.NoError(t, err)
			l, err = c.line()
			require.NoError(t, err)
			require.Equal(t, "END", l)
		}
		return
	}
}

// TestRestartExpiredWhileDown: items whose exptime passed while the server was down are gone after the
// restart (exptimes are absolute), later ones stay, touch and gat exptimes persist; with --grace the
// expired values are not kept as grace copies either, and lease-get shows no stale value for them.
func TestRestartExpiredWhileDown(t *testing.T) {
	requireRestart(t)
	const perGroup = 50
	groups := []expiryGroup{
		{prefix: "e1_", exp: 1},
		{prefix: "e2_", exp: 2},
		{prefix: "keep_", exp: 3600, alive: true, ttl: 3600},
		{prefix: "abs_", exp: -1, alive: true, ttl: 7200}, // -1: now + 7200, absolute
		{prefix: "never_", exp: 0, alive: true},
		// exp 2, not 1: an exptime of 1 s set just before the server's clock ticks is over at once, and the
		// touch or gat after the set would miss (see storeThen).
		{prefix: "touchup_", exp: 2, then: "touch %s 3600\r\n", reply: "TOUCHED", alive: true, ttl: 3600},
		{prefix: "touchdown_", exp: 3600, then: "touch %s 1\r\n", reply: "TOUCHED"},
		{prefix: "gat_", exp: 2, then: "gat 3600 %s\r\n", reply: "VALUE", alive: true, ttl: 3600},
	}
	for _, tc := range []struct {
		name string
		how  stopHow
		args []string
	}{
		{"SIGTERM", stopTerm, nil},
		{"SIGKILL", stopKill, nil},
		{"SIGTERM grace", stopTerm, []string{"--grace", "30s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parallelWaiting(t) // each waits for the exptimes to pass
			dir := t.TempDir()
			d := startOnDir(t, dir, tc.args...)
			waitLoaded(t, d)
			c := mustDialRS(t, d)
			alive := map[string]rsItem{}
			var dead []string
			abs := map[string]int64{}
			start := time.Now().Unix()
			for _, g := range groups {
				for i := range perGroup {
					key := fmt.Sprintf("%s%d", g.prefix, i)
					it := rsItem{flags: uint32(i), val: rsValue(key, 0, i*7)}
					exp := g.exp
					if exp < 0 {
						exp = start + 7200
					}
					storeThen(t, c, g, key, it, exp)
					if g.alive {
						alive[key] = it
						switch {
						case g.exp < 0:
							abs[key] = exp
						case g.ttl != 0: // from the command that set it, just answered: the stores take seconds on a slow machine
							abs[key] = time.Now().Unix() + g.ttl
						}
					} else {
						dead = append(dead, key)
					}
				}
			}
			stored := time.Now()
			stopDaemon(t, d, tc.how)
			// An exptime of 2 s set in second S is over from S+2 on; the server's clock counts whole seconds.
			time.Sleep(time.Until(stored.Add(3500 * time.Millisecond)))

			d2 := startOnDir(t, dir, tc.args...)
			st := waitLoaded(t, d2)
			t.Logf("%s=%s %s=%s", statLoaded, st[statLoaded], statDropped, st[statDropped])
			assert.Equal(t, int64(len(alive)), statInt(t, st, statLoaded), statLoaded)
			c2 := mustDialRS(t, d2)
			expectItems(t, c2, alive, "live item")
			expectAbsent(t, c2, dead, "expired while down")
			expectAbsent(t, c2, dead, "expired while down, read again (no grace copy)")
			var ttlKeys []string
			for k := range abs {
				ttlKeys = append(ttlKeys, k)
			}
			ttls, err := c2.metaGets(ttlKeys, "t")
			require.NoError(t, err)
			now := time.Now().Unix()
			for i, r := range ttls {
				var ttl int64
				_, err := fmt.Sscanf(r.head, "HD t%d", &ttl)
				if assert.NoError(t, err, "mg %s t: %q", ttlKeys[i], r.head) {
					assert.InDelta(t, abs[ttlKeys[i]]-now, ttl, ttlSlack, "remaining TTL of %s", ttlKeys[i])
				}
			}
			// No stale value survives the restart: lease-get shows none for an expired key.
			lc := mustDialLease(t, d2)
			b, err := lc.leaseGet1(dead[0])
			require.NoError(t, err)
			assert.False(t, b.hit, "lease-get %s after the restart", dead[0])
			assert.GreaterOrEqual(t, b.token, uint64(minGrantToken), "lease-get %s: a grant", dead[0])
			assert.Empty(t, b.data, "lease-get %s: stale value from before the restart", dead[0])
		})
	}
}

// TestRestartLock: a second leasecached on a directory in use exits 1 with "in use" on stderr, and the
// first keeps serving; once the first has stopped (killed: its lock must not outlive it; or gracefully),
// a new one starts on the directory and serves what was stored.
func TestRestartLock(t *testing.T) {
	requireRestart(t)
	dir := t.TempDir()
	d := startOnDir(t, dir)
	waitLoaded(t, d)
	c := mustDialRS(t, d)
	want := map[string]rsItem{"locked": {flags: 5, val: []byte("first")}}
	mustStore(t, c, "set", "locked", 5, 0, []byte("first"))

	port, err := freePort()
	require.NoError(t, err)
	args := append(leasecachedArgs(nil)(port), "--data-dir", dir)
	stdout, stderr, code := runDaemonOnce(t, args...)
	assert.Equal(t, 1, code, "a second server on %s: exit status (stdout %q, stderr %q)", dir, stdout, stderr)
	assert.Contains(t, stderr, "in use", "a second server on %s: stderr", dir)
	require.True(t, d.proc.Running(), "the first server exited")
	expectItems(t, c, want, "the first server, after the second was refused")

	for _, how := range []stopHow{stopKill, stopTerm} {
		stopDaemon(t, d, how)
		d = startOnDir(t, dir)
		waitLoaded(t, d)
		expectItems(t, mustDialRS(t, d), want, fmt.Sprintf("a new server after the first's %s", how))
	}
}

// waitLine is what a start logs when the server holding its directory is leaving and it waits.
const waitLine = "waiting for the server that holds it to let go: "

// TestRestartRightAfterStop: a start on a directory whose server was told to stop, or was killed, but has
// not let go of it yet (its last sync under way, its process still exiting) waits for it and serves what
// was stored, rather than exiting with "in use" as it does beside a server that runs (TestRestartLock):
// a script restarts a server so, without waiting for the old process. Each start gets one attempt (the
// harness would otherwise try again on another port, by when the old one is gone).
//
// A real stop or kill is raced as a script would, and the start often, not always, finds the old server
// still there. A stand-in that holds the lock while its process is exiting (exitingHolder) makes sure of
// it for an exit; shard's TestNewWaitsForAStoppingStore does for a stop.
func TestRestartRightAfterStop(t *testing.T) {
	requireRestart(t)
	fill := func(t *testing.T, d *daemon) map[string]rsItem {
		c := mustDialRS(t, d)
		want := map[string]rsItem{}
		for i := range 100 {
			key, val := fmt.Sprintf("after-%d", i), bytes.Repeat([]byte{byte('a' + i%26)}, 1000+i)
			mustStore(t, c, "set", key, uint32(i), 0, val)
			want[key] = rsItem{flags: uint32(i), val: val}
		}
		return want
	}
	spec := func(dir string) testdaemon.Spec {
		return testdaemon.Spec{Name: "leasecached", Path: leasecachedPlainPath, Args: leasecachedArgs(onDirArgs(dir, "-A")),
			Env: noExitSleep(), Attempts: 1}
	}

	for _, how := range []stopHow{stopTerm, stopCommand, stopKill} {
		t.Run(string(how), func(t *testing.T) {
			dir := t.TempDir()
			d := startOnDirPlain(t, dir, "-A")
			waitLoaded(t, d)
			want := fill(t, d)
			waited := 0
			for round := range 3 {
				switch how {
				case stopTerm:
					require.NoError(t, d.cmd.Process.Signal(syscall.SIGTERM))
				case stopCommand:
					_, err := mustDialRS(t, d).c.Write([]byte("shutdown\r\n"))
					require.NoError(t, err)
				case stopKill:
					require.NoError(t, d.cmd.Process.Signal(syscall.SIGKILL))
				}
				next := startDaemonSpec(t, spec(dir))
				<-d.exited
				waitLoaded(t, next)
				expectItems(t, mustDialRS(t, next), want, fmt.Sprintf("round %d: a start right after %s", round, how))
				if strings.Contains(next.out.String(), waitLine) {
					waited++
				}
				d = next
			}
			t.Logf("%d of 3 starts waited for the old server", waited)
		})
	}

	t.Run("exiting", func(t *testing.T) {
		dir := t.TempDir()
		d := startOnDirPlain(t, dir)
		waitLoaded(t, d)
		want := fill(t, d)
		stopDaemon(t, d, stopTerm)
		release := exitingHolder(t, dir)
		started := make(chan *daemon, 1)
		failed := make(chan error, 1)
		go func() {
			if d, err := launchDaemon(spec(dir)); err != nil {
				failed <- err
			} else {
				started <- d
			}
		}()
		select {
		case d := <-started:
			d.kill(t)
			t.Fatal("a start served while the directory's holder was exiting")
		case err := <-failed:
			t.Fatalf("a start while the directory's holder was exiting: %v", err)
		case <-time.After(500 * time.Millisecond):
		}
		release()
		select {
		case next := <-started:
			t.Cleanup(func() { next.kill(t) })
			assert.Contains(t, next.out.String(), waitLine+"pid ", "the start's log")
			assert.Contains(t, next.out.String(), ", which is exiting", "the start's log")
			waitLoaded(t, next)
			expectItems(t, mustDialRS(t, next), want, "a start after its holder exited")
		case err := <-failed:
			t.Fatalf("a start once the directory's holder was gone: %v", err)
		case <-time.After(rsStopTimeout):
			t.Fatal("no start once the directory's holder was gone")
		}
	})
}

// exitingHolder locks data directory dir as a server would, in a process whose main thread has exited
// while another thread still holds the lock: /proc shows it as a zombie in its exit, as a killed server
// is while the kernel frees its memory. The returned func ends the process and waits for it.
func exitingHolder(t *testing.T, dir string) func() {
	t.Helper()
	const script = `
import ctypes, fcntl, os, sys, threading
f = open(sys.argv[1], "w")
fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
f.write(str(os.getpid())); f.flush()
def hold():
    sys.stdin.read()  # until the test closes stdin
    os._exit(0)
threading.Thread(target=hold).start()
print("held", flush=True)
ctypes.CDLL(None).pthread_exit(None)
`
	cmd := exec.Command("python3", "-c", script, filepath.Join(dir, "lock"))
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	release := func() {
		_ = stdin.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(release)
	line := make([]byte, 5)
	_, err = io.ReadFull(stdout, line)
	require.NoError(t, err, "the lock holder")
	require.Equal(t, "held\n", string(line))
	require.Eventually(t, func() bool {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
		return err == nil && strings.Contains(string(st), ") Z ")
	}, 5*time.Second, 5*time.Millisecond, "the holder's main thread has exited")
	return release
}

// bulkSize is a value that takes a slab page of its own (1 MiB pages, -I 1m).
const bulkSize = 900_000

// fillSettings stores small items (and large ones when large > 0) and returns them.
func fillSettings(t *testing.T, c *rsConn, small, large int) (smallItems, largeItems map[string]rsItem) {
	t.Helper()
	smallItems, largeItems = map[string]rsItem{}, map[string]rsItem{}
	for i := range small {
		key := fmt.Sprintf("ss%d", i)
		it := rsItem{flags: uint32(i), val: rsValue(key, 0, (i*97)%5000)}
		mustStore(t, c, "set", key, it.flags, 0, it.val)
		smallItems[key] = it
	}
	for i := range large {
		key := fmt.Sprintf("sl%d", i)
		it := rsItem{flags: uint32(i), val: rsValue(key, 0, 1_200_000+i*150_000)} // over -I 1m, under 2m
		mustStore(t, c, "set", key, it.flags, 0, it.val)
		largeItems[key] = it
	}
	return smallItems, largeItems
}

// storeCAS stores key and returns the CAS unique it got.
func storeCAS(t *testing.T, c *rsConn, key string) uint64 {
	t.Helper()
	mustStore(t, c, "set", key, 0, 0, []byte("cas"))
	got, err := c.getItems("gets", []string{key})
	require.NoError(t, err)
	require.Contains(t, got, key)
	return got[key].cas
}

// expectModelOrAbsent fails the test for every key of model that get finds with other flags or bytes,
// and returns how many were found.
func expectModelOrAbsent(t *testing.T, c *rsConn, model map[string]rsItem, why string) int {
	t.Helper()
	keys := make([]string, 0, len(model))
	for k := range model {
		keys = append(keys, k)
	}
	got, err := c.getItems("get", keys)
	require.NoError(t, err)
	errs := errorCap{t: t}
	for k, g := range got {
		w, ok := model[k]
		if !ok || g.flags != w.flags || string(g.val) != string(w.val) {
			errs.add("%s: %s served with flags %d and %d bytes, not what was stored (%s)", why, k, g.flags,
				len(g.val), firstDiff(g.val, w.val))
		}
	}
	errs.done()
	return len(got)
}

// TestRestartSettingsChange: a restart with settings that do not fit the stored data. A -m whose own shard
// count is off from the stored one by more than a factor of two (-m 64 has one shard, -m 256 four)
// starts empty with one line naming --data-dir and "starting empty", and the directory then serves the
// new settings; a smaller -I keeps what fits and counts what it drops; a larger -m keeps everything, its
// own shard count twice the stored one (-m 128) or the same, and keeps doing so at the next restart; a
// smaller one what it has room for (one line naming --data-dir says how many pages it had no room for),
// with half the stored shard count too; -L (huge pages for the files) added or dropped keeps everything.
// Never a wrong value.
func TestRestartSettingsChange(t *testing.T) {
	requireRestart(t)
	const small, large = 300, 4
	for _, tc := range []struct {
		name         string
		before, now  []string
		large        int
		wantEmpty    bool // starts empty with the notice
		wantSmall    bool // keeps every small item
		wantNoLarge  bool // drops every large item, counting them
		bulk         int  // values of bulkSize stored besides (one a page: to overflow a smaller -m)
		wantAll      bool // keeps everything
		wantNoRoom   bool // keeps some, with one line saying it had no room for the rest
		restartAgain bool // then a restart with the new settings keeps what is stored then
	}{
		{name: "more shards", before: []string{"-m", "64"}, now: []string{"-m", "256"}, wantEmpty: true, restartAgain: true},
		{name: "fewer shards", before: []string{"-m", "256"}, now: []string{"-m", "64"}, wantEmpty: true},
		{name: "smaller -I", before: []string{"-I", "2m"}, now: []string{"-I", "1m"}, large: large, wantSmall: true, wantNoLarge: true},
		{name: "larger -m, one shard", before: []string{"-m", "64"}, now: []string{"-m", "100"}, bulk: 25, wantAll: true},
		{name: "larger -m, twice the shards", before: []string{"-m", "64"}, now: []string{"-m", "128"}, bulk: 25, wantAll: true, restartAgain: true},
		{name: "smaller -m, half the shards", before: []string{"-m", "128"}, now: []string{"-m", "64"}, bulk: 10, wantAll: true, restartAgain: true},
		{name: "smaller -m, half the shards, no room", before: []string{"-m", "128"}, now: []string{"-m", "64"}, bulk: 70, wantNoRoom: true},
		{name: "smaller -m, one shard", before: []string{"-m", "100"}, now: []string{"-m", "64"}, bulk: 70, wantNoRoom: true},
		{name: "-L added", before: []string{"-m", "64"}, now: []string{"-m", "64", "-L"}, bulk: 5, wantAll: true, restartAgain: true},
		{name: "-L dropped", before: []string{"-m", "64", "-L"}, now: []string{"-m", "64"}, bulk: 5, wantAll: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			d := startOnDirPlain(t, dir, tc.before...) // fills faster; the race build restarts
			waitLoaded(t, d)
			c := mustDialRS(t, d)
			smallItems, largeItems := fillSettings(t, c, small, tc.large)
			bulk := rsValue("bulk", 0, bulkSize) // made once: the key at its start tells the values apart
			for i := range tc.bulk {
				key := fmt.Sprintf("sb%d", i)
				it := rsItem{flags: uint32(i), val: append([]byte(key+"|"), bulk...)}
				mustStore(t, c, "set", key, it.flags, 0, it.val)
				largeItems[key] = it
			}
			st, err := c.stats()
			require.NoError(t, err)
			require.Equal(t, "0", st["evictions"], "everything must fit the first -m (%s pages in use)", st["total_malloced"])
			casBefore := storeCAS(t, c, "cas-probe")
			smallItems["cas-probe"] = rsItem{val: []byte("cas")}
			stopDaemon(t, d, stopTerm)

			d = startOnDir(t, dir, tc.now...)
			st = waitLoaded(t, d)
			lines := dataDirLines(d)
			t.Logf("%v -> %v: %s=%s %s=%s; --data-dir lines %q", tc.before, tc.now, statLoaded, st[statLoaded],
				statDropped, st[statDropped], lines)
			c = mustDialRS(t, d)
			all := map[string]rsItem{}
			for k, v := range smallItems {
				all[k] = v
			}
			for k, v := range largeItems {
				all[k] = v
			}
			found := expectModelOrAbsent(t, c, all, "after the restart")
			assert.LessOrEqual(t, len(lines), 1, "at most one line names --data-dir")
			empty := len(lines) == 1 && strings.Contains(lines[0], "starting empty")
			noRoom := len(lines) == 1 && strings.Contains(lines[0], "no room")
			if len(lines) == 1 {
				assert.True(t, empty || noRoom, "the --data-dir line says neither \"starting empty\" nor \"no room\": %q", lines[0])
			}
			if tc.wantAll {
				assert.Equal(t, len(all), found, "every item is kept")
				assert.Empty(t, lines, "everything kept: no --data-dir line")
			}
			if tc.wantNoRoom {
				assert.True(t, noRoom, "a smaller -m that cannot hold every page: one line says so")
				assert.Greater(t, found, 0, "a smaller -m keeps what it has room for")
				assert.Less(t, found, len(all), "the first -m's items cannot all fit the smaller one")
				assert.Equal(t, int64(len(all)), statInt(t, st, statLoaded)+statInt(t, st, statDropped),
					"every stored item is loaded or counted in %s", statDropped)
			}
			if empty {
				assert.Zero(t, found, "started empty, but served stored items")
				assert.Equal(t, "0", st[statLoaded], statLoaded)
			}
			if tc.wantEmpty {
				assert.True(t, empty, "a different shard count must start empty with one --data-dir line")
			}
			if tc.wantSmall {
				expectItems(t, c, smallItems, "an item that fits")
				assert.Equal(t, int64(len(smallItems)), statInt(t, st, statLoaded), statLoaded)
			}
			if tc.wantNoLarge {
				var keys []string
				for k := range largeItems {
					keys = append(keys, k)
				}
				expectAbsent(t, c, keys, "an item over the new -I")
				assert.GreaterOrEqual(t, statInt(t, st, statDropped), int64(len(largeItems)), statDropped)
			}
			if !tc.wantEmpty && !empty {
				assert.Equal(t, int64(found), statInt(t, st, statLoaded), "%s: the items found", statLoaded)
			}
			// CAS uniques keep growing across every restart, one that starts empty included.
			assert.Greater(t, storeCAS(t, c, "cas-probe"), casBefore, "CAS of a store after the restart")
			if tc.restartAgain {
				mustStore(t, c, "set", "after", 1, 0, []byte("new settings"))
				stopDaemon(t, d, stopTerm)
				d = startOnDir(t, dir, tc.now...)
				waitLoaded(t, d)
				assert.Empty(t, dataDirLines(d), "the same settings again: no notice")
				expectItems(t, mustDialRS(t, d), map[string]rsItem{"after": {flags: 1, val: []byte("new settings")}},
					"stored under the new settings")
			}
		})
	}
}

// TestRestartFlushAndDelete: what an acknowledged flush_all or delete removed does not come back after a
// graceful stop or a kill; what was stored after it does.
func TestRestartFlushAndDelete(t *testing.T) {
	requireRestart(t)
	const n = 200
	for _, tc := range []struct {
		name  string
		flush bool // flush_all; else delete every other key
		how   stopHow
	}{
		{"flush_all SIGTERM", true, stopTerm},
		{"flush_all SIGKILL", true, stopKill},
		{"delete SIGTERM", false, stopTerm},
		{"delete SIGKILL", false, stopKill},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			d := startOnDir(t, dir)
			waitLoaded(t, d)
			c := mustDialRS(t, d)
			want := map[string]rsItem{}
			var gone []string
			for i := range n {
				key := fmt.Sprintf("fd%d", i)
				it := rsItem{flags: uint32(i), val: rsValue(key, 0, i*3)}
				mustStore(t, c, "set", key, it.flags, 0, it.val)
				want[key] = it
			}
			if tc.flush {
				l, err := c.call("flush_all\r\n")
				require.NoError(t, err)
				require.Equal(t, "OK", l)
				for k := range want {
					gone = append(gone, k)
				}
				clear(want)
			} else {
				for i := 0; i < n; i += 2 {
					key := fmt.Sprintf("fd%d", i)
					l, err := c.call("delete " + key + "\r\n")
					require.NoError(t, err)
					require.Equal(t, "DELETED", l)
					gone = append(gone, key)
					delete(want, key)
				}
			}
			// Stored after the flush or the deletes: these must be back, with the values of now.
			for i := 0; i < n; i += 10 {
				key := fmt.Sprintf("fd%d", i)
				it := rsItem{flags: 99, val: rsValue(key, 1, 40)}
				mustStore(t, c, "set", key, it.flags, 0, it.val)
				want[key] = it
			}
			for i := 0; i < n/4; i++ {
				key := fmt.Sprintf("fdnew%d", i)
				it := rsItem{flags: 7, val: rsValue(key, 0, i)}
				mustStore(t, c, "set", key, it.flags, 0, it.val)
				want[key] = it
			}
			var stillGone []string
			for _, k := range gone {
				if _, ok := want[k]; !ok {
					stillGone = append(stillGone, k)
				}
			}
			stopDaemon(t, d, tc.how)
			d = startOnDir(t, dir)
			st := waitLoaded(t, d)
			t.Logf("%s=%s %s=%s", statLoaded, st[statLoaded], statDropped, st[statDropped])
			c = mustDialRS(t, d)
			expectAbsent(t, c, stillGone, "removed before the stop")
			expectItems(t, c, want, "stored after the removal")
			assert.Equal(t, int64(len(want)), statInt(t, st, statLoaded), statLoaded)
		})
	}
}

// TestRestartLeases: a lease token granted before a restart is refused after it (lease-set answers as
// for an unknown token), stale values are not served by lease-get after it, and leases work as before
// once it is over.
func TestRestartLeases(t *testing.T) {
	requireRestart(t)
	requireLeases(t)
	for _, how := range []stopHow{stopTerm, stopKill} {
		t.Run(string(how), func(t *testing.T) {
			dir := t.TempDir()
			d := startOnDir(t, dir)
			waitLoaded(t, d)
			lc := mustDialLease(t, d)
			miss, err := lc.leaseGet1("lease_miss")
			require.NoError(t, err)
			require.NoError(t, checkGrantToken(miss.token))
			l, err := lc.set("lease_stale", 4, 0, []byte("old value"))
			require.NoError(t, err)
			require.Equal(t, "STORED", l)
			l, err = lc.call("delete lease_stale\r\n")
			require.NoError(t, err)
			require.Equal(t, "DELETED", l)
			stale, err := lc.leaseGet1("lease_stale")
			require.NoError(t, err)
			require.NoError(t, checkGrantToken(stale.token))
			require.Equal(t, "old value", string(stale.data), "the stale value before the restart")
			l, err = lc.set("lease_hit", 2, 0, []byte("kept"))
			require.NoError(t, err)
			require.Equal(t, "STORED", l)
			stopDaemon(t, d, how)

			d = startOnDir(t, dir)
			waitLoaded(t, d)
			lc = mustDialLease(t, d)
			for _, b := range []leaseBlock{miss, stale} {
				l, err := lc.leaseSet(b.key, b.token, 0, 0, []byte("from before"))
				require.NoError(t, err)
				assert.Equal(t, "NOT_STORED", l, "lease-set %s with a token of the previous run", b.key)
				_, _, ok, err := lc.get(b.key)
				require.NoError(t, err)
				assert.False(t, ok, "%s after a refused lease-set", b.key)
			}
			b, err := lc.leaseGet1("lease_stale")
			require.NoError(t, err)
			assert.False(t, b.hit)
			assert.Empty(t, b.data, "lease-get shows a stale value from before the restart")
			assert.NotEqual(t, stale.token, b.token)
			l, err = lc.leaseSet("lease_stale", b.token, 0, 0, []byte("refilled"))
			require.NoError(t, err)
			assert.Equal(t, "STORED", l, "lease-set with a token of this run")
			for key, want := range map[string]string{"lease_stale": "refilled", "lease_hit": "kept"} {
				v, _, ok, err := lc.get(key)
				require.NoError(t, err)
				assert.True(t, ok && string(v) == want, "%s: %q (found %v), want %q", key, v, ok, want)
			}
		})
	}
}
