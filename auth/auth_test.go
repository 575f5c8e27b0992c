package auth

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"
)

// minCostHash is a bcrypt hash of pass at bcrypt's lowest cost, so the tests stay fast.
func minCostHash(t testing.TB, pass string) string {
	t.Helper()
	return costHash(t, pass, bcrypt.MinCost)
}

// costHash is a bcrypt hash of pass at cost.
func costHash(t testing.TB, pass string, cost int) string {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(pass), cost)
	require.NoError(t, err)
	return string(h)
}

// TestParse: what memcached 1.6.18 accepts is read as it reads it; what it reads silently otherwise than
// it looks is refused with the line's number.
func TestParse(t *testing.T) {
	h4, h4b, h5 := minCostHash(t, "x"), minCostHash(t, "y"), costHash(t, "z", bcrypt.MinCost+1)
	cases := []struct {
		name    string
		file    string
		entries int
		good    [][2]string // pairs that authenticate
		bad     [][2]string // pairs that do not
		err     string      // a refused file's reason contains this
	}{
		{name: "two users", file: "foo:bar\nbaaaz:quux\n", entries: 2,
			good: [][2]string{{"foo", "bar"}, {"baaaz", "quux"}}, bad: [][2]string{{"foo", "quux"}, {"bar", "foo"}}},
		{name: "no final newline", file: "foo:bar", entries: 1, good: [][2]string{{"foo", "bar"}}},
		{name: "CRLF lines", file: "foo:bar\r\nx:y\r\n", entries: 2, good: [][2]string{{"foo", "bar"}, {"x", "y"}},
			bad: [][2]string{{"foo", "bar\r"}}},
		{name: "empty file", file: "", entries: 0, bad: [][2]string{{"", ""}, {"foo", "bar"}}},
		{name: "the password keeps its colons and spaces", file: "u:a:b c\n", entries: 1,
			good: [][2]string{{"u", "a:b c"}}, bad: [][2]string{{"u", "a"}}},
		{name: "a user may have several passwords", file: "u:one\nu:two\n", entries: 2,
			good: [][2]string{{"u", "one"}, {"u", "two"}}, bad: [][2]string{{"u", "three"}}},
		{name: "more than memcached's 8 users", file: strings.Repeat("a:b\n", 8) + "ninth:9\n", entries: 9,
			good: [][2]string{{"ninth", "9"}}},
		// Kept as memcached keeps them; no client can send an empty token (protocol.ParseAuth), so neither
		// authenticates anyone.
		{name: "empty user and password are kept", file: ":\nu:\n", entries: 2, good: [][2]string{{"u", ""}}},
		{name: "line of 254 bytes", file: "u:" + strings.Repeat("p", 252) + "\n", entries: 1,
			good: [][2]string{{"u", strings.Repeat("p", 252)}}},
		{name: "empty line", file: "foo:bar\n\n", err: "line 2: malformed entry"},
		{name: "comment", file: "# users\nfoo:bar\n", err: "line 1: malformed entry"},
		{name: "no colon", file: "foo:bar\nbaz\n", err: "line 2: malformed entry"},
		{name: "line of 255 bytes", file: "u:" + strings.Repeat("p", 253) + "\n", err: "line 1: 255 bytes"},
		{name: "NUL", file: "foo:b\x00ar\n", err: "line 1: a NUL byte"},
		{name: "CR inside a line", file: "foo:b\rar\n", err: `line 1: a "\r" inside`},
		{name: "malformed bcrypt hash", file: "u:$2y$10$short\n", err: "line 1: user \"u\": malformed bcrypt hash"},
		{name: "bcrypt cost over the limit", file: "u:$2a$15$" + strings.Repeat("a", 53) + "\n", err: "bcrypt cost 15"},
		{name: "too large", file: strings.Repeat("a:b\n", MaxFileSize/4+1), err: "more than the 1048576"},
		// Each of these would make some user's checks take another time than the others' (Table.Check).
		{name: "hashes of two costs", file: "a:" + h4 + "\nb:pw\nc:" + h5 + "\n",
			err: `line 3: user "c": bcrypt cost 5, but line 1's hash has cost 4`},
		{name: "a user's second hash", file: "u:" + h4 + "\nv:pw\nu:" + h4b + "\n",
			err: `line 3: user "u": a second bcrypt hash (line 1 has one)`},
		{name: "a salt bcrypt cannot decode", file: "u:" + h4[:7] + "!" + h4[8:] + "\n",
			err: `line 1: user "u": malformed bcrypt hash: its salt`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tab, err := Parse([]byte(tc.file))
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.entries, tab.Entries())
			assert.False(t, tab.Slow())
			for _, p := range tc.good {
				assert.True(t, tab.Check([]byte(p[0]), []byte(p[1])), "%q %q should authenticate", p[0], p[1])
			}
			for _, p := range tc.bad {
				assert.False(t, tab.Check([]byte(p[0]), []byte(p[1])), "%q %q should not authenticate", p[0], p[1])
			}
		})
	}
}

func TestBcrypt(t *testing.T) {
	for _, variant := range []string{"$2a$", "$2b$", "$2y$"} {
		t.Run(variant, func(t *testing.T) {
			h := variant + minCostHash(t, "s3cret")[4:]
			tab, err := Parse([]byte("plain:pw\nhashed:" + h + "\n"))
			require.NoError(t, err)
			assert.True(t, tab.Slow())
			assert.Equal(t, bcrypt.MinCost, tab.bcryptCost)
			assert.True(t, tab.Check([]byte("hashed"), []byte("s3cret")))
			assert.False(t, tab.Check([]byte("hashed"), []byte("s3cre")))
			assert.False(t, tab.Check([]byte("hashed"), []byte(h)), "the hash is not the password")
			assert.True(t, tab.Check([]byte("plain"), []byte("pw")))
			assert.False(t, tab.Check([]byte("nobody"), []byte("s3cret")))
		})
	}
}

// TestCheckCostsOneBcrypt: in a file with a hash, every check costs a bcrypt comparison whether the user
// has a hash, a plain password or no entry: the time of an answer does not tell them apart.
func TestCheckCostsOneBcrypt(t *testing.T) {
	requireTimingRun(t)
	h, err := bcrypt.GenerateFromPassword([]byte("s3cret"), 8) // ~20 ms a check: far above the noise
	require.NoError(t, err)
	tab, err := Parse([]byte("plain:pw\nhashed:" + string(h) + "\n"))
	require.NoError(t, err)
	require.NotNil(t, tab.dummyHash)
	cost, err := bcrypt.Cost(tab.dummyHash)
	require.NoError(t, err)
	assert.Equal(t, 8, cost, "the comparison hash has the file's cost")
	timeOf := func(user, pass string) time.Duration {
		best := time.Hour
		for range 5 { // the fastest of five: what the check costs, less what a busy machine adds
			start := time.Now()
			tab.Check([]byte(user), []byte(pass))
			best = min(best, time.Since(start))
		}
		return best
	}
	hashed := timeOf("hashed", "wrong")
	for _, who := range [][2]string{{"plain", "wrong"}, {"plain", "pw"}, {"nobody", "wrong"}} {
		d := timeOf(who[0], who[1])
		// Without the comparison hash these take microseconds, a thousandth of a bcrypt comparison; three
		// or more comparisons, three times as long. The bounds leave room for a loaded machine.
		assert.Greater(t, d, hashed/4, "%s costs a bcrypt comparison (%v vs %v)", who[0], d, hashed)
		assert.Less(t, d, hashed*3, "%s costs one bcrypt comparison (%v vs %v)", who[0], d, hashed)
	}
}

// countCompares has every bcrypt comparison counted, with its hash's cost, until the test ends.
func countCompares(t *testing.T) *[]int {
	t.Helper()
	var costs []int
	t.Cleanup(func() { compareHash = bcrypt.CompareHashAndPassword })
	compareHash = func(hash, pass []byte) error {
		cost, err := bcrypt.Cost(hash)
		require.NoError(t, err)
		costs = append(costs, cost)
		return bcrypt.CompareHashAndPassword(hash, pass)
	}
	return &costs
}

// TestCheckComparesOneHash: every file Parse accepts has each check make the same bcrypt comparisons,
// whoever the user is and whatever the password: exactly one, at the file's cost, when it has a hash; none
// otherwise. The files with hashes of two costs and with a user's two hashes (the review's) are refused.
func TestCheckComparesOneHash(t *testing.T) {
	h4, h4b, h5 := minCostHash(t, "s3cret"), minCostHash(t, "other"), costHash(t, "s3cret", bcrypt.MinCost+1)
	cases := []struct {
		name     string
		file     string
		compares int // per check
	}{
		{"plain passwords only", "plain:pw\nplain:pw2\n", 0},
		{"users with and without a hash", "plain:pw\nhashed:" + h4 + "\nboth:pw\nboth:" + h4b + "\nbare:\n", 1},
		{"hashes of two costs", "cheap:" + h4 + "\nhashed:" + h5 + "\n", 1},
		{"a user with two hashes", "hashed:" + h4 + "\ntwo:" + h4 + "\ntwo:" + h4b + "\n", 1},
	}
	users := []string{"plain", "hashed", "both", "bare", "cheap", "two", "nobody"}
	passes := []string{"pw", "s3cret", "other", "wrong", ""}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tab, err := Parse([]byte(tc.file))
			if err != nil {
				assert.Regexp(t, `^line \d+: `, err.Error())
				return
			}
			costs := countCompares(t)
			for _, u := range users {
				for _, p := range passes {
					*costs = (*costs)[:0]
					tab.Check([]byte(u), []byte(p))
					require.Len(t, *costs, tc.compares, "user %q, password %q", u, p)
					for _, c := range *costs {
						assert.Equal(t, tab.bcryptCost, c, "user %q, password %q: a comparison at the file's cost", u, p)
					}
				}
			}
		})
	}
}

// TestCheckTimeTellsNoUser: a check takes as long for an unknown user as for a user with a hash or one
// with plain passwords only, for every file Parse accepts. The review's files are refused: one whose cost-4
// hash is checked in an eighth of the others' time, one whose user with two hashes takes twice as long
// (TestCheckComparesOneHash tells that one apart exactly; here it is at the bounds' edge).
func TestCheckTimeTellsNoUser(t *testing.T) {
	requireTimingRun(t)
	h7, h7b, h4 := costHash(t, "s3cret", 7), costHash(t, "other", 7), minCostHash(t, "s3cret")
	files := []string{
		"plain:pw\nhashed:" + h7 + "\nboth:pw2\nboth:" + h7b + "\n",
		"cheap:" + h4 + "\nhashed:" + h7 + "\nplain:pw\n",
		"hashed:" + h7 + "\ntwo:" + h7 + "\ntwo:" + h7b + "\nplain:pw\n",
	}
	users := []string{"hashed", "nobody", "plain", "both", "cheap", "two"}
	accepted := 0
	for i, file := range files {
		tab, err := Parse([]byte(file))
		if err != nil {
			continue
		}
		accepted++
		// The fastest of five, taken in turns so that a busy moment slows every user's alike: what the check
		// costs, less what a loaded machine adds.
		best := make([]time.Duration, len(users))
		for j := range best {
			best[j] = time.Hour
		}
		for range 5 {
			for j, u := range users {
				start := time.Now()
				tab.Check([]byte(u), []byte("wrong"))
				best[j] = min(best[j], time.Since(start))
			}
		}
		ref := best[0]
		for j, u := range users[1:] {
			d := best[j+1]
			// Without a comparison this takes microseconds; with one of cost 4, an eighth of ref.
			assert.Greater(t, d, ref/2, "file %d: user %q (%v vs %v for a user with a hash)", i, u, d, ref)
			assert.Less(t, d, ref*2, "file %d: user %q (%v vs %v for a user with a hash)", i, u, d, ref)
		}
	}
	assert.Equal(t, 1, accepted, "the review's files are refused")
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
}

func TestVerifierReloadKeepsTableOnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pw")
	writeFile(t, path, "foo:bar\n")
	v, err := NewVerifier(path)
	require.NoError(t, err)
	ok, p := v.Check([]byte("foo"), []byte("bar"), nil)
	assert.True(t, ok)
	assert.Nil(t, p, "a plain table answers at once")

	writeFile(t, path, "new:pw\n")
	require.NoError(t, v.Reload())
	ok, _ = v.Check([]byte("foo"), []byte("bar"), nil)
	assert.False(t, ok, "the old file's user is gone")
	ok, _ = v.Check([]byte("new"), []byte("pw"), nil)
	assert.True(t, ok)

	writeFile(t, path, "new:pw\nbroken\n")
	require.ErrorContains(t, v.Reload(), "line 2: malformed entry")
	ok, _ = v.Check([]byte("new"), []byte("pw"), nil)
	assert.True(t, ok, "a malformed file leaves the table in use")

	for _, bad := range []string{
		"new:pw\na:" + minCostHash(t, "x") + "\nb:" + costHash(t, "y", bcrypt.MinCost+1) + "\n",
		"new:pw\na:" + minCostHash(t, "x") + "\na:" + minCostHash(t, "y") + "\n",
	} {
		writeFile(t, path, bad)
		require.ErrorContains(t, v.Reload(), "line 3: user ")
		ok, _ = v.Check([]byte("new"), []byte("pw"), nil)
		assert.True(t, ok, "a file whose checks would differ in time leaves the table in use")
		assert.False(t, v.Table().Slow(), "the table in use has no hash")
	}

	require.NoError(t, os.Remove(path))
	require.Error(t, v.Reload())
	ok, _ = v.Check([]byte("new"), []byte("pw"), nil)
	assert.True(t, ok, "a missing file leaves the table in use")

	_, err = NewVerifier(path)
	require.Error(t, err, "a missing file does not load at start")
}

// TestVerifierOffCaller: a check that needs bcrypt runs on a checker goroutine and wakes the caller; a
// pair once verified is answered at once; a reload forgets it.
func TestVerifierOffCaller(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pw")
	writeFile(t, path, "u:"+minCostHash(t, "pw")+"\n")
	v, err := NewVerifier(path)
	require.NoError(t, err)
	check := func(user, pass string) (bool, bool) {
		woken := make(chan struct{})
		var wakes atomic.Int32
		ok, p := v.Check([]byte(user), []byte(pass), func() { wakes.Add(1); close(woken) })
		if p == nil {
			return ok, false
		}
		select {
		case <-woken:
		case <-time.After(10 * time.Second):
			t.Fatal("no wake")
		}
		ok, done := p.Result()
		require.True(t, done, "woken once done")
		assert.Equal(t, int32(1), wakes.Load())
		return ok, true
	}
	ok, async := check("u", "pw")
	assert.True(t, ok)
	assert.True(t, async, "the first check runs off the caller")
	ok, async = check("u", "pw")
	assert.True(t, ok)
	assert.False(t, async, "a verified pair is answered at once")
	for range 2 {
		ok, async = check("u", "wrong")
		assert.False(t, ok)
		assert.True(t, async, "a failure is never remembered")
	}
	ok, async = check("nobody", "pw")
	assert.False(t, ok)
	assert.True(t, async, "an unknown user costs what a known one does")
	ok, p := v.Check([]byte("u"), []byte("wrong"), nil)
	assert.False(t, ok)
	assert.Nil(t, p, "without a wake the check runs in the caller")
	require.NoError(t, v.Reload())
	_, async = check("u", "pw")
	assert.True(t, async, "a reload forgets verified pairs")
}

// blockCompares makes every bcrypt comparison wait for release, until the test ends, and answer at once
// (a match for the password "pw" only); calls counts them.
func blockCompares(t *testing.T) (calls *atomic.Int32, release func()) {
	t.Helper()
	calls = new(atomic.Int32)
	gate := make(chan struct{})
	t.Cleanup(func() { compareHash = bcrypt.CompareHashAndPassword })
	compareHash = func(hash, pass []byte) error {
		calls.Add(1)
		<-gate
		if string(pass) == "pw" {
			return nil
		}
		return bcrypt.ErrMismatchedHashAndPassword
	}
	return calls, func() { close(gate) }
}

// TestVerifierCancel: a check whose connection has closed while it waits for a checker leaves the queue at
// once and is never made; the others are, and wake their callers.
func TestVerifierCancel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pw")
	writeFile(t, path, "u:"+minCostHash(t, "pw")+"\n")
	v, err := NewVerifier(path)
	require.NoError(t, err)
	calls, release := blockCompares(t)
	var wakes atomic.Int32
	check := func(pass string) *Pending {
		ok, p := v.Check([]byte("u"), []byte(pass), func() { wakes.Add(1) })
		require.NotNil(t, p)
		assert.False(t, ok)
		return p
	}
	for range Checkers { // they hold the checkers
		check("wrong")
	}
	require.Eventually(t, func() bool { return calls.Load() == Checkers }, 10*time.Second, time.Millisecond)
	for range 50 { // they wait; their connections close
		p := check("wrong")
		p.Cancel()
		p.Cancel()
	}
	live := check("pw")
	assert.Equal(t, Checkers+1, v.Checking(), "the canceled checks have left the queue")
	release()
	require.Eventually(t, func() bool { return v.Checking() == 0 }, 10*time.Second, time.Millisecond)
	assert.Equal(t, int32(Checkers+1), calls.Load(), "the canceled checks were not made")
	assert.Equal(t, int32(Checkers+1), wakes.Load(), "nor woke anyone")
	ok, done := live.Result()
	assert.True(t, done)
	assert.True(t, ok)
}

func TestMaxQueued(t *testing.T) {
	for _, tc := range []struct{ cost, queued int }{
		{4, 1024}, {5, 1024}, {6, 512}, {8, 128}, {10, 32}, {12, 8}, {MaxBcryptCost, 2},
	} {
		assert.Equal(t, tc.queued, MaxQueued(tc.cost), "cost %d", tc.cost)
	}
}

// TestVerifierQueueBounded: beyond Checkers running and MaxQueued waiting, a check is answered at once as
// a failure without being made, on either transport; a verified pair is still answered from the cache; a
// canceled check makes room.
func TestVerifierQueueBounded(t *testing.T) {
	for _, cost := range []int{bcrypt.MinCost, 8} {
		t.Run(strconv.Itoa(cost), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "pw")
			writeFile(t, path, "u:"+costHash(t, "pw", cost)+"\n")
			v, err := NewVerifier(path)
			require.NoError(t, err)
			ok, _ := v.Check([]byte("u"), []byte("pw"), nil)
			require.True(t, ok, "verified, so cached")
			calls, release := blockCompares(t)
			var wakes atomic.Int32
			wake := func() { wakes.Add(1) }
			limit := Checkers + MaxQueued(cost)
			queued := make([]*Pending, limit)
			for i := range queued {
				ok, queued[i] = v.Check([]byte("u"), []byte("wrong"), wake)
				require.NotNil(t, queued[i], "check %d of %d", i, limit)
				assert.False(t, ok)
			}
			require.Eventually(t, func() bool { return calls.Load() == Checkers }, 10*time.Second, time.Millisecond)

			ok, p := v.Check([]byte("nobody"), []byte("wrong"), wake)
			assert.False(t, ok)
			assert.Nil(t, p, "a full queue answers at once")
			answered := make(chan bool)
			go func() { ok, _ := v.Check([]byte("u"), []byte("other"), nil); answered <- ok }()
			select {
			case ok = <-answered:
				assert.False(t, ok)
			case <-time.After(10 * time.Second):
				t.Fatal("a check in the caller waited for a full queue")
			}
			ok, p = v.Check([]byte("u"), []byte("pw"), wake)
			assert.True(t, ok, "a verified pair is answered from the cache")
			assert.Nil(t, p)
			assert.Equal(t, int32(Checkers), calls.Load(), "no check was made beyond the queue")

			queued[limit-1].Cancel()
			assert.Equal(t, limit-1, v.Checking())
			_, p = v.Check([]byte("u"), []byte("wrong"), wake)
			assert.NotNil(t, p, "a canceled check made room")

			release()
			require.Eventually(t, func() bool { return v.Checking() == 0 }, 30*time.Second, time.Millisecond)
			assert.Equal(t, int32(limit), wakes.Load())
		})
	}
}

func TestVerifierCacheBounded(t *testing.T) {
	l := &loaded{ok: make(map[[32]byte]struct{})}
	l.t, _ = Parse([]byte("u:p\n"))
	for i := range CacheSize + 10 {
		var id [32]byte
		id[0], id[1] = byte(i), byte(i>>8)
		require.True(t, l.verify([]byte("u"), []byte("p"), id))
		assert.LessOrEqual(t, len(l.ok), CacheSize)
	}
}

// FuzzParse: Parse never panics; a file it accepts is read as memcached reads it (user before the first
// colon, password to the line's end) for every line.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"foo:bar\nbaaaz:quux\n", "a:b", "a:b\r\nc:d\r\n", "", "\n", "#x\n", "a:b\x00\n",
		"u:$2y$04$abcdefghijklmnopqrstuuJ0b7q5FJ6XGmO5RX3J6V8Y6K2hJ9E2y\n", "a:b:c d\n", "x\r:y\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tab, err := Parse(data)
		if err != nil {
			return
		}
		lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
		if len(data) == 0 {
			lines = nil
		}
		if tab.Entries() != len(lines) {
			t.Fatalf("%d entries for %d lines", tab.Entries(), len(lines))
		}
		for _, line := range lines {
			line = strings.TrimSuffix(line, "\r")
			user, pass, ok := strings.Cut(line, ":")
			if !ok {
				t.Fatalf("accepted a line without a colon: %q", line)
			}
			if isBcrypt([]byte(pass)) {
				continue
			}
			if !tab.Check([]byte(user), []byte(pass)) {
				t.Fatalf("line %q: its own user and password do not authenticate", line)
			}
		}
	})
}

// requireTimingRun skips a test that compares wall-clock times unless AUTH_TIMING is set (`make
// auth-timing`): on a loaded machine, under the race detector and beside other packages' tests, the best
// of five bcrypt checks has varied threefold (CI, 2026-11-26). TestCheckComparesOneHash proves the same
// property in every run by counting the comparisons and their cost.
func requireTimingRun(t *testing.T) {
	t.Helper()
	if os.Getenv("AUTH_TIMING") == "" {
		t.Skip("wall-clock comparison: AUTH_TIMING=1 (make auth-timing) on a quiet machine")
	}
}
