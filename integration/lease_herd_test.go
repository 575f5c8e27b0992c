package integration

import (
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Thundering herd (leases.md, "Why"): herdClients clients read one hot key whose item keeps expiring,
// and a miss costs a herdRefill-long "database" query. Three client strategies run the same loop:
//
//	lease     lease-get; a grant refills and lease-sets, a hot miss takes the stale value at once
//	          (or, with none yet, backs off and retries); on leasecached
//	plain     get; a miss refills and sets; on leasecached
//	meta N    mg <key> v t N<ttl>: the W winner refills and ms-es, Z readers back off and retry; on
//	          memcached 1.6 (its own answer to the herd)
//
// An expiry is one cluster of refills (refills closer than herdEpisodeGap in time: the item lives at
// least a second, a herd's refills start within a refill's time of each other). With leases the
// database must see exactly one refill per expiry (the contract allows one per lease window, and a
// refill is much shorter than the window), and every reader that got a stale value must have had it
// without waiting for the refill.

// Bounds and shape of the herd scenario.
const (
	herdClients = 200
	// herdDuration bounds each strategy's run: clients start no new read after it.
	herdDuration = 5 * time.Second
	// herdRefill is the database query's latency.
	herdRefill = 100 * time.Millisecond
	// herdTTL is the item's exptime in seconds. Exptimes have 1-s resolution, so an item stored with
	// exptime n lives between n-1 and n seconds: 2 gives "about a second" without ever expiring at once.
	herdTTL = 2
	// herdThink is the mean pause between two reads of one client (jittered by +-50%).
	herdThink = 20 * time.Millisecond
	// herdEpisodeGap separates two expiries' refills: more than a refill, less than an item's life.
	herdEpisodeGap = 500 * time.Millisecond
	// herdBackoffStart, herdBackoffMax: a waiting reader's retry pause starts near 2 ms and doubles up
	// to the cap (leases.md, "A client's side"), with jitter.
	herdBackoffStart = 2 * time.Millisecond
	herdBackoffMax   = 32 * time.Millisecond
	// herdReadTimeout bounds one read, retries included.
	herdReadTimeout = 3 * time.Second
	// herdLeaseWindow is the daemon's lease window: far longer than a refill, so one lease covers it.
	herdLeaseWindow = time.Second
	// herdValueSize is the size of the cached value.
	herdValueSize = 100
	// herdKey is the hot key.
	herdKey = "herd-hot-key"
)

// readKind classifies one read by how it got its value.
type readKind int

const (
	readHit     readKind = iota // a fresh value at the first request
	readRefill                  // this reader queried the database
	readStale                   // a stale value, at the first request, while someone else refilled
	readWaited                  // waited for someone else's refill (hot miss or Z without a value), then a hit
	readCrashed                 // this reader was to refill, and crashed instead (herdPlan.crash)
)

// herdRead is one measured read.
type herdRead struct {
	kind    readKind
	start   time.Time
	latency time.Duration
}

// herdDB is the source of truth: every query takes herdRefill and is recorded. Its ledger is what the
// plain clients saw (herdLedger, plain_herd_test.go).
type herdDB struct {
	mu      sync.Mutex
	starts  []time.Time
	version int
	exptime int // of every store of the plain clients
	ledger  herdLedger
}

func (db *herdDB) query() []byte {
	start := time.Now()
	time.Sleep(herdRefill)
	db.mu.Lock()
	db.starts = append(db.starts, start)
	db.version++
	v := db.version
	db.mu.Unlock()
	return herdValue(v)
}

// herdValue is the value of the given version: every query stores a version of its own, so that a reader
// can tell which store answered it (herdVersion).
func herdValue(version int) []byte {
	head := fmt.Sprintf("version-%d-", version)
	return []byte(head + strings.Repeat("d", herdValueSize-len(head)))
}

// herdVersion is the version of a value herdValue made.
func herdVersion(val []byte) (int, error) {
	f := strings.SplitN(string(val), "-", 3)
	if len(f) != 3 || f[0] != "version" {
		return 0, fmt.Errorf("value %q is not one of the herd database's", truncate(val, 40))
	}
	return strconv.Atoi(f[1])
}

// herdStrategy performs one read through the cache.
type herdStrategy struct {
	name   string
	server string // which daemon: "leasecached" or "memcached"
	read   func(c *leaseConn, db *herdDB, rng *rand.Rand, deadline time.Time) (readKind, error)
}

var herdStrategies = []herdStrategy{
	{"lease-get/set + stale", "leasecached", herdLeaseRead},
	{"get/set", "leasecached", herdPlainRead},
	{"memcached mg N (W/Z)", "memcached", herdMetaRead},
}

// backoff sleeps the current pause with jitter and returns the next one.
func backoff(rng *rand.Rand, pause time.Duration) time.Duration {
	time.Sleep(pause/2 + time.Duration(rng.Int63n(int64(pause))))
	return min(2*pause, herdBackoffMax)
}

func herdLeaseRead(c *leaseConn, db *herdDB, rng *rand.Rand, deadline time.Time) (readKind, error) {
	pause := herdBackoffStart
	for attempt := 0; ; attempt++ {
		blk, err := c.leaseGet1(herdKey)
		if err != nil {
			return 0, err
		}
		switch {
		case blk.hit && attempt == 0:
			return readHit, nil
		case blk.hit:
			return readWaited, nil
		case blk.token >= minGrantToken:
			reply, err := c.leaseSet(herdKey, blk.token, 0, herdTTL, db.query())
			if err != nil {
				return 0, err
			}
			if reply != "STORED" && reply != "NOT_STORED" {
				return 0, fmt.Errorf("lease-set: %q", reply)
			}
			return readRefill, nil
		case len(blk.data) > 0 && attempt == 0:
			return readStale, nil
		case len(blk.data) > 0:
			return readWaited, nil // only if the first try had no stale value but a retry found one
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("lease-get: still a hot miss after %d tries", attempt+1)
		}
		pause = backoff(rng, pause)
	}
}

// herdPlainRead is an unchanged memcached client: get; on a miss, query the database and set. What it
// saw goes into the ledger, which tells a grace copy from a fresh hit (herdLedger).
func herdPlainRead(c *leaseConn, db *herdDB, _ *rand.Rand, _ time.Time) (readKind, error) {
	snap := db.beforeGet()
	val, _, ok, err := c.get(herdKey)
	if err != nil {
		return 0, err
	}
	if ok {
		return db.hit(snap, val)
	}
	if db.miss(snap) {
		return readCrashed, errHerdCrash
	}
	val = db.query()
	db.setSent(snap)
	reply, err := c.set(herdKey, 0, db.exptime, val)
	if err == nil && reply != "STORED" {
		err = fmt.Errorf("set: %q", reply)
	}
	if err == nil {
		err = db.stored(val)
	}
	return readRefill, err
}

// herdMetaRead is memcached's vivify-on-miss recipe (doc/protocol.txt, mg flags N, W, Z).
func herdMetaRead(c *leaseConn, db *herdDB, rng *rand.Rand, deadline time.Time) (readKind, error) {
	pause := herdBackoffStart
	for attempt := 0; ; attempt++ {
		n, flags, err := c.metaGet(fmt.Sprintf("mg %s v t N%d\r\n", herdKey, herdTTL))
		if err != nil {
			return 0, err
		}
		switch {
		case strings.Contains(flags, "W"):
			val := db.query()
			reply, err := c.call(fmt.Sprintf("ms %s %d T%d\r\n%s\r\n", herdKey, len(val), herdTTL, val))
			if err == nil && reply != "HD" {
				err = fmt.Errorf("ms: %q", reply)
			}
			return readRefill, err
		case n > 0 && attempt == 0:
			return readHit, nil
		case n > 0:
			return readWaited, nil
		}
		// Z with the empty vivified item: someone else refills.
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("mg: still no value after %d tries (flags %q)", attempt+1, flags)
		}
		pause = backoff(rng, pause)
	}
}

// metaGet sends an mg with the v flag and returns the value's length and the reply's flags.
func (lc *leaseConn) metaGet(cmd string) (n int, flags string, err error) {
	l, err := lc.call(cmd)
	if err != nil {
		return 0, "", err
	}
	f := strings.Fields(l)
	if len(f) < 2 || f[0] != "VA" {
		return 0, "", fmt.Errorf("%q: reply %q, want VA", strings.TrimSpace(cmd), l)
	}
	if n, err = strconv.Atoi(f[1]); err != nil {
		return 0, "", fmt.Errorf("%q: reply %q: %w", strings.TrimSpace(cmd), l, err)
	}
	if _, err := lc.data(n); err != nil {
		return 0, "", err
	}
	return n, " " + strings.Join(f[2:], " "), nil
}

// herdResult is one strategy's measurements.
type herdResult struct {
	name     string
	reads    []herdRead
	refills  []time.Time
	episodes [][]time.Time // refill start times grouped by expiry
	firstEnd time.Time     // when the first refill had finished
	// What the ledger attributed (herdPlainRead only): the expiries or deletes that caused refills, in
	// order, the deletes sent, and the reads that got a value stored before a delete answered earlier.
	causes      []herdCause
	deletes     int
	afterDelete int
}

// herdPlan is how long a run lasts and what else happens to the key.
type herdPlan struct {
	// run: clients start no new read after it once no refill is under way, so that the last herd is
	// counted whole; limit: nor after it in any case.
	run, limit time.Duration
	// episodes > 0: stop as soon as that many expiries or deletes have been refilled.
	episodes int
	exptime  int  // of every store of the plain clients
	prefill  bool // store the key before the clients start: no run begins with a cold miss
	// deleteEvery > 0: a writer connection of its own deletes the key this often.
	deleteEvery time.Duration
	// crash: the first refiller of every expiry or delete never sets; it drops its connection and
	// reconnects (herdLedger.miss).
	crash bool
}

// errHerdCrash is the read of a refiller that crashed on purpose (herdPlan.crash).
var errHerdCrash = errors.New("the refiller crashed")

func runHerd(t *testing.T, d *daemon, st herdStrategy, plan herdPlan) herdResult {
	t.Helper()
	db := &herdDB{exptime: plan.exptime, ledger: herdLedger{crash: plan.crash}}
	conns := make([]*leaseConn, herdClients)
	for i := range conns {
		conns[i] = mustDialLease(t, d)
	}
	writer := mustDialLease(t, d)
	if plan.prefill {
		val := herdValue(0)
		reply, err := writer.set(herdKey, 0, plan.exptime, val)
		require.NoError(t, err)
		require.Equal(t, "STORED", reply)
		require.NoError(t, db.stored(val))
	}
	begin := time.Now()
	soft, hard := begin.Add(plan.run), begin.Add(plan.limit)
	done := func() bool {
		now := time.Now()
		return now.After(hard) || db.finished(plan.episodes) || now.After(soft) && !db.refilling()
	}
	// Every read pauses at least herdThink/2, so no client can make more reads than this before limit.
	maxReads := int(plan.limit/(herdThink/2)) + 1
	perClient := make([][]herdRead, herdClients)
	errs := make(chan error, herdClients+1)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := conns[i]
			defer func() {
				if c != nil {
					c.Close()
				}
			}()
			rng := rand.New(rand.NewSource(int64(i) + 1))
			for n := 0; n < maxReads && !done(); n++ {
				start := time.Now()
				kind, err := st.read(c, db, rng, start.Add(herdReadTimeout))
				if errors.Is(err, errHerdCrash) {
					c.Close()
					c, err = dialLease(d)
				}
				if err != nil {
					errs <- fmt.Errorf("%s client %d: %w", st.name, i, err)
					return
				}
				perClient[i] = append(perClient[i], herdRead{kind, start, time.Since(start)})
				time.Sleep(herdThink/2 + time.Duration(rng.Int63n(int64(herdThink))))
			}
		}()
	}
	if plan.deleteEvery > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := herdDeleter(writer, db, begin, plan.deleteEvery, int(plan.limit/plan.deleteEvery), done); err != nil {
				errs <- fmt.Errorf("%s deleter: %w", st.name, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	res := herdResult{name: st.name, refills: db.starts}
	for _, rs := range perClient {
		res.reads = append(res.reads, rs...)
	}
	slices.SortFunc(res.refills, func(a, b time.Time) int { return a.Compare(b) })
	for i, s := range res.refills {
		if i == 0 || s.Sub(res.refills[i-1]) > herdEpisodeGap {
			res.episodes = append(res.episodes, nil)
		}
		res.episodes[len(res.episodes)-1] = append(res.episodes[len(res.episodes)-1], s)
	}
	if len(res.refills) > 0 {
		res.firstEnd = res.refills[0].Add(herdRefill)
	}
	res.causes, res.deletes, res.afterDelete = db.ledger.results()
	return res
}

// herdDeleter deletes the key every interval from begin, at most n times, until done.
func herdDeleter(w *leaseConn, db *herdDB, begin time.Time, every time.Duration, n int, done func() bool) error {
	for i := 1; i <= n; i++ {
		next := begin.Add(time.Duration(i) * every)
		for wait := time.Until(next); wait > 0 && !done(); wait = time.Until(next) {
			time.Sleep(min(wait, 10*time.Millisecond)) // short naps: a run that is over stops the writer soon
		}
		if done() {
			return nil
		}
		db.deleteSent()
		reply, err := w.call("delete " + herdKey + "\r\n")
		if err != nil {
			return err
		}
		if reply != "DELETED" && reply != "NOT_FOUND" {
			return fmt.Errorf("delete: %q", reply)
		}
		db.deleteAnswered()
	}
	return nil
}

// latencies returns the sorted latencies of the reads of the given kinds.
func (r herdResult) latencies(kinds ...readKind) []time.Duration {
	var out []time.Duration
	for _, rd := range r.reads {
		if slices.Contains(kinds, rd.kind) {
			out = append(out, rd.latency)
		}
	}
	slices.Sort(out)
	return out
}

// pct is the q-quantile (0..1) of sorted durations, 0 when empty.
func pct(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// summary renders "n p50/p99/p999" (or just the percentiles) of the reads of the given kinds, in ms.
func (r herdResult) summary(withCount bool, kinds ...readKind) string {
	l := r.latencies(kinds...)
	s := ms(pct(l, .5)) + "/" + ms(pct(l, .99)) + "/" + ms(pct(l, .999))
	if withCount {
		s = strconv.Itoa(len(l)) + " " + s
	}
	return s
}

func (r herdResult) count(k readKind) int {
	n := 0
	for _, rd := range r.reads {
		if rd.kind == k {
			n++
		}
	}
	return n
}

// refillsPerExpiry returns the mean and the largest number of refills of one expiry.
func (r herdResult) refillsPerExpiry() (mean float64, most int) {
	for _, e := range r.episodes {
		most = max(most, len(e))
	}
	if len(r.episodes) > 0 {
		mean = float64(len(r.refills)) / float64(len(r.episodes))
	}
	return mean, most
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64)
}

// TestLeaseHerd runs the three strategies one after the other (each alone on the machine, so their
// latencies compare) and logs a table of refills per expiry and waiter latencies.
func TestLeaseHerd(t *testing.T) {
	requireLeases(t)
	if testing.Short() {
		t.Skip("herd: about 17 s of load")
	}
	lc := startLeasecached(t, "-c", "1024", "--lease-window", herdLeaseWindow.String(), "--stale-window", "10s")
	mc := startMemcached(t, "-c", "1024")
	var results []herdResult
	for _, st := range herdStrategies {
		d := lc
		if st.server == "memcached" {
			d = mc
		}
		results = append(results, runHerd(t, d, st, herdPlan{run: herdDuration, limit: herdDuration, exptime: herdTTL}))
	}

	t.Logf("herd: %d clients, one key, exptime %d s, refill %v, think %v, %v per strategy; latencies in ms",
		herdClients, herdTTL, herdRefill, herdThink, herdDuration)
	t.Logf("%-22s %4s %7s %11s %6s | %-20s | %-20s | %-15s", "strategy", "exp", "refills", "refills/exp",
		"reads", "stale n p50/p99/p999", "waited n p50/p99/p999", "miss p50/p99/p999")
	for _, r := range results {
		mean, most := r.refillsPerExpiry()
		t.Logf("%-22s %4d %7d %5.1f max%3d %6d | %-20s | %-20s | %-15s", r.name, len(r.episodes), len(r.refills),
			mean, most, len(r.reads), r.summary(true, readStale), r.summary(true, readWaited),
			r.summary(false, readStale, readWaited, readRefill))
	}
	t.Logf("exp: expiries (clusters of refills); stale: served a stale value at once; waited: retried until " +
		"someone else's refill landed; miss: every read that did not hit at once, refills included")

	lease, plain := results[0], results[1]
	if len(lease.episodes) < 2 {
		t.Errorf("lease: %d expiries in %v: the item never expired, the scenario is degenerate", len(lease.episodes), herdDuration)
	}
	for i, e := range lease.episodes {
		// Rule 2 permits one refill per lease window per key; refills are much shorter than the window.
		allowed := 1 + int(e[len(e)-1].Sub(e[0])/herdLeaseWindow)
		if len(e) > allowed {
			t.Errorf("lease: expiry %d had %d refills (starting %v apart), the contract allows %d",
				i, len(e), e[len(e)-1].Sub(e[0]), allowed)
		}
	}
	if n := lease.count(readStale); n == 0 {
		t.Errorf("lease: no reader got a stale value: the scenario did not exercise rule 4")
	}
	// A stale value is handed over at the first request (readStale means attempt 0), and the server must
	// not hold that reply back until the refill lands: were it to, every stale read would take at least
	// herdRefill. The median is the robust witness on a loaded machine; p99 is logged in the table.
	if p := pct(lease.latencies(readStale), .5); p >= herdRefill/2 {
		t.Errorf("lease: stale readers' median latency %v: they waited for the %v refill", p, herdRefill)
	}
	// Only the very first fill (no stale value exists yet) may make readers wait.
	for _, rd := range lease.reads {
		if rd.kind == readWaited && rd.start.After(lease.firstEnd) {
			t.Errorf("lease: a read started %v after the first fill had to wait (%v) instead of taking a stale value",
				rd.start.Sub(lease.firstEnd), rd.latency)
			break
		}
	}
	if mean, _ := plain.refillsPerExpiry(); mean <= 1 {
		t.Errorf("plain get/set: %.1f refills per expiry: no herd formed, so the comparison shows nothing", mean)
	}
}
