package shard

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/leasecached/leasecached/lease"
)

// leaseStep is one operation of a lease scenario; want is checked against what the operation returned.
type leaseStep struct {
	op    string // lget, lset, set, add, replace, append, prepend, cas, incr, touch, delete, flush, advance, get, gat
	key   string
	val   string
	token int // lset: index into the tokens granted so far; -1: a token never issued
	secs  int64
	want  string // lget: "hit:<v>", "grant", "grant:<stale>", "hot", "hot:<stale>"; others: Result or value
}

// missRead is AppendMiss for a read that may not park: the value it answers with, if any.
func missRead(s *Store, key string) ([]byte, bool) {
	noHeader := func(dst, _ []byte, _ uint32, _ int, _ uint64, _ bool) []byte { return dst }
	v, out := s.AppendMiss(nil, []byte(key), HashOf([]byte(key)), false, noHeader, nil)
	if out != MissHit && out != MissGrace {
		return nil, false
	}
	return v[:len(v)-len(blockTrailer)], true
}

func runLeaseSteps(t *testing.T, s *Store, c *clock, steps []leaseStep) {
	t.Helper()
	var tokens []uint64
	for i, st := range steps {
		got := ""
		switch st.op {
		case "lget":
			v, r := s.LeaseGet(nil, []byte(st.key))
			switch r.Kind {
			case LeaseHit:
				got = "hit:" + string(v)
			case LeaseGranted:
				got = "grant"
				tokens = append(tokens, r.Token)
				if r.Token < 2 {
					t.Fatalf("step %d: granted token %d", i, r.Token)
				}
			case LeaseHotMiss:
				got = "hot"
				if r.Token != 1 {
					t.Fatalf("step %d: hot miss token %d", i, r.Token)
				}
			}
			if r.Kind != LeaseHit && r.Stale {
				got += ":" + string(v)
			} else if r.Kind != LeaseHit && len(v) != 0 {
				t.Fatalf("step %d: value %q appended without Stale", i, v)
			}
		case "lset":
			tok := uint64(99999999)
			if st.token >= 0 {
				tok = tokens[st.token]
			}
			got = s.LeaseSet([]byte(st.key), tok, 0, 0, []byte(st.val)).String()
		case "set", "add", "replace", "append", "prepend":
			mode := map[string]Mode{"set": ModeSet, "add": ModeAdd, "replace": ModeReplace, "append": ModeAppend, "prepend": ModePrepend}[st.op]
			got = s.Store(mode, []byte(st.key), 0, st.secs, []byte(st.val), 0).String()
		case "cas":
			_, info, ok := s.Get(nil, []byte(st.key))
			if !ok { // a grace copy's CAS unique, as gets would show it
				casOf := func(dst, _ []byte, _ uint32, _ int, cas uint64, _ bool) []byte { info.Cas = cas; return dst }
				s.AppendMiss(nil, []byte(st.key), HashOf([]byte(st.key)), true, casOf, nil)
			}
			got = s.Store(ModeCas, []byte(st.key), 0, 0, []byte(st.val), info.Cas).String()
		case "incr":
			_, r := s.Arith([]byte(st.key), true, 1)
			got = r.String()
		case "touch":
			got = s.Touch([]byte(st.key), st.secs).String()
		case "delete":
			got = s.Delete([]byte(st.key)).String()
		case "flush":
			s.FlushAll(0)
		case "advance":
			c.advance(st.secs)
		case "get", "gat":
			get := func(dst, key []byte) ([]byte, Info, bool) { return s.Get(dst, key) }
			if st.op == "gat" {
				get = func(dst, key []byte) ([]byte, Info, bool) { return s.GetAndTouch(dst, key, st.secs) }
			}
			v, _, ok := get(nil, []byte(st.key))
			if !ok { // as the server does with grace or hold on
				v, ok = missRead(s, st.key)
			}
			got = "miss"
			if ok {
				got = string(v)
			}
		default:
			t.Fatalf("step %d: unknown op %q", i, st.op)
		}
		if st.want != "" && got != st.want {
			t.Fatalf("step %d %s %s: got %q, want %q", i, st.op, st.key, got, st.want)
		}
	}
}

func TestLeaseContract(t *testing.T) {
	cases := []struct {
		name  string
		steps []leaseStep
	}{
		{"hit is a plain value", []leaseStep{
			{op: "set", key: "k", val: "v", want: "STORED"},
			{op: "lget", key: "k", want: "hit:v"},
		}},
		{"miss grants once per window, others hot-miss", []leaseStep{
			{op: "lget", key: "k", want: "grant"},
			{op: "lget", key: "k", want: "hot"},
			{op: "advance", secs: 9},
			{op: "lget", key: "k", want: "hot"},
			{op: "advance", secs: 1},
			{op: "lget", key: "k", want: "grant"},
			{op: "lset", key: "k", token: 0, val: "old", want: "NOT_STORED"},
			{op: "lset", key: "k", token: 1, val: "new", want: "STORED"},
			{op: "get", key: "k", want: "new"},
		}},
		{"a token stores once", []leaseStep{
			{op: "lget", key: "k", want: "grant"},
			{op: "lset", key: "k", token: 0, val: "a", want: "STORED"},
			{op: "lset", key: "k", token: 0, val: "b", want: "NOT_STORED"},
			{op: "get", key: "k", want: "a"},
		}},
		{"never-issued token refused, cache untouched", []leaseStep{
			{op: "set", key: "k", val: "v"},
			{op: "lset", key: "k", token: -1, val: "x", want: "NOT_STORED"},
			{op: "get", key: "k", want: "v"},
		}},
		{"delete invalidates: the stale set is refused", []leaseStep{
			{op: "lget", key: "k", want: "grant"},
			{op: "delete", key: "k", want: "NOT_FOUND"},
			{op: "lset", key: "k", token: 0, val: "old", want: "NOT_STORED"},
			{op: "get", key: "k", want: "miss"},
		}},
		{"set invalidates", []leaseStep{
			{op: "lget", key: "k", want: "grant"},
			{op: "set", key: "k", val: "fresh", want: "STORED"},
			{op: "lset", key: "k", token: 0, val: "old", want: "NOT_STORED"},
			{op: "get", key: "k", want: "fresh"},
		}},
		{"add invalidates", []leaseStep{
			{op: "lget", key: "k", want: "grant"},
			{op: "add", key: "k", val: "fresh", want: "STORED"},
			{op: "lset", key: "k", token: 0, val: "old", want: "NOT_STORED"},
		}},
		{"replace, append, prepend, cas, incr invalidate", []leaseStep{
			{op: "lget", key: "k", want: "grant"},
			{op: "set", key: "k", val: "1"},
			{op: "delete", key: "k"}, // back to a miss with a stale value
			{op: "lget", key: "k", want: "grant:1"},
			{op: "add", key: "k", val: "5"},
			{op: "replace", key: "k", val: "6", want: "STORED"},
			{op: "lset", key: "k", token: 1, val: "x", want: "NOT_STORED"},
		}},
		{"flush invalidates every lease and drops stale values", []leaseStep{
			{op: "set", key: "a", val: "1"},
			{op: "delete", key: "a"},
			{op: "lget", key: "a", want: "grant:1"},
			{op: "lget", key: "b", want: "grant"},
			{op: "flush"},
			{op: "lset", key: "a", token: 0, val: "x", want: "NOT_STORED"},
			{op: "lset", key: "b", token: 1, val: "x", want: "NOT_STORED"},
			{op: "lget", key: "a", want: "grant"},
		}},
		{"touch does not invalidate", []leaseStep{
			{op: "lget", key: "k", want: "grant"},
			{op: "touch", key: "k", secs: 100, want: "NOT_FOUND"},
			{op: "lset", key: "k", token: 0, val: "v", want: "STORED"},
		}},
		{"deleted value is served stale to lease-get only", []leaseStep{
			{op: "set", key: "k", val: "old"},
			{op: "delete", key: "k", want: "DELETED"},
			{op: "get", key: "k", want: "miss"},
			{op: "lget", key: "k", want: "grant:old"},
			{op: "lget", key: "k", want: "hot:old"},
			{op: "touch", key: "k", secs: 10, want: "NOT_FOUND"},
			{op: "incr", key: "k", want: "NOT_FOUND"},
			{op: "append", key: "k", val: "x", want: "NOT_STORED"},
			{op: "replace", key: "k", val: "x", want: "NOT_STORED"},
		}},
		{"expired value is served stale for the stale window", []leaseStep{
			{op: "set", key: "k", val: "old", secs: 5},
			{op: "advance", secs: 6},
			{op: "get", key: "k", want: "miss"},
			{op: "lget", key: "k", want: "grant:old"},
			{op: "advance", secs: 10},
			{op: "lget", key: "k", want: "grant"}, // lease lapsed, stale window (5+10) over
		}},
		{"stale window ends", []leaseStep{
			{op: "set", key: "k", val: "old"},
			{op: "delete", key: "k"},
			{op: "advance", secs: 10},
			{op: "lget", key: "k", want: "grant"},
		}},
		{"a store discards the stale value", []leaseStep{
			{op: "set", key: "k", val: "old"},
			{op: "delete", key: "k"},
			{op: "add", key: "k", val: "new", want: "STORED"},
			{op: "delete", key: "k"},
			{op: "lget", key: "k", want: "grant:new"},
			{op: "lset", key: "k", token: 0, val: "newest", want: "STORED"},
			{op: "delete", key: "k"},
			{op: "lget", key: "k", want: "grant:newest"},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, c := newStore(t, Config{LeaseWindow: 10 * time.Second, StaleWindow: 10 * time.Second})
			runLeaseSteps(t, s, c, tc.steps)
		})
	}
}

func TestLeaseCounters(t *testing.T) {
	s, c := newStore(t, Config{})
	runLeaseSteps(t, s, c, []leaseStep{
		{op: "set", key: "k", val: "v"},
		{op: "delete", key: "k"},
		{op: "lget", key: "k", want: "grant:v"}, // grant + stale served
		{op: "lget", key: "k", want: "hot:v"},   // hot miss + stale served
		{op: "lset", key: "k", token: -1, val: "x", want: "NOT_STORED"},
		{op: "lset", key: "k", token: 0, val: "x", want: "STORED"},
		{op: "lget", key: "j", want: "grant"},
		{op: "set", key: "j", val: "y"}, // invalidation
	})
	st := s.Stats()
	l := st.Leases
	if l.Grants != 2 || l.HotMisses != 1 || l.StaleServed != 2 || l.SetsStored != 1 || l.SetsRejected != 1 || l.Invalidations != 1 {
		t.Fatalf("lease counters %+v", l)
	}
	if st.StaleItems != 0 || st.CurrItems != 2 {
		t.Fatalf("stale items %d, curr items %d", st.StaleItems, st.CurrItems)
	}
}

// Stale values live in slab memory and give way to live items under pressure.
func TestStaleValuesYieldToMemoryPressure(t *testing.T) {
	s, _ := newStore(t, Config{MemoryLimit: 2 << 20})
	val := make([]byte, 100)
	for i := range 5000 {
		s.Store(ModeSet, key(i), 0, 0, val, 0)
		s.Delete(key(i))
	}
	if st := s.Stats(); st.StaleItems != 5000 || st.CurrItems != 0 {
		t.Fatalf("stale %d curr %d", st.StaleItems, st.CurrItems)
	}
	for i := range 100_000 {
		if r := s.Store(ModeSet, key(10_000+i), 0, 0, val, 0); r != Stored {
			t.Fatalf("store %d under stale pressure: %v", i, r)
		}
	}
	st := s.Stats()
	if st.StaleItems != 0 {
		t.Fatalf("%d stale values survived a cache full of live items", st.StaleItems)
	}
	if st.Evictions == 0 {
		t.Fatal("no evictions counted")
	}
}

func TestLeaseGetAllocatesNothing(t *testing.T) {
	s, _ := newStore(t, Config{})
	s.Store(ModeSet, []byte("hit"), 0, 0, []byte("value"), 0)
	buf := make([]byte, 0, 64)
	allocs := testing.AllocsPerRun(1000, func() {
		buf, _ = s.LeaseGet(buf[:0], []byte("hit"))
		buf, _ = s.LeaseGet(buf[:0], []byte("miss"))
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per lease-get, want 0", allocs)
	}
}

// TestLapsedLeasesReclaimed: a lease whose window has passed is dropped by the reclaimer, so
// lease_outstanding counts only leases that can still be used (doc/leases.md rule 5).
func TestLapsedLeasesReclaimed(t *testing.T) {
	s, c := newStore(t, Config{})
	runLeaseSteps(t, s, c, []leaseStep{
		{op: "lget", key: "a", want: "grant"},
		{op: "lget", key: "b", want: "grant"},
	})
	require.Equal(t, 2, s.Stats().LeasesHeld)
	s.reclaimTick()
	require.Equal(t, 2, s.Stats().LeasesHeld, "leases still in their window are kept")
	c.advance(int64(lease.DefaultWindow/time.Second) + 1)
	s.reclaimTick()
	require.Zero(t, s.Stats().LeasesHeld, "lapsed leases still held")
}
