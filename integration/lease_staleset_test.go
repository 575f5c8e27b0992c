package integration

import (
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Stale-set safety (leases.md, "Why"): readers fill the cache from a versioned "database" while writers
// bump the database and then delete the key. The invariant the checker asserts:
//
//	once the delete that followed a database bump to version V has completed, the cache never again
//	holds a version older than V.
//
// Every write to the database bumps the version and then deletes; when the delete's reply arrives the
// writer raises the key's floor to V. A reader snapshots the floor BEFORE sending each request, so any
// delete counted in the snapshot was processed by the server before that request. Then:
//
//   - a hit read after such a delete must carry a version >= the snapshot (the delete removed anything
//     older, and a value stored after it came from a fill whose lease was granted after it, which read
//     the database after the bump);
//   - a fill STORED by a set sent after such a delete must carry a version >= the snapshot taken just
//     before sending it (with leases: had the fill read the database before the delete, the delete would
//     have invalidated its lease).
//
// The same scenario runs with plain get/set (no leases, hence no invalidation): there the checker must
// find violations, which proves it can see the bug leases prevent.

// Bounds of the stale-set scenario, per mode.
const (
	ssReaders = 12
	ssWriters = 3
	ssKeys    = 2
	// ssReaderRounds bounds each reader by count; ssDuration bounds the whole run by time.
	ssReaderRounds = 5000
	ssWriterRounds = 5000
	ssDuration     = 2 * time.Second
	// ssMaxFillDelay is the longest a reader takes between reading the database and setting the cache:
	// the window in which a writer's delete makes the fill stale.
	ssMaxFillDelay = 1500 * time.Microsecond
	// ssMaxWriterPause is the longest pause between two writes of one writer.
	ssMaxWriterPause = 2 * time.Millisecond
	// ssHotMissPause is how long a reader backs off after a hot miss.
	ssHotMissPause = 200 * time.Microsecond
	// ssMaxViolationReports bounds how many violations are described in the failure message.
	ssMaxViolationReports = 5
)

// ssKey is one key and its source of truth.
type ssKey struct {
	name  string
	db    atomic.Int64 // the database's current version
	floor atomic.Int64 // highest version whose following delete has completed
}

// raiseFloor makes floor at least v.
func (k *ssKey) raiseFloor(v int64) {
	for {
		cur := k.floor.Load()
		if v <= cur || k.floor.CompareAndSwap(cur, v) {
			return
		}
	}
}

// ssTally counts what happened in one run.
type ssTally struct {
	rounds, hits, hotMisses, fills, stored, refused, deletes atomic.Int64
	// racy counts fills that read the database before a delete that completed before their set was
	// sent: the stale-set race, provoked. With leases each must be refused.
	racy       atomic.Int64
	violations atomic.Int64

	mu      sync.Mutex
	reports []string
	errs    []error
}

func (t *ssTally) violation(format string, args ...any) {
	t.violations.Add(1)
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.reports) < ssMaxViolationReports {
		t.reports = append(t.reports, fmt.Sprintf(format, args...))
	}
}

func (t *ssTally) fail(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.errs = append(t.errs, err)
}

// ssValue encodes a version as a cache value; ssVersion decodes it.
func ssValue(v int64) []byte { return []byte("v" + strconv.FormatInt(v, 10)) }

func ssVersion(b []byte) (int64, error) {
	s, ok := strings.CutPrefix(string(b), "v")
	if !ok {
		return 0, fmt.Errorf("value %q is not a version", b)
	}
	return strconv.ParseInt(s, 10, 64)
}

// TestLeaseStaleSetSafety runs the scenario with leases (no violation allowed, and the race must have
// been provoked) and with plain get/set as the control (violations required).
func TestLeaseStaleSetSafety(t *testing.T) {
	requireLeases(t)
	d := startLeasecached(t, "--lease-window", "2s", "--stale-window", "2s")
	results := make(map[bool]*ssTally)
	for _, leases := range []bool{true, false} {
		tally := runStaleSetScenario(t, d, leases)
		results[leases] = tally
		if len(tally.errs) > 0 {
			t.Fatalf("leases=%v: client errors (first of %d): %v", leases, len(tally.errs), tally.errs[0])
		}
	}
	t.Logf("stale-set scenario, %d readers, %d writers, %d keys, <= %v per mode:", ssReaders, ssWriters, ssKeys, ssDuration)
	t.Logf("%-16s %7s %7s %6s %6s %7s %7s %6s %6s %10s", "mode", "rounds", "hits", "hot", "fills", "stored", "refused",
		"dels", "racy", "violations")
	for _, leases := range []bool{true, false} {
		r := results[leases]
		name := "lease-get/set"
		if !leases {
			name = "get/set control"
		}
		t.Logf("%-16s %7d %7d %6d %6d %7d %7d %6d %6d %10d", name, r.rounds.Load(), r.hits.Load(), r.hotMisses.Load(),
			r.fills.Load(), r.stored.Load(), r.refused.Load(), r.deletes.Load(), r.racy.Load(), r.violations.Load())
	}

	withLeases, control := results[true], results[false]
	if n := withLeases.violations.Load(); n > 0 {
		t.Errorf("with leases the cache held %d stale versions; first: %s", n, strings.Join(withLeases.reports, "; "))
	}
	if withLeases.racy.Load() == 0 {
		t.Errorf("with leases no fill raced a delete: the scenario did not exercise the stale-set race")
	}
	if withLeases.stored.Load() == 0 || withLeases.hits.Load() == 0 {
		t.Errorf("with leases no fill was stored or no hit was read: the scenario is degenerate")
	}
	if control.violations.Load() == 0 {
		t.Errorf("the get/set control showed no stale set in %d racy fills: the checker cannot see the bug", control.racy.Load())
	} else {
		t.Logf("control (expected) violation, e.g.: %s", control.reports[0])
	}
}

func runStaleSetScenario(t *testing.T, d *daemon, leases bool) *ssTally {
	t.Helper()
	mode := "plain"
	if leases {
		mode = "lease"
	}
	keys := make([]*ssKey, ssKeys)
	for i := range keys {
		keys[i] = &ssKey{name: fmt.Sprintf("staleset-%s-%d", mode, i)}
	}
	tally := &ssTally{}
	deadline := time.Now().Add(ssDuration)
	var wg sync.WaitGroup
	for id := 0; id < ssReaders+ssWriters; id++ {
		c, err := dialLease(d)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			rng := rand.New(rand.NewSource(int64(id) + 1))
			var err error
			if id < ssReaders {
				err = ssReader(c, rng, keys, leases, deadline, tally)
			} else {
				err = ssWriter(c, rng, keys, deadline, tally)
			}
			if err != nil {
				tally.fail(fmt.Errorf("client %d: %w", id, err))
			}
		}()
	}
	wg.Wait()
	// What the cache holds at the end must respect the last deletes too: a stale set that landed and
	// was never deleted again would otherwise stay forever.
	c := mustDialLease(t, d)
	for _, k := range keys {
		val, _, ok, err := c.get(k.name)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			continue
		}
		v, err := ssVersion(val)
		if err != nil {
			t.Fatal(err)
		}
		if floor := k.floor.Load(); v < floor {
			tally.violation("at the end %s holds v%d, older than the deleted v%d", k.name, v, floor)
		}
	}
	return tally
}

// ssReader reads through the cache: a hit is checked against the floor; a miss reads the database,
// pauses (a slow query) and fills.
func ssReader(c *leaseConn, rng *rand.Rand, keys []*ssKey, leases bool, deadline time.Time, tally *ssTally) error {
	for r := 0; r < ssReaderRounds && time.Now().Before(deadline); r++ {
		tally.rounds.Add(1)
		k := keys[rng.Intn(len(keys))]
		floor := k.floor.Load()
		var token uint64
		if leases {
			blk, err := c.leaseGet1(k.name)
			if err != nil {
				return err
			}
			if !blk.hit && blk.token == hotMissToken {
				// Someone else fills; the stale value it may carry is older by design, not a hit.
				tally.hotMisses.Add(1)
				time.Sleep(ssHotMissPause)
				continue
			}
			if blk.hit {
				if err := ssCheckHit(k, blk.data, floor, tally); err != nil {
					return err
				}
				continue
			}
			if err := checkGrantToken(blk.token); err != nil {
				return err
			}
			token = blk.token
		} else {
			val, _, ok, err := c.get(k.name)
			if err != nil {
				return err
			}
			if ok {
				if err := ssCheckHit(k, val, floor, tally); err != nil {
					return err
				}
				continue
			}
		}
		tally.fills.Add(1)
		v := k.db.Load()
		time.Sleep(time.Duration(rng.Int63n(int64(ssMaxFillDelay))))
		floorAtSet := k.floor.Load()
		var reply string
		var err error
		if leases {
			reply, err = c.leaseSet(k.name, token, 0, 0, ssValue(v))
		} else {
			reply, err = c.set(k.name, 0, 0, ssValue(v))
		}
		if err != nil {
			return err
		}
		if v < floorAtSet {
			tally.racy.Add(1)
		}
		switch reply {
		case "STORED":
			tally.stored.Add(1)
			if v < floorAtSet {
				tally.violation("%s: fill of v%d STORED by a set sent after the delete of v%d completed", k.name, v, floorAtSet)
			}
		case "NOT_STORED":
			tally.refused.Add(1)
		default:
			return fmt.Errorf("fill %s: unexpected reply %q", k.name, reply)
		}
	}
	return nil
}

func ssCheckHit(k *ssKey, val []byte, floor int64, tally *ssTally) error {
	tally.hits.Add(1)
	v, err := ssVersion(val)
	if err != nil {
		return err
	}
	if v < floor {
		tally.violation("%s: hit of v%d read after the delete of v%d completed", k.name, v, floor)
	}
	return nil
}

// ssWriter updates the database, then deletes the key (the cache-aside write path).
func ssWriter(c *leaseConn, rng *rand.Rand, keys []*ssKey, deadline time.Time, tally *ssTally) error {
	for r := 0; r < ssWriterRounds && time.Now().Before(deadline); r++ {
		k := keys[rng.Intn(len(keys))]
		v := k.db.Add(1)
		reply, err := c.call("delete " + k.name + "\r\n")
		if err != nil {
			return err
		}
		if reply != "DELETED" && reply != "NOT_FOUND" {
			return fmt.Errorf("delete %s: unexpected reply %q", k.name, reply)
		}
		k.raiseFloor(v)
		tally.deletes.Add(1)
		time.Sleep(time.Duration(rng.Int63n(int64(ssMaxWriterPause))))
	}
	return nil
}
