package shard

import "testing"

func TestExptimeRules(t *testing.T) {
	const day30 = 60 * 60 * 24 * 30
	for _, tc := range []struct {
		name    string
		exp     int64 // relative to the clock unless abs
		abs     bool
		wantExp int64 // Info.Exptime relative to the clock (0 = never)
		aliveAt []int64
		deadAt  []int64
	}{
		{"never", 0, false, 0, []int64{0, 1e6}, nil},
		{"negative is already expired", -1, false, -1, nil, []int64{0}},
		{"relative", 10, false, 10, []int64{0, 9}, []int64{10, 11}},
		{"relative 30 days", day30, false, day30, []int64{day30 - 1}, []int64{day30}},
		{"absolute future", 100, true, 100, []int64{99}, []int64{100}},
		{"absolute past", -100, true, 0, nil, []int64{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, at := range append(append([]int64{}, tc.aliveAt...), tc.deadAt...) {
				s, c := newStore(t, Config{})
				start := c.now()
				exp := tc.exp
				if tc.abs {
					exp += start
				}
				if r := s.Store(ModeSet, []byte("k"), 0, exp, []byte("v"), 0); r != Stored {
					t.Fatalf("store: %v", r)
				}
				c.advance(at)
				_, info, ok := s.Get(nil, []byte("k"))
				alive := false
				for _, a := range tc.aliveAt {
					alive = alive || a == at
				}
				if ok != alive {
					t.Fatalf("at +%d: present=%v, want %v", at, ok, alive)
				}
				if ok && tc.wantExp != 0 && info.Exptime != start+tc.wantExp {
					t.Fatalf("exptime %d, want %d", info.Exptime, start+tc.wantExp)
				}
				if ok && tc.wantExp == 0 && info.Exptime != 0 {
					t.Fatalf("exptime %d, want 0", info.Exptime)
				}
			}
		})
	}
}

func TestTouchAndGatChangeExpiry(t *testing.T) {
	s, c := newStore(t, Config{})
	s.Store(ModeSet, []byte("a"), 0, 5, []byte("v"), 0)
	s.Store(ModeSet, []byte("b"), 0, 5, []byte("v"), 0)
	if s.Touch([]byte("a"), 100) != Touched {
		t.Fatal("touch")
	}
	v, info, ok := s.GetAndTouch(nil, []byte("b"), 0)
	if !ok || string(v) != "v" || info.Exptime != 0 {
		t.Fatalf("gat: %q %+v %v", v, info, ok)
	}
	c.advance(50)
	mustGet(t, s, "a")
	mustGet(t, s, "b")
	c.advance(50)
	miss(t, s, "a")
	mustGet(t, s, "b")
	// gat with a negative exptime returns the value, then it is gone.
	if _, _, ok := s.GetAndTouch(nil, []byte("b"), -1); !ok {
		t.Fatal("gat -1 missed")
	}
	miss(t, s, "b")
	// An expired item is gone for every command.
	s.Store(ModeSet, []byte("e"), 0, 1, []byte("1"), 0)
	c.advance(1)
	for _, r := range []Result{s.Touch([]byte("e"), 0), s.Delete([]byte("e")), s.Store(ModeReplace, []byte("e"), 0, 0, nil, 0)} {
		if r != NotFound && r != NotStored {
			t.Fatalf("expired item answered %v", r)
		}
	}
	if s.Store(ModeAdd, []byte("e"), 0, 0, []byte("new"), 0) != Stored {
		t.Fatal("add over expired item")
	}
}

func TestFlushAll(t *testing.T) {
	s, c := newStore(t, Config{Shards: 4})
	for i := range 100 {
		set(t, s, string(rune('a'+i%26))+string(rune('0'+i/26)), "v")
	}
	s.FlushAll(0)
	for i := range 100 {
		miss(t, s, string(rune('a'+i%26))+string(rune('0'+i/26)))
	}
	// Stored in the same second, after the flush: visible.
	set(t, s, "after", "1")
	mustGet(t, s, "after")
	c.advance(1)
	mustGet(t, s, "after")
	if s.Store(ModeAdd, []byte("a0"), 0, 0, []byte("x"), 0) != Stored {
		t.Fatal("add of a flushed key")
	}
}

func TestFlushAllDelayed(t *testing.T) {
	s, c := newStore(t, Config{})
	set(t, s, "old", "1")
	s.FlushAll(10) // takes effect at +9: memcached's oldest_live = realtime(10) - 1
	mustGet(t, s, "old")
	c.advance(5)
	set(t, s, "mid", "2") // stored before the flush time: flushed too
	mustGet(t, s, "mid")
	c.advance(4)
	miss(t, s, "old")
	miss(t, s, "mid")
	c.advance(1)
	set(t, s, "new", "3")
	mustGet(t, s, "new")
	c.advance(100)
	mustGet(t, s, "new")

	// A later immediate flush replaces a pending delayed one.
	s2, c2 := newStore(t, Config{})
	set(t, s2, "k", "v")
	s2.FlushAll(100)
	s2.FlushAll(0)
	miss(t, s2, "k")
	set(t, s2, "k2", "v")
	c2.advance(200)
	mustGet(t, s2, "k2")

	// An absolute delay in the future behaves like the relative one.
	s3, c3 := newStore(t, Config{})
	set(t, s3, "k", "v")
	s3.FlushAll(c3.now() + 50)
	c3.advance(48)
	mustGet(t, s3, "k")
	c3.advance(1)
	miss(t, s3, "k")
}

func TestReclaimerFreesDeadItems(t *testing.T) {
	s, c := newStore(t, Config{})
	for i := range 1000 {
		s.Store(ModeSet, []byte{byte(i), byte(i >> 8), 'k'}, 0, 10, []byte("value"), 0)
	}
	set(t, s, "keep", "v")
	c.advance(10)
	for i := range s.shards {
		s.shards[i].reclaim(c.now(), 1<<20)
	}
	st := s.Stats()
	if st.CurrItems != 1 || st.CrawlerReclaimed != 1000 || st.ExpiredUnfetched != 1000 {
		t.Fatalf("after reclaim: curr %d reclaimed %d unfetched %d", st.CurrItems, st.CrawlerReclaimed, st.ExpiredUnfetched)
	}
	mustGet(t, s, "keep")
	// A second pass publishes the class age.
	c.advance(5)
	for i := range s.shards {
		s.shards[i].reclaim(c.now(), 1<<20)
	}
	found := false
	for _, cl := range s.Stats().Classes {
		if cl.Number == 1 {
			found = cl.Age == 15
		}
	}
	if !found {
		t.Fatal("class age not reported")
	}
}

func TestBackgroundReclaimerRunsAndStops(t *testing.T) {
	c := newClock()
	s, err := New(Config{MemoryLimit: 8 << 20, Now: c.now, ReclaimInterval: 5e6})
	if err != nil {
		t.Fatal(err)
	}
	s.Store(ModeSet, []byte("k"), 0, 1, []byte("v"), 0)
	c.advance(2)
	for i := 0; i < 400 && s.Stats().CurrItems != 0; i++ {
		sleepMs(5)
	}
	if n := s.Stats().CurrItems; n != 0 {
		t.Fatalf("reclaimer did not free the item: %d", n)
	}
	s.Close()
	s.Close() // idempotent
}
