package integration

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPlainHerd is issue 27's measurement: herdClients unchanged clients (get; on a miss a herdRefill-long
// database query, then set: herdPlainRead) read one hot key, against memcached 1.6.18 and leasecached with
// neither herd mode, with --grace, with --hold and (make herd only) with both, in two scenarios: the key
// expires (exptime herdTTL), or a writer deletes it every herdDeleteEvery (it never expires). Per row:
// database refills per expiry or delete, reader latencies, and the server's grace or hold counters. One
// more row crashes the refiller of every expiry under grace (it never sets), to show that this costs at
// most one lease window; make herd repeats it with a lease window as long as the grace, which has no
// target: it shows why the grace must be the longer (README.md).
//
// Refills are attributed to their expiry or delete by causality (herdLedger), never by timing, and so are
// the grace hits; the assertions count events, with margins far from both outcomes (a herd is about
// herdClients refills, protection is one), so that they hold on a loaded machine under -race.
//
// In `make test` each row runs until its first expiry or delete has been refilled (grace: its second, so
// that a grace copy of a refilled item is seen too), about 20 s in all. `make herd` sets HERD_TIME (a Go
// duration) and runs every row that long against the daemon built without the race detector, for the
// table of README.md ("Herds of plain get/set clients").
func TestPlainHerd(t *testing.T) {
	requireLeases(t)
	cfg := herdConfigFromEnv(t)
	loadBefore := loadAverage()
	for _, sc := range herdScenarios {
		var results []herdRowResult
		for _, row := range herdRows {
			if cfg.short && row.shortEpisodes == 0 || row.crash && sc.deleteEvery > 0 {
				continue
			}
			t.Run(sc.name+"/"+row.name, func(t *testing.T) {
				r := runHerdRow(t, sc, row, cfg)
				results = append(results, r)
				checkHerdRow(t, sc, r, cfg)
			})
		}
		logHerdTable(t, sc, cfg, results)
	}
	t.Logf("load average (1, 5, 15 min) before: %s; after: %s; %d CPUs", loadBefore, loadAverage(), runtime.NumCPU())
}

// Shape of the plain herd, besides what it shares with TestLeaseHerd (lease_herd_test.go).
const (
	herdTimeEnv = "HERD_TIME"
	// herdDeleteEvery is the writer's pause between two deletes.
	herdDeleteEvery = 2 * time.Second
	// herdShortLimit bounds a row of the short run, which stops as soon as it has counted its expiries.
	herdShortLimit = 20 * time.Second
	// herdLongTail is how long a row of the long run may go on after HERD_TIME to finish its last herd:
	// with a crashed refiller and a 10 s lease window, that herd comes 10 s after the crash.
	herdLongTail = 15 * time.Second
	// herdGrace is --grace: it must outlast a refill by far, and several lease windows, so that a crashed
	// refiller (one window each, rule 2) does not run it out; at 10 s it equals the default stale window,
	// which keeps an expired value that long for lease-get anyway (shard/ghost.go ghostSecs).
	herdGrace = "10s"
	// herdHold is --hold: far longer than a refill, so that a parked reader is answered by the refill.
	herdHold = "1s"
	// Margins of the checks: a herd is about herdClients refills per expiry or delete, protection one.
	herdAtLeast = 20 // refills per expiry or delete that show a herd formed
	herdAtMost  = 2  // refills per expiry or delete that show the server stopped it
)

// herdConfig is the run's size: short (make test) or long (make herd).
type herdConfig struct {
	short bool
	run   time.Duration // long: each row's length
	plain bool          // use the daemon built without the race detector (the figures are latencies)
}

func herdConfigFromEnv(t *testing.T) herdConfig {
	s := os.Getenv(herdTimeEnv)
	if s == "" {
		return herdConfig{short: true}
	}
	d, err := time.ParseDuration(s)
	require.NoError(t, err, "%s=%q", herdTimeEnv, s)
	require.Positive(t, d, "%s", herdTimeEnv)
	return herdConfig{run: d, plain: true}
}

// herdScenario is what makes the key go: its expiry, or a writer's delete.
type herdScenario struct {
	name        string
	cause       string // "expiry" or "delete"
	exptime     int
	deleteEvery time.Duration
}

var herdScenarios = []herdScenario{
	{"expire", "expiry", herdTTL, 0},
	{"delete", "delete", 0, herdDeleteEvery},
}

// herdRow is one server configuration.
type herdRow struct {
	name   string
	server string   // "memcached" or "leasecached"
	args   []string // leasecached's, after the lease window
	hold   bool     // runs with --hold: checked as hold rows are
	crash  bool     // the first refiller of every expiry never sets (expire only)
	// window is --lease-window when not herdLeaseWindow: the row shows what a grace no longer than the
	// lease window does to a crashed refiller, and has no target.
	window time.Duration
	// shortEpisodes: in the short run, the expiries or deletes the row counts (0: long run only).
	shortEpisodes int
}

var herdRows = []herdRow{
	{name: "memcached 1.6.18", server: "memcached", shortEpisodes: 1},
	{name: "leasecached", server: "leasecached"},
	{name: "leasecached --grace " + herdGrace, server: "leasecached", args: []string{"--grace", herdGrace}, shortEpisodes: 2},
	{name: "leasecached --hold " + herdHold, server: "leasecached", args: []string{"--hold", herdHold}, hold: true, shortEpisodes: 1},
	{name: "leasecached --grace --hold", server: "leasecached", args: []string{"--grace", herdGrace, "--hold", herdHold}, hold: true},
	{name: "--grace, refiller crashes", server: "leasecached", args: []string{"--grace", herdGrace}, crash: true, shortEpisodes: 1},
	{name: "the same, lease window 10s", server: "leasecached", args: []string{"--grace", herdGrace}, crash: true, window: 10 * time.Second},
}

func (row herdRow) leaseWindow() time.Duration {
	if row.window == 0 {
		return herdLeaseWindow
	}
	return row.window
}

// herdRowResult is one row's measurements.
type herdRowResult struct {
	herdResult
	row   herdRow
	stats map[string]string // the server's stats after the run
	want  int               // expiries or deletes the short run waited for
}

func runHerdRow(t *testing.T, sc herdScenario, row herdRow, cfg herdConfig) herdRowResult {
	var d *daemon
	args := append([]string{"-c", "1024", "--lease-window", row.leaseWindow().String()}, row.args...)
	switch {
	case row.server == "memcached":
		d = startMemcached(t, "-c", "1024")
	case cfg.plain:
		d = startLeasecachedPlain(t, args...)
	default:
		d = startLeasecached(t, args...)
	}
	plan := herdPlan{run: cfg.run, limit: cfg.run + herdLongTail, exptime: sc.exptime, prefill: true,
		deleteEvery: sc.deleteEvery, crash: row.crash}
	if cfg.short {
		plan.run, plan.limit, plan.episodes = herdShortLimit, herdShortLimit, row.shortEpisodes
	}
	r := herdRowResult{row: row, want: plan.episodes}
	r.herdResult = runHerd(t, d, herdStrategy{row.name, row.server, herdPlainRead}, plan)
	stats, err := mustDialLease(t, d).stats()
	require.NoError(t, err)
	r.stats = stats
	return r
}

// checkHerdRow asserts issue 27's targets on one row.
func checkHerdRow(t *testing.T, sc herdScenario, r herdRowResult, cfg herdConfig) {
	require.NotEmpty(t, r.causes, "no %s caused a refill: the scenario is degenerate", sc.cause)
	if cfg.short {
		require.GreaterOrEqual(t, r.completed(), r.want, "%s: fewer %ss refilled than the run waited for", r.name, sc.cause)
	}
	// Read-after-delete is a miss, on every server and in every mode (issue 27, the rules for plain clients).
	assert.Zero(t, r.afterDelete, "reads that got a value stored before a delete that had been answered")
	if sc.deleteEvery > 0 {
		// Every refill is a delete's: the key never expires.
		assert.LessOrEqual(t, len(r.causes), r.deletes, "more refilled causes than deletes")
	}
	switch {
	case r.row.server == "memcached":
		// The control: plain clients form a herd, so the targets below measure something.
		assert.GreaterOrEqual(t, r.perCause(sc), float64(herdAtLeast), "memcached: no herd formed")
	case r.row.hold:
		for i, c := range r.causes {
			assert.LessOrEqual(t, c.refills, herdAtMost, "hold: %s %d", sc.cause, i)
		}
	case r.row.crash:
		if r.row.window == 0 {
			checkHerdCrash(t, r)
		}
	case slices.Contains(r.row.args, "--grace") && sc.deleteEvery > 0:
		// A delete never leaves a grace copy for plain reads: nothing is served from one, nobody refills
		// for one.
		assert.Equal(t, "0", r.stats["get_grace_hits"], "grace hits after deletes")
		assert.Equal(t, "0", r.stats["grace_refills"], "grace refills after deletes")
	case slices.Contains(r.row.args, "--grace"):
		for i, c := range r.causes {
			assert.LessOrEqual(t, c.refills, herdAtMost, "grace: expiry %d", i)
			// No reader under grace waits: the other readers were answered (with the grace copy) before
			// the refiller had even sent its set.
			assert.Positive(t, c.early, "grace: expiry %d: no grace hit answered before the refill's set", i)
		}
		assert.Equal(t, strconv.Itoa(len(r.refills)), r.stats["grace_refills"], "grace_refills against the database's count")
		assert.Equal(t, "0", r.stats["grace_lease_lapses"])
	}
}

// checkHerdCrash: a crashed refiller costs at most one lease window. Its expiry has exactly one crash,
// then at most herdAtMost refills, the first only once the crashed refiller's lease has lapsed (rule 2;
// the bounds are half a window and two, far from a herd at once and from no refill at all), and the other
// readers get the grace copy meanwhile.
func checkHerdCrash(t *testing.T, r herdRowResult) {
	crashes := 0
	for i, c := range r.causes {
		crashes += c.crashes
		if !assert.Equal(t, 1, c.crashes, "expiry %d: crashed refillers", i) || !assert.NotZero(t, c.refills, "expiry %d: never refilled", i) {
			continue
		}
		assert.LessOrEqual(t, c.refills, herdAtMost, "expiry %d", i)
		assert.Greater(t, c.lapseRecv.Sub(c.crashSent), herdLeaseWindow/2, "expiry %d: refilled before the lease lapsed", i)
		assert.Less(t, c.lapseSent.Sub(c.crashRecv), 2*herdLeaseWindow, "expiry %d: refilled long after the lease lapsed", i)
		assert.Positive(t, c.stale, "expiry %d: no grace hits while the crashed refiller held the lease", i)
	}
	assert.Equal(t, strconv.Itoa(crashes), r.stats["grace_lease_lapses"], "one lapse per crashed refiller")
}

// completed is how many of the causes were refilled.
func (r herdRowResult) completed() int {
	n := 0
	for _, c := range r.causes {
		if c.refills > 0 {
			n++
		}
	}
	return n
}

// perCause is the mean number of refills per expiry (per refilled cause: a run may end between a
// crashed refiller and the next) or per delete (per delete sent).
func (r herdRowResult) perCause(sc herdScenario) float64 {
	n := r.completed()
	if sc.deleteEvery > 0 {
		n = r.deletes
	}
	if n == 0 {
		return 0
	}
	return float64(len(r.refills)) / float64(n)
}

// spread renders p50/p99/max of sorted durations in ms.
func spread(l []time.Duration) string {
	return ms(pct(l, .5)) + "/" + ms(pct(l, .99)) + "/" + ms(pct(l, 1))
}

// logHerdTable logs one scenario's table (README.md, "Herds of plain get/set clients").
func logHerdTable(t *testing.T, sc herdScenario, cfg herdConfig, results []herdRowResult) {
	length := "until the first " + sc.cause + " (grace: the second) is refilled"
	if !cfg.short {
		length = cfg.run.String() + " per row"
	}
	how := fmt.Sprintf("the key expires (exptime %d s)", herdTTL)
	if sc.deleteEvery > 0 {
		how = fmt.Sprintf("a writer deletes the key every %v", sc.deleteEvery)
	}
	t.Logf("%s: %d plain get/set clients, one key, %s; refill %v, think %v, lease window %v; %s; latencies in ms",
		sc.name, herdClients, how, herdRefill, herdThink, herdLeaseWindow, length)
	t.Logf("| %-28s | %5s | %7s | %-13s | %7s | %-17s | %-24s | %-19s | %-17s | %s |", "server", sc.cause[:3]+"s",
		"refills", "per "+sc.cause, "reads", "hit p50/p99/max", "grace hit n p50/p99/max", "refill p50/p99/max",
		"all p50/p99/max", "server counters")
	for _, r := range results {
		most := 0
		for _, c := range r.causes {
			most = max(most, c.refills)
		}
		n := r.completed()
		if sc.deleteEvery > 0 {
			n = r.deletes
		}
		stale := r.latencies(readStale)
		t.Logf("| %-28s | %5d | %7d | %5.1f max %3d | %7d | %-17s | %-24s | %-19s | %-17s | %s |", r.row.name, n,
			len(r.refills), r.perCause(sc), most, len(r.reads), spread(r.latencies(readHit)),
			strconv.Itoa(len(stale))+" "+spread(stale), spread(r.latencies(readRefill)),
			spread(r.latencies(readHit, readStale, readRefill, readWaited, readCrashed)), herdCounters(r))
		if r.row.crash {
			logHerdCrash(t, r, r.row.leaseWindow())
		}
	}
	t.Logf("hit: a fresh value; grace hit: the expired value, to a read sent after another reader's miss in " +
		"the same expiry; refill: a miss, the 100 ms query and the set; all: every read")
}

// herdCounters renders the server's own counters of the row's mode.
func herdCounters(r herdRowResult) string {
	var names []string
	if slices.Contains(r.row.args, "--grace") {
		names = append(names, "get_grace_hits", "grace_refills", "grace_lease_lapses")
	}
	if r.row.hold {
		names = append(names, "hold_parked", "hold_filled", "hold_timeouts", "hold_cancelled", "hold_refused")
	}
	if len(names) == 0 {
		return "-"
	}
	var out []string
	for _, n := range names {
		out = append(out, n+" "+r.stats[n])
	}
	return strings.Join(out, ", ")
}

// logHerdCrash logs how long each crashed refiller kept the key without a refill.
func logHerdCrash(t *testing.T, r herdRowResult, window time.Duration) {
	var gaps []time.Duration
	more := 0 // misses after the first refiller that followed a crash
	for _, c := range r.causes {
		if c.crashes > 0 && c.refills > 0 {
			gaps = append(gaps, c.lapseSent.Sub(c.crashRecv))
			more += c.refills - 1
		}
	}
	slices.Sort(gaps)
	t.Logf("|   %d crashed refillers: the next refill's get was sent %s ms after the crash (p50/p99/max), with "+
		"the lease window %v; %d more misses in those expiries |", len(gaps), spread(gaps), window, more)
}

// loadAverage is /proc/loadavg's first three fields, or why not.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return err.Error()
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return strings.TrimSpace(string(b))
	}
	return strings.Join(f[:3], " ")
}

// herdLedger orders, under herdDB.mu, what the plain clients and the deleter saw, so that every refill
// is attributed to the expiry or delete that caused it by causality, not by timing. Stores count in the
// order their STORED replies arrive: a get sent after the e-th of them was processed after that store, so
// a miss it gets means the key expired or was deleted since; its cause is epoch e. Once the first refill
// of a herd is confirmed stored the key is live again, so every miss of one expiry or delete has a get
// sent before that, in the same epoch: the epochs with misses are the expiries and deletes.
type herdLedger struct {
	crash     bool  // herdPlan.crash
	events    int64 // numbers every event below, in the order they happened
	epoch     int   // stores confirmed so far
	storedAt  map[int]int64
	causes    map[int]*herdCause // by epoch
	completed int                // causes with a refill confirmed stored
	deletes   []int64            // when each delete was sent
	deleted   int                // deletes answered
	// afterDelete counts hits on a value stored before a delete that was answered before the get was sent.
	afterDelete int
}

// herdCause is one expiry or delete and the misses it caused.
type herdCause struct {
	refills, crashes int
	setSent          int64 // when its first refill's set was sent (0: not yet)
	stale            int   // grace hits: its old value, to a get sent after one of its misses had come back
	early            int   // those answered before setSent
	// The crashed refiller's get, and the get of the first refiller after it.
	crashSent, crashRecv, lapseSent, lapseRecv time.Time
	done                                       bool // a refill of it was confirmed stored
}

// herdSnap is the ledger as a get was sent.
type herdSnap struct {
	at      int64 // the ledger's events until then
	epoch   int
	deleted int
	missed  bool // the epoch already had a miss
	sent    time.Time
}

func (db *herdDB) beforeGet() herdSnap {
	db.mu.Lock()
	defer db.mu.Unlock()
	l := &db.ledger
	return herdSnap{at: l.events, epoch: l.epoch, deleted: l.deleted, missed: l.causes[l.epoch] != nil, sent: time.Now()}
}

// hit classifies a hit: a grace hit (readStale) is a value stored before the get was sent, to a get sent
// after a miss of the same epoch came back, so after the key had gone.
func (db *herdDB) hit(s herdSnap, val []byte) (readKind, error) {
	v, err := herdVersion(val)
	if err != nil {
		return 0, err
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	l := &db.ledger
	l.events++
	at, known := l.storedAt[v]
	if known && s.deleted > 0 && at < l.deletes[s.deleted-1] {
		l.afterDelete++
	}
	if !known || !s.missed || at > s.at {
		return readHit, nil
	}
	c := l.causes[s.epoch]
	c.stale++
	if c.setSent == 0 {
		c.early++
	}
	return readStale, nil
}

// miss records a miss; crash reports whether its reader is to crash instead of refilling (herdPlan.crash:
// the first miss of each cause).
func (db *herdDB) miss(s herdSnap) (crash bool) {
	db.mu.Lock()
	defer db.mu.Unlock()
	l := &db.ledger
	l.events++
	if l.causes == nil {
		l.causes = make(map[int]*herdCause)
	}
	c := l.causes[s.epoch]
	if c == nil {
		c = &herdCause{}
		l.causes[s.epoch] = c
	}
	if l.crash && c.refills == 0 && c.crashes == 0 {
		c.crashes++
		c.crashSent, c.crashRecv = s.sent, time.Now()
		return true
	}
	c.refills++
	if c.crashes > 0 && c.lapseSent.IsZero() {
		c.lapseSent, c.lapseRecv = s.sent, time.Now()
	}
	return false
}

// setSent records that a refill of the cause of s is about to send its set.
func (db *herdDB) setSent(s herdSnap) {
	db.mu.Lock()
	defer db.mu.Unlock()
	l := &db.ledger
	l.events++
	if c := l.causes[s.epoch]; c != nil && c.setSent == 0 {
		c.setSent = l.events
	}
}

// stored records a STORED reply for val.
func (db *herdDB) stored(val []byte) error {
	v, err := herdVersion(val)
	if err != nil {
		return err
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	l := &db.ledger
	l.events++
	if l.storedAt == nil {
		l.storedAt = make(map[int]int64)
	}
	l.storedAt[v] = l.events
	if c := l.causes[l.epoch]; c != nil && c.refills > 0 && !c.done {
		c.done = true
		l.completed++
	}
	l.epoch++
	return nil
}

func (db *herdDB) deleteSent() {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.ledger.events++
	db.ledger.deletes = append(db.ledger.deletes, db.ledger.events)
}

func (db *herdDB) deleteAnswered() {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.ledger.deleted++
}

// refilling reports whether the key has gone and no refill has stored it yet.
func (db *herdDB) refilling() bool {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.ledger.causes[db.ledger.epoch] != nil
}

// finished reports whether n > 0 causes have been refilled.
func (db *herdDB) finished(n int) bool {
	db.mu.Lock()
	defer db.mu.Unlock()
	return n > 0 && db.ledger.completed >= n
}

// results returns the causes in order, the deletes sent and the reads after a delete that got a value
// stored before it.
func (l *herdLedger) results() (causes []herdCause, deletes, afterDelete int) {
	epochs := make([]int, 0, len(l.causes))
	for e := range l.causes {
		epochs = append(epochs, e)
	}
	slices.Sort(epochs)
	for _, e := range epochs {
		causes = append(causes, *l.causes[e])
	}
	return causes, len(l.deletes), l.afterDelete
}
