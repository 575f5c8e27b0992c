package lease

import (
	"testing"
	"time"
)

const sec = int64(time.Second)

func TestTokensNeverReserved(t *testing.T) {
	cases := []struct {
		name  string
		start uint64
	}{
		{"zero start is raised to 2", 0},
		{"one start is raised to 2", 1},
		{"just below the mcrouter range", reservedPrefix<<32 - 3},
		{"inside the mcrouter range", reservedPrefix<<32 + 5},
		{"huge start is folded below 2^62", 1<<64 - 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tok := NewTokens(tc.start)
			seen := map[uint64]bool{}
			for range 10 {
				v := tok.Next()
				if v < firstToken {
					t.Fatalf("token %d is below %d", v, firstToken)
				}
				if v>>32 == reservedPrefix {
					t.Fatalf("token %#x is in mcrouter's reserved range", v)
				}
				if seen[v] {
					t.Fatalf("token %d issued twice", v)
				}
				seen[v] = true
			}
		})
	}
}

func TestAcquireConsumeInvalidate(t *testing.T) {
	type step struct {
		op      string // acquire, consume, invalidate, flush
		hash    uint64
		at      int64 // seconds
		token   int   // for consume: index of a granted token (-1: a never-issued one)
		granted bool  // acquire: want a grant; consume: want success
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"grant then hot miss within window", []step{
			{op: "acquire", hash: 1, at: 0, granted: true},
			{op: "acquire", hash: 1, at: 5},
			{op: "acquire", hash: 1, at: 9},
		}},
		{"new grant after the window lapses, old token refused", []step{
			{op: "acquire", hash: 1, at: 0, granted: true},
			{op: "acquire", hash: 1, at: 10, granted: true},
			{op: "consume", hash: 1, at: 11, token: 0},
			{op: "consume", hash: 1, at: 11, token: 1, granted: true},
		}},
		{"consume once only", []step{
			{op: "acquire", hash: 1, at: 0, granted: true},
			{op: "consume", hash: 1, at: 1, token: 0, granted: true},
			{op: "consume", hash: 1, at: 1, token: 0},
		}},
		{"consumed lease lets the next miss grant at once", []step{
			{op: "acquire", hash: 1, at: 0, granted: true},
			{op: "consume", hash: 1, at: 1, token: 0, granted: true},
			{op: "acquire", hash: 1, at: 2, granted: true},
		}},
		{"lapsed token refused", []step{
			{op: "acquire", hash: 1, at: 0, granted: true},
			{op: "consume", hash: 1, at: 10, token: 0},
		}},
		{"invalidated token refused", []step{
			{op: "acquire", hash: 1, at: 0, granted: true},
			{op: "invalidate", hash: 1, at: 1},
			{op: "consume", hash: 1, at: 2, token: 0},
		}},
		{"invalidation re-opens the key to a new grant", []step{
			{op: "acquire", hash: 1, at: 0, granted: true},
			{op: "invalidate", hash: 1, at: 1},
			{op: "acquire", hash: 1, at: 1, granted: true},
		}},
		{"flush invalidates every key", []step{
			{op: "acquire", hash: 1, at: 0, granted: true},
			{op: "acquire", hash: 2, at: 0, granted: true},
			{op: "flush", at: 1},
			{op: "consume", hash: 1, at: 1, token: 0},
			{op: "consume", hash: 2, at: 1, token: 1},
		}},
		{"token of another key refused", []step{
			{op: "acquire", hash: 1, at: 0, granted: true},
			{op: "acquire", hash: 2, at: 0, granted: true},
			{op: "consume", hash: 2, at: 1, token: 0},
			{op: "consume", hash: 1, at: 1, token: 0, granted: true},
		}},
		{"never-issued and hot-miss tokens refused", []step{
			{op: "acquire", hash: 1, at: 0, granted: true},
			{op: "consume", hash: 1, at: 1, token: -1},
			{op: "consume", hash: 1, at: 1, token: -2},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tab := NewTable(NewTokens(100), 10*time.Second, 100)
			var granted []uint64
			for i, s := range tc.steps {
				now := s.at * sec
				switch s.op {
				case "acquire":
					tok, ok := tab.Acquire(s.hash, now)
					if ok != s.granted {
						t.Fatalf("step %d: acquire granted=%v, want %v", i, ok, s.granted)
					}
					if ok {
						granted = append(granted, tok)
					} else if tok != HotMissToken {
						t.Fatalf("step %d: hot miss token %d, want %d", i, tok, HotMissToken)
					}
				case "consume":
					tok := uint64(987654321)
					switch {
					case s.token == -2:
						tok = HotMissToken
					case s.token >= 0:
						tok = granted[s.token]
					}
					if ok := tab.Consume(s.hash, tok, now); ok != s.granted {
						t.Fatalf("step %d: consume=%v, want %v", i, ok, s.granted)
					}
				case "invalidate":
					tab.Invalidate(s.hash, now)
				case "flush":
					tab.InvalidateAll(now)
				}
			}
		})
	}
}

func TestCounters(t *testing.T) {
	tab := NewTable(NewTokens(2), time.Second, 100)
	tok, _ := tab.Acquire(7, 0)
	tab.Acquire(7, 1)             // hot miss
	tab.Acquire(7, 2)             // hot miss
	if tab.Consume(7, tok+1, 3) { // wrong token
		t.Fatal("wrong token consumed")
	}
	if !tab.Consume(7, tok, 4) {
		t.Fatal("valid token refused")
	}
	tab.Acquire(8, 5)        // grant
	tab.Invalidate(8, 6)     // valid lease cancelled
	tab.Acquire(9, 0)        // grant
	tab.Invalidate(9, 2*sec) // lapsed: not an invalidation
	tab.Invalidate(10, 0)    // nothing there
	// Consume counts nothing: the owner knows whether the store behind it succeeded.
	want := Counters{Grants: 3, HotMisses: 2, Invalidations: 1}
	if tab.Counters != want {
		t.Fatalf("counters %+v, want %+v", tab.Counters, want)
	}
	var sum Counters
	sum.Add(want)
	sum.Add(want)
	if sum.Grants != 6 || sum.Invalidations != 2 || sum.HotMisses != 4 {
		t.Fatalf("Add: %+v", sum)
	}
}

func TestBoundedAndSwept(t *testing.T) {
	const max = 64
	tab := NewTable(NewTokens(2), time.Second, max)
	for h := range uint64(10 * max) {
		if _, ok := tab.Acquire(h, int64(h)); !ok {
			t.Fatalf("acquire %d on a fresh key was not granted", h)
		}
		if tab.Len() > max {
			t.Fatalf("table holds %d entries, limit %d", tab.Len(), max)
		}
	}
	// Every lease lapses one second after its grant: a sweep later returns the memory.
	if n := tab.Sweep(100 * sec); n == 0 || tab.Len() != 0 {
		t.Fatalf("sweep dropped %d, %d left", n, tab.Len())
	}
}

func TestFullTableDropsClosestToLapsing(t *testing.T) {
	tab := NewTable(NewTokens(2), 10*time.Second, 2)
	tab.Acquire(1, 0)
	tok2, _ := tab.Acquire(2, 1*sec)
	tok3, ok := tab.Acquire(3, 2*sec)
	if !ok || tab.Len() != 2 {
		t.Fatalf("third grant ok=%v len=%d", ok, tab.Len())
	}
	if !tab.Consume(2, tok2, 3*sec) || !tab.Consume(3, tok3, 3*sec) {
		t.Fatal("the two newest leases should have survived")
	}
}

func TestAllocsSteadyState(t *testing.T) {
	tab := NewTable(NewTokens(2), time.Second, 1024)
	now := int64(0)
	allocs := testing.AllocsPerRun(1000, func() {
		now += 2 * sec
		tok, _ := tab.Acquire(42, now)
		tab.Acquire(42, now)
		tab.Consume(42, tok, now)
		tab.Invalidate(42, now)
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per lease cycle, want 0", allocs)
	}
}

func BenchmarkAcquireConsume(b *testing.B) {
	tab := NewTable(NewTokens(2), time.Second, 1<<16)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		h := uint64(i & 1023)
		tok, _ := tab.Acquire(h, int64(i))
		tab.Consume(h, tok, int64(i))
	}
}
