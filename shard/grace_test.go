package shard

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The rules of grace (doc/leases.md, "Grace and hold"), one scenario each, with a 3 s lease window and
// 20 s of grace. Every scenario starts from k stored with a 2 s TTL and the clock 3 s later: k expired.
func TestGraceRules(t *testing.T) {
	expired := []leaseStep{{op: "set", key: "k", val: "v1", secs: 2, want: "STORED"}, {op: "advance", secs: 3}}
	cases := []struct {
		name                  string
		steps                 []leaseStep
		hits, refills, lapses uint64
	}{
		{"the first reader refills, every other gets the grace copy", []leaseStep{
			{op: "get", key: "k", want: "miss"},
			{op: "get", key: "k", want: "v1"},
			{op: "get", key: "k", want: "v1"},
			{op: "gat", key: "k", secs: 100, want: "v1"},
			{op: "set", key: "k", val: "v2", want: "STORED"},
			{op: "get", key: "k", want: "v2"},
		}, 3, 1, 0},
		{"a lapsed refill goes to the next reader", []leaseStep{
			{op: "get", key: "k", want: "miss"},
			{op: "advance", secs: 3},
			{op: "get", key: "k", want: "miss"},
			{op: "get", key: "k", want: "v1"},
			{op: "advance", secs: 3},
			{op: "get", key: "k", want: "miss"},
		}, 1, 3, 2},
		{"the grace copy is gone after the grace; its refill that never landed is a lapse", []leaseStep{
			{op: "get", key: "k", want: "miss"},
			{op: "advance", secs: 19}, // expired at +2, in grace until +22, now +22
			{op: "get", key: "k", want: "miss"},
			{op: "get", key: "k", want: "miss"},
		}, 0, 1, 1},
		{"a delete ends the grace; lease-get keeps the stale value", []leaseStep{
			{op: "get", key: "k", want: "miss"},
			{op: "delete", key: "k", want: "NOT_FOUND"},
			{op: "get", key: "k", want: "miss"},
			{op: "get", key: "k", want: "miss"},
			{op: "lget", key: "k", want: "grant:v1"}, // the delete cancelled the refill lease
		}, 0, 1, 0},
		{"add stores on a key in grace", []leaseStep{
			{op: "get", key: "k", want: "miss"},
			{op: "add", key: "k", val: "v2", want: "STORED"},
			{op: "get", key: "k", want: "v2"},
		}, 0, 1, 0},
		{"cas, replace, incr and touch see the key absent; the writes end the refill lease", []leaseStep{
			{op: "get", key: "k", want: "miss"},
			{op: "cas", key: "k", val: "x", want: "NOT_FOUND"}, // with the CAS unique of the grace copy it read
			{op: "replace", key: "k", val: "x", want: "NOT_STORED"},
			{op: "incr", key: "k", want: "NOT_FOUND"},
			{op: "touch", key: "k", secs: 100, want: "NOT_FOUND"},
			{op: "get", key: "k", want: "miss"}, // a new refill: a write cancelled the lease (rule 3)
			{op: "get", key: "k", want: "v1"},
		}, 2, 2, 0},
		{"gat never revives a grace copy", []leaseStep{
			{op: "get", key: "k", want: "miss"},
			{op: "gat", key: "k", secs: 1000, want: "v1"},
			{op: "advance", secs: 19},
			{op: "gat", key: "k", secs: 1000, want: "miss"},
			{op: "get", key: "k", want: "miss"},
		}, 1, 1, 1},
		{"flush_all drops grace copies and leases", []leaseStep{
			{op: "get", key: "k", want: "miss"},
			{op: "flush"},
			{op: "advance", secs: 1},
			{op: "get", key: "k", want: "miss"},
			{op: "get", key: "k", want: "miss"},
			{op: "lget", key: "k", want: "grant"},
		}, 0, 1, 0},
		{"lease-get and grace share the key's one lease", []leaseStep{
			{op: "lget", key: "k", want: "grant:v1"},
			{op: "get", key: "k", want: "v1"},
			{op: "lset", key: "k", token: 0, val: "v2", want: "STORED"},
			{op: "get", key: "k", want: "v2"},
		}, 1, 0, 0},
		{"a grace refill makes lease-get a hot miss", []leaseStep{
			{op: "get", key: "k", want: "miss"},
			{op: "lget", key: "k", want: "hot:v1"},
			{op: "advance", secs: 3},
			{op: "lget", key: "k", want: "grant:v1"},
			{op: "get", key: "k", want: "v1"},
		}, 1, 1, 1},
		{"a delete of a live item leaves no grace copy", []leaseStep{
			{op: "set", key: "k", val: "v2", secs: 100, want: "STORED"},
			{op: "delete", key: "k", want: "DELETED"},
			{op: "get", key: "k", want: "miss"},
			{op: "get", key: "k", want: "miss"},
		}, 0, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, c := newStore(t, Config{LeaseWindow: 3 * time.Second, Grace: 20 * time.Second})
			runLeaseSteps(t, s, c, append(append([]leaseStep{}, expired...), tc.steps...))
			l := s.Stats().Leases
			assert.Equal(t, tc.hits, l.GraceHits, "get_grace_hits")
			assert.Equal(t, tc.refills, l.GraceRefills, "grace_refills")
			assert.Equal(t, tc.lapses, l.GraceLapses, "grace_lease_lapses")
		})
	}
}

// Without --grace an expired key is a miss for every reader, as in memcached; with a grace longer than the
// stale window (here none), the expired value is still kept for the grace.
func TestGraceWindows(t *testing.T) {
	steps := []leaseStep{
		{op: "set", key: "k", val: "v1", secs: 2, want: "STORED"},
		{op: "advance", secs: 3},
		{op: "get", key: "k", want: "miss"},
		{op: "get", key: "k"},
	}
	s, c := newStore(t, Config{})
	steps[3].want = "miss"
	runLeaseSteps(t, s, c, steps)
	assert.Zero(t, s.Stats().Leases.GraceRefills)

	s, c = newStore(t, Config{StaleWindow: -1, Grace: 5 * time.Second})
	steps[3].want = "v1"
	runLeaseSteps(t, s, c, steps)
}
