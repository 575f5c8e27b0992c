package clientlib

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var errSource = errors.New("source is down")

// TestGetOrFillStateMachine drives GetOrFill through each branch of the lease contract against a
// scripted server.
func TestGetOrFillStateMachine(t *testing.T) {
	const key = "k"
	grant := func(n int64, k string) string { return lvalueBlock(k, 42, "") }
	tests := []struct {
		name     string
		leaseGet func(n int64, key string) string
		leaseSet func(key string, token uint64, data []byte) string
		fill     func(ctx context.Context, calls int64) ([]byte, error)
		opts     FillOptions
		timeout  time.Duration // caller's deadline; 0 = 2 s
		callers  int           // concurrent callers; 0 = 1

		wantData   string
		wantSource Source
		wantErr    error
		wantFills  int64
		wantSets   []string // lease-sets the server saw, "key token data"
		wantGets   int64    // exact lease-get count, -1: at least 2
		wantDels   int64    // deletes: a failed fill gives its lease back
		check      func(t *testing.T, s Stats)
	}{
		{
			name:       "hit",
			leaseGet:   func(n int64, k string) string { return valueBlock(k, "cached") },
			wantData:   "cached",
			wantSource: SourceCache,
			wantGets:   1,
			check:      func(t *testing.T, s Stats) { eq(t, "CacheHits", s.CacheHits, 1) },
		},
		{
			name:       "grant, fill, lease-set",
			leaseGet:   grant,
			wantData:   "fresh",
			wantSource: SourceFill,
			wantFills:  1,
			wantSets:   []string{"k 42 fresh"},
			wantGets:   1,
			check:      func(t *testing.T, s Stats) { eq(t, "LeaseSetsStored", s.LeaseSetsStored, 1) },
		},
		{
			name:       "lease-set NOT_STORED still returns the value",
			leaseGet:   grant,
			leaseSet:   func(string, uint64, []byte) string { return "NOT_STORED" },
			wantData:   "fresh",
			wantSource: SourceFill,
			wantFills:  1,
			wantSets:   []string{"k 42 fresh"},
			wantGets:   1,
			check:      func(t *testing.T, s Stats) { eq(t, "LeaseSetsRejected", s.LeaseSetsRejected, 1) },
		},
		{
			name:       "hot miss with stale value accepted",
			leaseGet:   func(n int64, k string) string { return lvalueBlock(k, hotMissToken, "old") },
			opts:       FillOptions{AcceptStale: true},
			wantData:   "old",
			wantSource: SourceStale,
			wantGets:   1,
			check:      func(t *testing.T, s Stats) { eq(t, "StaleServed", s.StaleServed, 1) },
		},
		{
			name: "hot miss, wait, then hit",
			leaseGet: func(n int64, k string) string {
				if n < 4 {
					return lvalueBlock(k, hotMissToken, "old") // stale present but not accepted
				}
				return valueBlock(k, "refilled")
			},
			wantData:   "refilled",
			wantSource: SourceCache,
			wantGets:   4,
			check:      func(t *testing.T, s Stats) { eq(t, "HotMissWaits", s.HotMissWaits, 3) },
		},
		{
			name:     "deadline expires during hot-miss wait",
			leaseGet: func(n int64, k string) string { return lvalueBlock(k, hotMissToken, "") },
			opts:     FillOptions{MaxWait: 10 * time.Second},
			timeout:  400 * time.Millisecond, // half of it bounds each lease-get (GetOrFill)
			wantErr:  context.DeadlineExceeded,
			wantGets: -1,
		},
		{
			name:       "wait exhausted, fallback fill",
			leaseGet:   func(n int64, k string) string { return lvalueBlock(k, hotMissToken, "") },
			opts:       FillOptions{MaxWait: 30 * time.Millisecond},
			wantData:   "fresh",
			wantSource: SourceFallback,
			wantFills:  1,
			wantGets:   -1,
			check:      func(t *testing.T, s Stats) { eq(t, "Fallbacks", s.Fallbacks, 1) },
		},
		{
			name:      "wait exhausted, fallback error",
			leaseGet:  func(n int64, k string) string { return lvalueBlock(k, hotMissToken, "") },
			opts:      FillOptions{MaxWait: 30 * time.Millisecond, Fallback: FallbackError},
			wantErr:   ErrLeaseWaitExhausted,
			wantFills: 0,
			wantGets:  -1,
		},
		{
			name:     "fill error is not cached and reaches every coalesced caller",
			leaseGet: grant,
			fill: func(ctx context.Context, _ int64) ([]byte, error) {
				time.Sleep(50 * time.Millisecond)
				return nil, errSource
			},
			callers:   20,
			wantErr:   errSource,
			wantFills: 1,
			wantGets:  1,
			wantDels:  1,
			check:     func(t *testing.T, s Stats) { eq(t, "FillErrors", s.FillErrors, 1) },
		},
		{
			name:     "fill that hangs is cut off by the fill timeout",
			leaseGet: grant,
			fill: func(ctx context.Context, _ int64) ([]byte, error) {
				time.Sleep(2 * time.Second) // ignores ctx on purpose
				return []byte("late"), nil
			},
			opts:      FillOptions{FillTimeout: 50 * time.Millisecond},
			wantErr:   context.DeadlineExceeded,
			wantFills: 1,
			wantGets:  1,
			wantDels:  1,
		},
		{
			name:      "fill panics: recovered, lease given back",
			leaseGet:  grant,
			fill:      func(context.Context, int64) ([]byte, error) { panic("bug") },
			wantErr:   ErrFillPanicked,
			wantFills: 1,
			wantGets:  1,
			wantDels:  1,
		},
		{
			name:       "value over MaxValueSize: returned, not cached, lease given back",
			leaseGet:   grant,
			fill:       func(context.Context, int64) ([]byte, error) { return make([]byte, 2048), nil },
			opts:       FillOptions{},
			wantData:   string(make([]byte, 2048)),
			wantSource: SourceFill,
			wantFills:  1,
			wantGets:   1,
			wantDels:   1,
		},
		{
			name:       "a fill equal to the cached not-found entry is not cached",
			leaseGet:   grant,
			fill:       func(context.Context, int64) ([]byte, error) { return negativeValue, nil },
			opts:       FillOptions{Flags: negativeFlags},
			wantData:   string(negativeValue),
			wantSource: SourceFill,
			wantFills:  1,
			wantGets:   1,
			wantDels:   1,
		},
		{
			name:      "not found with NegativeTTL: cached as the reserved entry",
			leaseGet:  grant,
			fill:      func(context.Context, int64) ([]byte, error) { return nil, ErrNotFound },
			opts:      FillOptions{NegativeTTL: time.Minute},
			wantErr:   ErrNotFound,
			wantFills: 1,
			wantSets:  []string{"k 42 " + string(negativeValue)},
			wantGets:  1,
		},
		{
			name: "cached not-found entry read back",
			leaseGet: func(n int64, k string) string {
				return fmt.Sprintf("VALUE %s %d %d\r\n%s\r\n", k, negativeFlags, len(negativeValue), negativeValue)
			},
			wantErr:  ErrNotFound,
			wantGets: 1,
			check:    func(t *testing.T, s Stats) { eq(t, "CacheHits", s.CacheHits, 1) },
		},
		{
			name:     "single-flight: 50 callers, one lease-get, one fill",
			leaseGet: grant,
			fill: func(ctx context.Context, _ int64) ([]byte, error) {
				time.Sleep(100 * time.Millisecond)
				return []byte("fresh"), nil
			},
			callers:    50,
			wantData:   "fresh",
			wantSource: SourceFill,
			wantFills:  1,
			wantSets:   []string{"k 42 fresh"},
			wantGets:   1,
			check:      func(t *testing.T, s Stats) { eq(t, "CallersCoalesced", s.CallersCoalesced, 49) },
		},
		{
			name:       "stale while one background refresh runs",
			leaseGet:   func(n int64, k string) string { return lvalueBlock(k, 7, "old") },
			opts:       FillOptions{StaleWhileRefresh: true},
			wantData:   "old",
			wantSource: SourceStale,
			wantFills:  1,
			wantSets:   []string{"k 7 fresh"},
			wantGets:   1,
			check:      func(t *testing.T, s Stats) { eq(t, "BackgroundRefreshes", s.BackgroundRefreshes, 1) },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newFakeServer(t)
			srv.leaseGet, srv.leaseSet = tc.leaseGet, tc.leaseSet
			c := newTestClient(t, Config{MaxValueSize: 1024}, srv.addr())
			warm(t, c)
			var fills atomic.Int64
			fill := func(ctx context.Context, k string) ([]byte, error) {
				n := fills.Add(1)
				if tc.fill != nil {
					return tc.fill(ctx, n)
				}
				return []byte("fresh"), nil
			}
			timeout := tc.timeout
			if timeout == 0 {
				timeout = 2 * time.Second
			}
			callers := max(tc.callers, 1)
			type out struct {
				v   Value
				err error
			}
			outs := make([]out, callers)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					ctx, cancel := context.WithTimeout(context.Background(), timeout)
					defer cancel()
					opts := tc.opts
					v, err := c.GetOrFill(ctx, key, fill, &opts)
					outs[i] = out{v, err}
				}()
			}
			close(start)
			wg.Wait()
			for i, o := range outs {
				if tc.wantErr != nil {
					if !errors.Is(o.err, tc.wantErr) {
						t.Fatalf("caller %d: err = %v, want %v", i, o.err, tc.wantErr)
					}
					continue
				}
				if o.err != nil {
					t.Fatalf("caller %d: %v", i, o.err)
				}
				if string(o.v.Data) != tc.wantData || o.v.Source != tc.wantSource {
					t.Fatalf("caller %d: got %q from %v, want %q from %v", i, o.v.Data, o.v.Source, tc.wantData, tc.wantSource)
				}
			}
			// Background work (a StaleWhileRefresh fill) may still be running: wait for it, bounded.
			waitFor(t, 5*time.Second, func() bool { return int64(len(srv.setsSeen())) >= int64(len(tc.wantSets)) })
			if got := fills.Load(); got != tc.wantFills {
				t.Errorf("fills = %d, want %d", got, tc.wantFills)
			}
			if got := srv.setsSeen(); !equalStrings(got, tc.wantSets) {
				t.Errorf("lease-sets = %q, want %q", got, tc.wantSets)
			}
			if got := srv.deletes.Load(); got != tc.wantDels {
				t.Errorf("deletes = %d, want %d", got, tc.wantDels)
			}
			gets := srv.leaseGets.Load()
			if (tc.wantGets >= 0 && gets != tc.wantGets) || (tc.wantGets < 0 && gets < 2) {
				t.Errorf("lease-gets = %d, want %d", gets, tc.wantGets)
			}
			if tc.check != nil {
				tc.check(t, c.Stats())
			}
		})
	}
}

// TestGetOrFillErrorNotCached: after a failed fill the next call fills again (nothing was stored,
// and the failure was not remembered by the single-flight group).
func TestGetOrFillErrorNotCached(t *testing.T) {
	srv := newFakeServer(t)
	srv.leaseGet = func(n int64, k string) string { return lvalueBlock(k, uint64(n)+1, "") }
	c := newTestClient(t, Config{}, srv.addr())
	var calls atomic.Int64
	fill := func(ctx context.Context, k string) ([]byte, error) {
		if calls.Add(1) == 1 {
			return nil, errSource
		}
		return []byte("ok"), nil
	}
	ctx := context.Background()
	if _, err := c.GetOrFill(ctx, "k", fill, nil); !errors.Is(err, errSource) {
		t.Fatalf("first call: %v, want errSource", err)
	}
	if len(srv.setsSeen()) != 0 {
		t.Fatalf("a failed fill was cached: %q", srv.setsSeen())
	}
	v, err := c.GetOrFill(ctx, "k", fill, nil)
	if err != nil || string(v.Data) != "ok" {
		t.Fatalf("second call: %q %v", v.Data, err)
	}
}

// TestGetOrFillCallerLeavesFillStillCached: a caller that gives up does not stop the fill that holds
// the lease; the value is still lease-set for everyone else.
func TestGetOrFillCallerLeavesFillStillCached(t *testing.T) {
	srv := newFakeServer(t)
	srv.leaseGet = func(n int64, k string) string { return lvalueBlock(k, 9, "") }
	c := newTestClient(t, Config{}, srv.addr())
	warm(t, c)
	fill := func(ctx context.Context, k string) ([]byte, error) {
		time.Sleep(time.Second)
		return []byte("v"), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond) // half for the lease-get
	defer cancel()
	if _, err := c.GetOrFill(ctx, "k", fill, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want deadline exceeded", err)
	}
	waitFor(t, 5*time.Second, func() bool { return len(srv.setsSeen()) == 1 })
	if got := srv.setsSeen(); len(got) != 1 || got[0] != "k 9 v" {
		t.Fatalf("lease-set = %q, want one of the filled value", got)
	}
}

// TestFillTTLJitter: written TTLs stay within [TTL-jitter, TTL] and are not all equal.
func TestFillTTLJitter(t *testing.T) {
	o := FillOptions{TTL: time.Hour, TTLJitter: 10 * time.Minute}
	seen := map[time.Duration]bool{}
	for range 200 {
		got := o.ttl()
		if got > time.Hour || got < 50*time.Minute {
			t.Fatalf("ttl %v outside [50m, 1h]", got)
		}
		seen[got] = true
	}
	if len(seen) < 10 {
		t.Fatalf("only %d distinct TTLs: jitter not applied", len(seen))
	}
	if got := (&FillOptions{TTL: NeverExpire}).ttl(); got != 0 {
		t.Fatalf("NeverExpire ttl = %v, want 0", got)
	}
}

func eq(t *testing.T, name string, got, want uint64) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %d, want %d", name, got, want)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}
