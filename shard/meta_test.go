package shard

import (
	"testing"
)

func ops(kv ...any) ExpOps {
	var o ExpOps
	for i := 0; i < len(kv); i += 2 {
		o.Add(kv[i].(ExpKind), int64(kv[i+1].(int)))
	}
	return o
}

func TestMetaGet(t *testing.T) {
	type step struct {
		req  MetaGetRequest
		want MetaGetResult // Info.Cas is not compared
		val  string
	}
	cases := []struct {
		name  string
		setup func(s *Store)
		steps []step
	}{
		{"miss", nil, []step{{req: MetaGetRequest{Value: true}}}},
		{"hit value and ttl", func(s *Store) { s.Store(ModeSet, []byte("k"), 7, 100, []byte("abc"), 0) },
			[]step{{req: MetaGetRequest{Value: true}, val: "abc",
				want: MetaGetResult{Hit: true, Info: Info{Flags: 7, Len: 3}, TTL: TTLs{100}}}}},
		{"first read only marks fetched", func(s *Store) { s.Store(ModeSet, []byte("k"), 0, 0, []byte("v"), 0) }, []step{
			{req: MetaGetRequest{Locked: true}, want: MetaGetResult{Hit: true, Info: Info{Len: 1}, TTL: TTLs{NoTTL}}},
			{req: MetaGetRequest{Locked: true}, want: MetaGetResult{Hit: true, Fetched: true, Info: Info{Len: 1}, TTL: TTLs{NoTTL}}},
		}},
		{"u leaves fetched alone", func(s *Store) { s.Store(ModeSet, []byte("k"), 0, 0, []byte("v"), 0) }, []step{
			{req: MetaGetRequest{NoUpdate: true}, want: MetaGetResult{Hit: true, Info: Info{Len: 1}, TTL: TTLs{NoTTL}}},
			{req: MetaGetRequest{}, want: MetaGetResult{Hit: true, Info: Info{Len: 1}, TTL: TTLs{NoTTL}}},
		}},
		{"T in order", func(s *Store) { s.Store(ModeSet, []byte("k"), 0, 0, []byte("v"), 0) }, []step{
			{req: MetaGetRequest{Ops: ops(ExpTouch, 100)}, want: MetaGetResult{Hit: true, Info: Info{Len: 1}, TTL: TTLs{NoTTL, 100}}},
		}},
		{"N vivifies and wins, then Z", nil, []step{
			{req: MetaGetRequest{Vivify: true, Ops: ops(ExpTouch, 10, ExpVivify, 5), Locked: true},
				want: MetaGetResult{Hit: true, Created: true, Won: true, TTL: TTLs{NoTTL, 10, 5}}},
			{req: MetaGetRequest{Vivify: true, Ops: ops(ExpVivify, 30), Locked: true},
				want: MetaGetResult{Hit: true, Fetched: true, TokenSent: true, TTL: TTLs{5, 5}}},
		}},
		{"R wins only before expiry and once", func(s *Store) { s.Store(ModeSet, []byte("k"), 0, 10, []byte("v"), 0) }, []step{
			{req: MetaGetRequest{Ops: ops(ExpRecache, 10)}, want: MetaGetResult{Hit: true, Info: Info{Len: 1}, TTL: TTLs{10, 10}}},
			{req: MetaGetRequest{Ops: ops(ExpRecache, 11)}, want: MetaGetResult{Hit: true, Fetched: true, Won: true, Info: Info{Len: 1}, TTL: TTLs{10, 10}}},
			{req: MetaGetRequest{Ops: ops(ExpRecache, 11)}, want: MetaGetResult{Hit: true, Fetched: true, TokenSent: true, Info: Info{Len: 1}, TTL: TTLs{10, 10}}},
		}},
		{"aborted applies T but grants nothing", nil, []step{
			{req: MetaGetRequest{Vivify: true, Ops: ops(ExpVivify, 30), Locked: true, Aborted: true},
				want: MetaGetResult{Hit: true, Created: true, TTL: TTLs{NoTTL, 30}}},
			{req: MetaGetRequest{}, want: MetaGetResult{Hit: true, TTL: TTLs{30}}},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, _ := newStore(t, Config{})
			if c.setup != nil {
				c.setup(s)
			}
			for i, st := range c.steps {
				req := st.req
				val, got := s.MetaGet(nil, []byte("k"), &req)
				got.Info.Cas = 0
				if got.Info.Exptime != 0 {
					got.Info.Exptime = 0 // absolute: TTL covers it
				}
				if got != st.want {
					t.Errorf("step %d: got %+v\nwant %+v", i, got, st.want)
				}
				if string(val) != st.val {
					t.Errorf("step %d: value %q, want %q", i, val, st.val)
				}
			}
		})
	}
}

func TestMetaGetStaleAndDelete(t *testing.T) {
	s, _ := newStore(t, Config{})
	k := []byte("k")
	set(t, s, "k", "v")
	_, before := mustGet(t, s, "k")
	if r := s.MetaDelete(k, &MetaDeleteRequest{HasCas: true, Cas: before.Cas + 1}); r != Exists {
		t.Fatalf("md C mismatch: %v", r)
	}
	if r := s.MetaDelete(k, &MetaDeleteRequest{HasCas: true}); r != Exists {
		t.Fatalf("md C0: %v, want Exists (memcached compares C0 too)", r)
	}
	if r := s.MetaDelete(k, &MetaDeleteRequest{Invalidate: true, SetTTL: true, Exptime: 30}); r != Deleted {
		t.Fatalf("md I: %v", r)
	}
	_, after := mustGet(t, s, "k")
	if after.Cas == before.Cas {
		t.Error("md I kept the CAS; memcached gives the stale item a new one")
	}
	var req MetaGetRequest
	_, g := s.MetaGet(nil, k, &req)
	if !g.Stale || !g.Won || g.TokenSent || g.TTL[0] != 30 {
		t.Errorf("first mg after md I: %+v, want X W and t30", g)
	}
	_, g = s.MetaGet(nil, k, &req)
	if !g.Stale || g.Won || !g.TokenSent {
		t.Errorf("second mg after md I: %+v, want X Z", g)
	}
	// A stale set with an older CAS stores, stays stale and keeps the token holder.
	res, cas := s.MetaSet(k, []byte("w"), &MetaSetRequest{Mode: ModeCas, Cas: 1, Invalidate: true})
	if res != Stored || cas == 0 {
		t.Fatalf("ms C1 I: %v %d", res, cas)
	}
	_, g = s.MetaGet(nil, k, &req)
	if !g.Stale || !g.TokenSent || g.TTL[0] != 30 {
		t.Errorf("mg after stale ms: %+v", g)
	}
	if r := s.MetaDelete(k, &MetaDeleteRequest{}); r != Deleted {
		t.Fatalf("md: %v", r)
	}
	if r := s.MetaDelete(k, &MetaDeleteRequest{}); r != NotFound {
		t.Fatalf("md again: %v", r)
	}
}

func TestMetaSetModes(t *testing.T) {
	cases := []struct {
		name    string
		initial string // "" = key absent
		req     MetaSetRequest
		cas     int // 0: req.Cas as is; 1: the item's CAS; -1: item's CAS - 1
		want    Result
		after   string
	}{
		{"set absent", "", MetaSetRequest{Mode: ModeSet}, 0, Stored, "new"},
		{"add absent", "", MetaSetRequest{Mode: ModeAdd}, 0, Stored, "new"},
		{"add present", "old", MetaSetRequest{Mode: ModeAdd}, 0, NotStored, "old"},
		{"add ignores cas", "", MetaSetRequest{Mode: ModeAdd, Cas: 5}, 0, Stored, "new"},
		{"replace absent", "", MetaSetRequest{Mode: ModeReplace}, 0, NotStored, ""},
		{"append", "old", MetaSetRequest{Mode: ModeAppend}, 0, Stored, "oldnew"},
		{"prepend", "old", MetaSetRequest{Mode: ModePrepend}, 0, Stored, "newold"},
		{"append absent", "", MetaSetRequest{Mode: ModeAppend}, 0, NotStored, ""},
		{"append cas mismatch", "old", MetaSetRequest{Mode: ModeAppend}, -1, Exists, "old"},
		{"append cas match", "old", MetaSetRequest{Mode: ModeAppend}, 1, Stored, "oldnew"},
		{"cas match", "old", MetaSetRequest{Mode: ModeCas}, 1, Stored, "new"},
		{"cas mismatch", "old", MetaSetRequest{Mode: ModeCas}, -1, Exists, "old"},
		{"cas zero", "old", MetaSetRequest{Mode: ModeCas}, 0, Exists, "old"},
		{"cas absent", "", MetaSetRequest{Mode: ModeCas, Cas: 1}, 0, NotFound, ""},
		{"stale cas older", "old", MetaSetRequest{Mode: ModeCas, Invalidate: true}, -1, Stored, "new"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, _ := newStore(t, Config{})
			k := []byte("k")
			set(t, s, "other", "x") // so the item's CAS minus one is not 0, which means "no CAS"
			req := c.req
			if c.initial != "" {
				set(t, s, "k", c.initial)
				_, info := mustGet(t, s, "k")
				switch c.cas {
				case 1:
					req.Cas = info.Cas
				case -1:
					req.Cas = info.Cas - 1
				}
			}
			res, cas := s.MetaSet(k, []byte("new"), &req)
			if res != c.want {
				t.Fatalf("MetaSet: %v, want %v", res, c.want)
			}
			if (res == Stored) != (cas != 0) {
				t.Errorf("cas %d with result %v", cas, res)
			}
			v, info, ok := s.Get(nil, k)
			if string(v) != c.after || ok != (c.after != "") {
				t.Errorf("after: %q (%v), want %q", v, ok, c.after)
			}
			if res == Stored && info.Cas != cas {
				t.Errorf("reported cas %d, item has %d", cas, info.Cas)
			}
		})
	}
}

func TestMetaSetKeyBinary(t *testing.T) {
	s, _ := newStore(t, Config{})
	k := []byte{0, 1, 2}
	s.MetaSet(k, []byte("v"), &MetaSetRequest{Mode: ModeSet, KeyBinary: true})
	var req MetaGetRequest
	if _, g := s.MetaGet(nil, k, &req); !g.KeyBinary {
		t.Error("ms b: key not marked binary")
	}
	if d, _ := s.MetaDebug(k); !d.KeyBinary {
		t.Error("me: key not marked binary")
	}
	// memcached builds an appended item afresh, without the binary mark.
	s.MetaSet(k, []byte("w"), &MetaSetRequest{Mode: ModeAppend, KeyBinary: true})
	if _, g := s.MetaGet(nil, k, &req); g.KeyBinary {
		t.Error("append kept the binary mark")
	}
}

func TestMetaArith(t *testing.T) {
	cases := []struct {
		name    string
		initial string
		req     MetaArithRequest
		want    MetaArithResult // Cas not compared
		after   string
	}{
		{"incr", "10", MetaArithRequest{Incr: true, Delta: 1}, MetaArithResult{Result: Stored, Found: true, Value: 11, TTL: TTLs{NoTTL}}, "11"},
		{"decr floors", "10", MetaArithRequest{Delta: 100}, MetaArithResult{Result: Stored, Found: true, TTL: TTLs{NoTTL}}, "0 "},
		{"miss", "", MetaArithRequest{Incr: true, Delta: 1}, MetaArithResult{Result: NotFound}, ""},
		{"vivify", "", MetaArithRequest{Incr: true, Delta: 1, Vivify: true, Initial: 42, Ops: ops(ExpTouch, 10, ExpVivify, 5)},
			MetaArithResult{Result: Stored, Created: true, Value: 42, TTL: TTLs{NoTTL, 10, 5}}, "42"},
		{"cas mismatch", "1", MetaArithRequest{Incr: true, Delta: 1, Cas: 999}, MetaArithResult{Result: Exists, Found: true}, "1"},
		{"empty is non-numeric", "", MetaArithRequest{Incr: true, Delta: 1, Cas: 999}, MetaArithResult{Result: NonNumeric, Found: true}, ""},
		{"non-numeric", "ab", MetaArithRequest{Incr: true, Delta: 1}, MetaArithResult{Result: NonNumeric, Found: true}, "ab"},
		{"grow keeps old exptime", "9", MetaArithRequest{Incr: true, Delta: 1, Ops: ops(ExpTouch, 100)},
			MetaArithResult{Result: Stored, Found: true, Value: 10, TTL: TTLs{NoTTL, 100}}, "10"},
		{"in place takes T", "10", MetaArithRequest{Incr: true, Delta: 1, Ops: ops(ExpTouch, 100)},
			MetaArithResult{Result: Stored, Found: true, Value: 11, TTL: TTLs{NoTTL, 100}}, "11"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, _ := newStore(t, Config{})
			k := []byte("k")
			if c.initial != "" || c.name == "empty is non-numeric" {
				set(t, s, "k", c.initial)
			}
			req := c.req
			got := s.MetaArith(k, &req)
			got.Cas = 0
			if got != c.want {
				t.Fatalf("got %+v\nwant %+v", got, c.want)
			}
			v, info, ok := s.Get(nil, k)
			if string(v) != c.after || ok != (c.after != "" || c.name == "empty is non-numeric") {
				t.Errorf("after: %q (%v), want %q", v, ok, c.after)
			}
			switch c.name {
			case "grow keeps old exptime":
				if info.Exptime != 0 {
					t.Errorf("grown item exptime %d, want 0 (memcached sets T on the replaced item)", info.Exptime)
				}
			case "in place takes T":
				if info.Exptime == 0 {
					t.Error("in-place ma T: exptime not set")
				}
			}
		})
	}
}

func TestMetaDebug(t *testing.T) {
	s, _ := newStore(t, Config{})
	if _, ok := s.MetaDebug([]byte("k")); ok {
		t.Fatal("me on a miss")
	}
	s.Store(ModeSet, []byte("k"), 1, 100, []byte("abc"), 0)
	d, ok := s.MetaDebug([]byte("k"))
	// 48 header + 8 cas + key and NUL + value and CRLF + 4 flag bytes, memcached's ITEM_ntotal.
	want := MetaDebugInfo{Exp: -100, Cas: d.Cas, Class: 1, Size: 48 + 8 + 2 + 5 + 4}
	if !ok || d != want {
		t.Errorf("me: %+v, want %+v", d, want)
	}
	mustGet(t, s, "k")
	if d, _ := s.MetaDebug([]byte("k")); !d.Fetched {
		t.Error("me after get: fetch=no")
	}
}

// TestMcClasses checks memcached's default slab table (memcached -vv: 39 classes, 96 ... 524288).
func TestMcClasses(t *testing.T) {
	if n := len(mcClassSizes); n != 39 {
		t.Fatalf("%d classes, want 39", n)
	}
	for i, want := range map[int]int{0: 96, 1: 120, 2: 152, 11: 1184, 34: 202152, 37: 394840, 38: 524288} {
		if mcClassSizes[i] != want {
			t.Errorf("class %d: %d, want %d", i+1, mcClassSizes[i], want)
		}
	}
	for _, c := range []struct{ size, cls int }{{1, 1}, {96, 1}, {97, 2}, {1063, 12}, {200063, 35}, {600063, 39}} {
		if got := mcClassOf(c.size); got != c.cls {
			t.Errorf("mcClassOf(%d) = %d, want %d", c.size, got, c.cls)
		}
	}
}

// TestMetaLeases checks leases.md rule 3 for the meta commands: ms, md and ma cancel the key's lease
// whatever their outcome; mg (even vivifying) and me do not.
func TestMetaLeases(t *testing.T) {
	cases := []struct {
		name       string
		op         func(s *Store, k []byte)
		invalidate bool
	}{
		{"ms", func(s *Store, k []byte) { s.MetaSet(k, []byte("v"), &MetaSetRequest{Mode: ModeSet}) }, true},
		{"ms refused", func(s *Store, k []byte) { s.MetaSet(k, []byte("v"), &MetaSetRequest{Mode: ModeReplace}) }, true},
		{"md miss", func(s *Store, k []byte) { s.MetaDelete(k, &MetaDeleteRequest{}) }, true},
		{"ma miss", func(s *Store, k []byte) { s.MetaArith(k, &MetaArithRequest{Incr: true, Delta: 1}) }, true},
		{"mg vivify", func(s *Store, k []byte) {
			s.MetaGet(nil, k, &MetaGetRequest{Vivify: true, Ops: ops(ExpVivify, 30)})
		}, false},
		{"me", func(s *Store, k []byte) { s.MetaDebug(k) }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, _ := newStore(t, Config{})
			k := []byte("k")
			_, lr := s.LeaseGet(nil, k)
			if lr.Kind != LeaseGranted {
				t.Fatalf("lease-get: %+v", lr)
			}
			c.op(s, k)
			res := s.LeaseSet(k, lr.Token, 0, 0, []byte("fill"))
			if got := res != Stored; got != c.invalidate {
				t.Errorf("lease-set after %s: %v (invalidated=%v, want %v)", c.name, res, got, c.invalidate)
			}
		})
	}
}

// TestMetaZeroAllocs proves the mg and ms hit paths allocate nothing in steady state.
func TestMetaZeroAllocs(t *testing.T) {
	s, _ := newStore(t, Config{})
	k, v := []byte("key"), []byte("value")
	set(t, s, "key", "value")
	buf := make([]byte, 0, 64)
	greq := MetaGetRequest{Value: true, Ops: ops(ExpTouch, 100), Locked: true}
	sreq := MetaSetRequest{Mode: ModeSet, Flags: 1, Exptime: 100}
	if n := testing.AllocsPerRun(1000, func() {
		buf, _ = s.MetaGet(buf[:0], k, &greq)
	}); n != 0 {
		t.Errorf("MetaGet: %v allocs", n)
	}
	if n := testing.AllocsPerRun(1000, func() { s.MetaSet(k, v, &sreq) }); n != 0 {
		t.Errorf("MetaSet: %v allocs", n)
	}
	areq := MetaArithRequest{Incr: true, Delta: 1}
	set(t, s, "key", "1000")
	if n := testing.AllocsPerRun(1000, func() { s.MetaArith(k, &areq) }); n != 0 {
		t.Errorf("MetaArith: %v allocs", n)
	}
}
