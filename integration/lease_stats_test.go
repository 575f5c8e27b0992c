package integration

import (
	"fmt"
	"strconv"
	"testing"
)

// leaseStatNames are the lease counters of leases.md rule 6, plus the two gauges leasecached adds.
var leaseStatNames = []string{
	"lease_grants", "lease_hot_misses", "lease_stale_served", "lease_sets_stored", "lease_sets_rejected",
	"lease_invalidations", "lease_outstanding", "lease_stale_items",
}

// TestLeaseStats drives one fresh server through every lease event and checks all lease stats after each
// step, so a counter that moves on the wrong event (or not at all) is caught at the step that moved it.
func TestLeaseStats(t *testing.T) {
	requireLeases(t)
	d := startLeasecached(t, leaseDaemonArgs()...)
	a, b := mustDialLease(t, d), mustDialLease(t, d)
	var tokA, tokB uint64

	grant := func(c *leaseConn, key string, tok *uint64, staleLen int) func() error {
		return func() error {
			blk, err := c.leaseGet1(key)
			if err != nil {
				return err
			}
			if blk.hit || checkGrantToken(blk.token) != nil || len(blk.data) != staleLen {
				return fmt.Errorf("lease-get %s: %+v, want a grant with %d stale bytes", key, blk, staleLen)
			}
			*tok = blk.token
			return nil
		}
	}
	expect := func(c *leaseConn, cmd, want string) func() error {
		return func() error {
			got, err := c.call(cmd)
			if err == nil && got != want {
				err = fmt.Errorf("%q: got %q, want %q", cmd, got, want)
			}
			return err
		}
	}
	leaseSet := func(c *leaseConn, key string, tok *uint64, want string) func() error {
		return func() error {
			got, err := c.leaseSet(key, *tok, 0, 0, []byte("v"))
			if err == nil && got != want {
				err = fmt.Errorf("lease-set %s %d: got %q, want %q", key, *tok, got, want)
			}
			return err
		}
	}
	hot := func(c *leaseConn, key string, staleLen int) func() error {
		return func() error {
			blk, err := c.leaseGet1(key)
			if err == nil && (blk.hit || blk.token != hotMissToken || len(blk.data) != staleLen) {
				err = fmt.Errorf("lease-get %s: %+v, want a hot miss with %d stale bytes", key, blk, staleLen)
			}
			return err
		}
	}
	hit := func(c *leaseConn, key string) func() error {
		return func() error {
			blk, err := c.leaseGet1(key)
			if err == nil && !blk.hit {
				err = fmt.Errorf("lease-get %s: %+v, want a hit", key, blk)
			}
			return err
		}
	}

	// want: grants, hot misses, stale served, sets stored, sets rejected, invalidations, outstanding, stale items.
	steps := []struct {
		name string
		do   func() error
		want [8]int
	}{
		{"fresh server", func() error { return nil }, [8]int{}},
		{"grant", grant(a, "s1", &tokA, 0), [8]int{1, 0, 0, 0, 0, 0, 1, 0}},
		{"hot miss", hot(b, "s1", 0), [8]int{1, 1, 0, 0, 0, 0, 1, 0}},
		{"lease-set stored", leaseSet(a, "s1", &tokA, "STORED"), [8]int{1, 1, 0, 1, 0, 0, 0, 0}},
		{"hit counts nothing", hit(b, "s1"), [8]int{1, 1, 0, 1, 0, 0, 0, 0}},
		{"consumed token rejected", leaseSet(b, "s1", &tokA, "NOT_STORED"), [8]int{1, 1, 0, 1, 1, 0, 0, 0}},
		{"delete keeps a stale value", expect(a, "delete s1\r\n", "DELETED"), [8]int{1, 1, 0, 1, 1, 0, 0, 1}},
		{"grant with stale", grant(a, "s1", &tokA, 1), [8]int{2, 1, 1, 1, 1, 0, 1, 1}},
		{"hot miss with stale", hot(b, "s1", 1), [8]int{2, 2, 2, 1, 1, 0, 1, 1}},
		{"delete of the missing key invalidates", expect(b, "delete s1\r\n", "NOT_FOUND"), [8]int{2, 2, 2, 1, 1, 1, 0, 1}},
		{"invalidated token rejected", leaseSet(a, "s1", &tokA, "NOT_STORED"), [8]int{2, 2, 2, 1, 2, 1, 0, 1}},
		{"regrant with stale", grant(b, "s1", &tokB, 1), [8]int{3, 2, 3, 1, 2, 1, 1, 1}},
		{"set invalidates and drops the stale value", expect(a, "set s1 0 0 1\r\nw\r\n", "STORED"),
			[8]int{3, 2, 3, 1, 2, 2, 0, 0}},
		{"second key grant", grant(a, "s2", &tokA, 0), [8]int{4, 2, 3, 1, 2, 2, 1, 0}},
		{"flush_all invalidates", expect(b, "flush_all\r\n", "OK"), [8]int{4, 2, 3, 1, 2, 3, 0, 0}},
		{"flushed token rejected", leaseSet(a, "s2", &tokA, "NOT_STORED"), [8]int{4, 2, 3, 1, 3, 3, 0, 0}},
	}
	for i, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("step %d %s: %v", i, st.name, err)
		}
		got, err := a.stats()
		if err != nil {
			t.Fatalf("step %d %s: %v", i, st.name, err)
		}
		for j, name := range leaseStatNames {
			v, ok := got[name]
			if !ok {
				t.Errorf("step %d %s: no STAT %s", i, st.name, name)
				continue
			}
			if n, err := strconv.Atoi(v); err != nil || n != st.want[j] {
				t.Errorf("step %d %s: STAT %s %s, want %d", i, st.name, name, v, st.want[j])
			}
		}
	}
}
