package clientlib_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasecached/leasecached/clientlib"
)

// backends are the servers the classic and meta command tests run against: leasecached must behave
// as memcached does, and memcached is the reference the expectations were written against.
var backends = []struct {
	name  string
	start func(testing.TB) *proc
}{
	{"leasecached", startLeasecached},
	{"memcached", startMemcached},
}

func TestClassicCommands(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			p := be.start(t)
			c := newClient(t, clientlib.Config{}, p.Addr)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			item := func(k, v string) *clientlib.Item { return &clientlib.Item{Key: k, Value: []byte(v), Flags: 42} }
			steps := []struct {
				name string
				run  func() error
				want error
			}{
				{"set", func() error { return c.Set(ctx, item("a", "1")) }, nil},
				{"get", func() error { return expectValue(c, ctx, "a", "1") }, nil},
				{"get miss", func() error { _, err := c.Get(ctx, "missing"); return err }, clientlib.ErrCacheMiss},
				{"add existing", func() error { return c.Add(ctx, item("a", "2")) }, clientlib.ErrNotStored},
				{"add new", func() error { return c.Add(ctx, item("b", "2")) }, nil},
				{"replace missing", func() error { return c.Replace(ctx, item("nope", "x")) }, clientlib.ErrNotStored},
				{"replace", func() error { return c.Replace(ctx, item("b", "3")) }, nil},
				{"append", func() error { return c.Append(ctx, item("b", "4")) }, nil},
				{"prepend", func() error { return c.Prepend(ctx, item("b", "2")) }, nil},
				{"after append/prepend", func() error { return expectValue(c, ctx, "b", "234") }, nil},
				{"append missing", func() error { return c.Append(ctx, item("nope", "x")) }, clientlib.ErrNotStored},
				{"cas", func() error {
					it, err := c.Get(ctx, "a")
					if err != nil {
						return err
					}
					it.Value = []byte("cas1")
					if err := c.CompareAndSwap(ctx, it); err != nil {
						return err
					}
					it.Value = []byte("cas2") // same, now outdated, CAS value
					return c.CompareAndSwap(ctx, it)
				}, clientlib.ErrCASConflict},
				{"cas missing", func() error {
					return c.CompareAndSwap(ctx, &clientlib.Item{Key: "nope", Value: []byte("x"), CAS: 1})
				}, clientlib.ErrCacheMiss},
				{"incr", func() error { return expectArith(c.Increment(ctx, "n", 1)) }, clientlib.ErrCacheMiss},
				{"incr decr", func() error {
					if err := c.Set(ctx, item("n", "10")); err != nil {
						return err
					}
					if v, err := c.Increment(ctx, "n", 5); err != nil || v != 15 {
						return fmt.Errorf("incr: %d %v", v, err)
					}
					if v, err := c.Decrement(ctx, "n", 100); err != nil || v != 0 {
						return fmt.Errorf("decr below zero: %d %v", v, err)
					}
					return nil
				}, nil},
				{"incr non-numeric", func() error { _, err := c.Increment(ctx, "a", 1); return err }, clientlib.ErrClientError},
				{"touch", func() error { return c.Touch(ctx, "a", time.Hour) }, nil},
				{"touch missing", func() error { return c.Touch(ctx, "nope", time.Hour) }, clientlib.ErrCacheMiss},
				{"gat", func() error {
					it, err := c.GetAndTouch(ctx, "a", time.Hour)
					if err == nil && string(it.Value) != "cas1" {
						err = fmt.Errorf("gat value %q", it.Value)
					}
					return err
				}, nil},
				{"get multi", func() error {
					got, err := c.GetMulti(ctx, []string{"a", "b", "missing", "n"})
					if err != nil {
						return err
					}
					if len(got) != 3 || string(got["b"].Value) != "234" || got["a"].Flags != 42 || got["a"].CAS == 0 {
						return fmt.Errorf("GetMulti = %v", got)
					}
					return nil
				}, nil},
				{"delete", func() error { return c.Delete(ctx, "a") }, nil},
				{"delete missing", func() error { return c.Delete(ctx, "a") }, clientlib.ErrCacheMiss},
				{"expired", func() error {
					if err := c.Set(ctx, &clientlib.Item{Key: "gone", Value: []byte("x"), TTL: -time.Second}); err != nil {
						return err
					}
					_, err := c.Get(ctx, "gone")
					return err
				}, clientlib.ErrCacheMiss},
				{"version", func() error {
					v, err := c.Version(ctx)
					if err == nil && v[p.Addr] == "" {
						err = fmt.Errorf("version = %v", v)
					}
					return err
				}, nil},
				{"stats", func() error {
					s, err := c.ServerStats(ctx, "")
					if err == nil && s[p.Addr]["curr_items"] == "" {
						err = fmt.Errorf("stats = %v", s)
					}
					return err
				}, nil},
				{"flush_all", func() error {
					if err := c.FlushAll(ctx); err != nil {
						return err
					}
					_, err := c.Get(ctx, "b")
					return err
				}, clientlib.ErrCacheMiss},
			}
			for _, s := range steps {
				err := s.run()
				if (s.want == nil && err != nil) || (s.want != nil && !errors.Is(err, s.want)) {
					t.Errorf("%s: err = %v, want %v", s.name, err, s.want)
				}
			}
		})
	}
}

func expectValue(c *clientlib.Client, ctx context.Context, key, want string) error {
	it, err := c.Get(ctx, key)
	if err != nil {
		return err
	}
	if string(it.Value) != want || it.Flags != 42 {
		return fmt.Errorf("get %s = %q flags %d, want %q flags 42", key, it.Value, it.Flags, want)
	}
	return nil
}

func expectArith(_ uint64, err error) error { return err }

func TestMetaCommands(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			p := be.start(t)
			c := newClient(t, clientlib.Config{}, p.Addr)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			F := clientlib.MetaFlags{}
			if _, err := c.MetaSet(ctx, "m", []byte("hello"), F.SetTTL(100).SetClientFlags(5)); err != nil {
				t.Fatalf("ms: %v", err)
			}
			r, err := c.MetaGet(ctx, "m", F.ReturnValue().ReturnCAS().ReturnFlags().ReturnTTL())
			if err != nil || r.Status != "VA" || string(r.Value) != "hello" || r.ClientFlags() != 5 || r.CAS() == 0 || r.TTL() <= 0 {
				t.Fatalf("mg = %+v, %v", r, err)
			}
			if _, err := c.MetaSet(ctx, "m", []byte("x"), F.CompareCAS(r.CAS()+1000)); !errors.Is(err, clientlib.ErrCASConflict) {
				t.Errorf("ms with stale CAS: %v", err)
			}
			if _, err := c.MetaSet(ctx, "m", []byte("x"), F.Mode('E')); !errors.Is(err, clientlib.ErrNotStored) {
				t.Errorf("ms add-mode on existing key: %v", err)
			}
			if _, err := c.MetaGet(ctx, "none", F.ReturnValue()); !errors.Is(err, clientlib.ErrCacheMiss) {
				t.Errorf("mg miss: %v", err)
			}
			if _, err := c.MetaGet(ctx, "none", F.ReturnValue().Quiet()); !errors.Is(err, clientlib.ErrCacheMiss) {
				t.Errorf("quiet mg miss: %v", err)
			}
			if r, err := c.MetaSet(ctx, "q", []byte("v"), F.Quiet()); err != nil || r.Status != "HD" {
				t.Errorf("quiet ms: %+v %v", r, err)
			}
			// Vivify on miss: the first client wins the recache, the next sees Z (already won).
			r1, err1 := c.MetaGet(ctx, "viv", F.ReturnValue().Vivify(30))
			r2, err2 := c.MetaGet(ctx, "viv", F.ReturnValue().Vivify(30))
			if err1 != nil || err2 != nil || !r1.Won() || r2.Won() || !r2.AlreadyWon() {
				t.Errorf("vivify: %+v %v / %+v %v", r1, err1, r2, err2)
			}
			// md with I marks stale: the next mg returns the value with X and W.
			if _, err := c.MetaDelete(ctx, "m", F.Invalidate()); err != nil {
				t.Errorf("md I: %v", err)
			}
			if r, err := c.MetaGet(ctx, "m", F.ReturnValue()); err != nil || !r.Stale() || !r.Won() {
				t.Errorf("mg after md I: %+v %v", r, err)
			}
			if _, err := c.MetaDelete(ctx, "none", F); !errors.Is(err, clientlib.ErrCacheMiss) {
				t.Errorf("md miss: %v", err)
			}
			if _, err := c.MetaArithmetic(ctx, "ctr", F.Vivify(0).Initial(10).ReturnValue()); err != nil {
				t.Errorf("ma autoviv: %v", err)
			}
			if r, err := c.MetaArithmetic(ctx, "ctr", F.Delta(5).ReturnValue()); err != nil || string(r.Value) != "15" {
				t.Errorf("ma incr: %+v %v", r, err)
			}
			if r, err := c.MetaArithmetic(ctx, "ctr", F.Mode('D').Delta(20).ReturnValue()); err != nil || string(r.Value) != "0" {
				t.Errorf("ma decr: %+v %v", r, err)
			}
			if _, err := c.MetaArithmetic(ctx, "none", F); !errors.Is(err, clientlib.ErrCacheMiss) {
				t.Errorf("ma miss: %v", err)
			}
			if err := c.Ping(ctx); err != nil {
				t.Errorf("ping: %v", err)
			}
		})
	}
}

// TestLeaseFlows exercises lease-get / lease-set against leasecached (doc/leases.md).
func TestLeaseFlows(t *testing.T) {
	p := startLeasecached(t)
	c := newClient(t, clientlib.Config{}, p.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	r, err := c.LeaseGet(ctx, "k")
	if err != nil || r.Status != clientlib.LeaseGranted || r.Token < 2 || r.Item != nil {
		t.Fatalf("first lease-get on a missing key = %+v, %v; want a grant", r, err)
	}
	token := r.Token
	if r, err := c.LeaseGet(ctx, "k"); err != nil || r.Status != clientlib.LeaseHotMiss {
		t.Fatalf("second lease-get = %+v, %v; want a hot miss", r, err)
	}
	if err := c.LeaseSet(ctx, &clientlib.Item{Key: "k", Value: []byte("v1"), Flags: 3}, token); err != nil {
		t.Fatalf("lease-set with the granted token: %v", err)
	}
	if err := c.LeaseSet(ctx, &clientlib.Item{Key: "k", Value: []byte("again")}, token); !errors.Is(err, clientlib.ErrNotStored) {
		t.Fatalf("second lease-set with a consumed token: %v", err)
	}
	if r, err := c.LeaseGet(ctx, "k"); err != nil || r.Status != clientlib.LeaseHit || string(r.Item.Value) != "v1" || r.Item.Flags != 3 {
		t.Fatalf("lease-get after lease-set = %+v, %v; want a hit on v1", r, err)
	}
	// Delete: the next lease-get is granted and carries the stale value.
	if err := c.Delete(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	r, err = c.LeaseGet(ctx, "k")
	if err != nil || r.Status != clientlib.LeaseGranted || r.Item == nil || string(r.Item.Value) != "v1" {
		t.Fatalf("lease-get after delete = %+v, %v; want a grant with stale v1", r, err)
	}
	// Stale set: a write between grant and lease-set invalidates the token.
	if err := c.Set(ctx, &clientlib.Item{Key: "k", Value: []byte("newer")}); err != nil {
		t.Fatal(err)
	}
	if err := c.LeaseSet(ctx, &clientlib.Item{Key: "k", Value: []byte("older")}, r.Token); !errors.Is(err, clientlib.ErrNotStored) {
		t.Fatalf("lease-set after an invalidating set: %v, want ErrNotStored", err)
	}
	if it, err := c.Get(ctx, "k"); err != nil || string(it.Value) != "newer" {
		t.Fatalf("stale set overwrote the newer value: %v %v", it, err)
	}
	// A plain get never shows the stale value.
	_ = c.Delete(ctx, "k")
	if _, err := c.Get(ctx, "k"); !errors.Is(err, clientlib.ErrCacheMiss) {
		t.Fatalf("get after delete: %v", err)
	}

	// GetOrFill end to end: 30 concurrent callers, one fill, then hits.
	var fills atomic.Int64
	fill := func(ctx context.Context, key string) ([]byte, error) {
		fills.Add(1)
		time.Sleep(50 * time.Millisecond)
		return []byte("from-source"), nil
	}
	var wg sync.WaitGroup
	for range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := c.GetOrFill(ctx, "gof", fill, &clientlib.FillOptions{TTL: time.Minute})
			if err != nil || string(v.Data) != "from-source" {
				t.Errorf("GetOrFill = %q %v", v.Data, err)
			}
		}()
	}
	wg.Wait()
	if v, err := c.GetOrFill(ctx, "gof", fill, nil); err != nil || v.Source != clientlib.SourceCache {
		t.Fatalf("GetOrFill after fill = %+v %v, want a cache hit", v, err)
	}
	if n := fills.Load(); n != 1 {
		t.Fatalf("fills = %d, want 1", n)
	}
	// Two clients (as two processes would be): the second waits on the first's lease.
	other := newClient(t, clientlib.Config{}, p.Addr)
	_ = c.Delete(ctx, "gof2")
	fills.Store(0)
	wg.Add(2)
	for _, cl := range []*clientlib.Client{c, other} {
		go func() {
			defer wg.Done()
			if _, err := cl.GetOrFill(ctx, "gof2", fill, nil); err != nil {
				t.Errorf("GetOrFill: %v", err)
			}
		}()
	}
	wg.Wait()
	if n := fills.Load(); n != 1 {
		t.Fatalf("two clients filled %d times, want 1 (the lease holder only)", n)
	}
}

// TestServerKilledMidRequest: with three servers under load, one is SIGKILLed. Requests to it fail
// (never with a wrong answer), it is ejected, its keys move to the survivors, and callers whose keys
// live on the other servers keep getting answers, quickly, throughout.
func TestServerKilledMidRequest(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) { testServerKilled(t, be.start) })
	}
}

func testServerKilled(t *testing.T, start func(testing.TB) *proc) {
	procs := []*proc{start(t), start(t), start(t)}
	addrs := []string{procs[0].Addr, procs[1].Addr, procs[2].Addr}
	c := newClient(t, clientlib.Config{Timeout: 500 * time.Millisecond, RetryInterval: time.Minute}, addrs...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	victim := procs[1].Addr
	keysOn := map[string][]string{}
	for i := 0; len(keysOn[victim]) < 20 || len(keysOn[addrs[0]]) < 20 || len(keysOn[addrs[2]]) < 20; i++ {
		k := "key:" + strconv.Itoa(i)
		a, _ := c.ServerFor(k)
		keysOn[a] = append(keysOn[a], k)
	}
	for _, ks := range keysOn {
		for _, k := range ks {
			if err := c.Set(ctx, &clientlib.Item{Key: k, Value: []byte(k)}); err != nil {
				t.Fatal(err)
			}
		}
	}

	// Hammer the victim's keys from several goroutines, then kill it while requests are in flight.
	var victimErrs, victimOK, wrong atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100000; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := keysOn[victim][(g+i)%len(keysOn[victim])]
				it, err := c.Get(ctx, k)
				switch {
				case err == nil && string(it.Value) != k:
					wrong.Add(1)
				case err == nil:
					victimOK.Add(1)
				case errors.Is(err, clientlib.ErrCacheMiss): // after ejection the key moved to an empty server
				default:
					victimErrs.Add(1)
				}
			}
		}()
	}
	waitUntil(t, 5*time.Second, func() bool { return victimOK.Load() > 200 })
	procs[1].Kill()
	waitUntil(t, 5*time.Second, func() bool { return c.Stats().Servers[1].Ejected })

	// Survivors keep answering, fast, while the victim is out.
	for _, a := range []string{addrs[0], addrs[2]} {
		for _, k := range keysOn[a] {
			start := time.Now()
			it, err := c.Get(ctx, k)
			if err != nil || string(it.Value) != k {
				t.Fatalf("key %s on surviving %s: %v %v", k, a, it, err)
			}
			// One that waited on the dead server would have taken its Timeout (500 ms); a loaded machine
			// under -race can take a few hundred ms for anything.
			if el := time.Since(start); el >= 500*time.Millisecond {
				t.Fatalf("request to a healthy server took %v: as long as a request to the dead one", el)
			}
		}
	}
	close(stop)
	wg.Wait()
	if wrong.Load() != 0 {
		t.Fatalf("%d requests got another key's value", wrong.Load())
	}
	if victimErrs.Load() == 0 {
		t.Fatalf("no request saw the kill")
	}
	if a, _ := c.ServerFor(keysOn[victim][0]); a == victim {
		t.Fatalf("victim still in the ring")
	}
	h := c.Stats().Servers[1]
	t.Logf("victim: %d ok before the kill, %d errors, health %+v", victimOK.Load(), victimErrs.Load(), h)
}

func waitUntil(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestGetOrFillFailuresAgainstServer runs GetOrFill's failure paths against the real server: a deadline
// that ends during a hot-miss wait, a fill that errors (never cached, the lease left to lapse or be
// retaken), and a fill that hangs past its timeout.
func TestGetOrFillFailuresAgainstServer(t *testing.T) {
	p := startLeasecached(t)
	c := newClient(t, clientlib.Config{}, p.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	never := func(context.Context, string) ([]byte, error) {
		t.Error("fill called while another client holds the lease")
		return nil, errors.New("unexpected fill")
	}

	t.Run("deadline during a hot-miss wait", func(t *testing.T) {
		// Another process holds the lease (taken here with a raw lease-get), so GetOrFill must wait.
		if r, err := c.LeaseGet(ctx, "held"); err != nil || r.Status != clientlib.LeaseGranted {
			t.Fatalf("taking the lease: %+v %v", r, err)
		}
		// Half the deadline bounds each lease-get (GetOrFill): a second leaves a loaded machine room.
		wctx, wcancel := context.WithTimeout(ctx, time.Second)
		defer wcancel()
		start := time.Now()
		_, err := c.GetOrFill(wctx, "held", never, &clientlib.FillOptions{MaxWait: 5 * time.Second, Fallback: clientlib.FallbackError})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("GetOrFill = %v, want the caller's deadline", err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("returned %v after a 1 s deadline (the wait is up to 5 s)", d)
		}
		if c.Stats().HotMissWaits == 0 {
			t.Fatal("no hot-miss wait counted")
		}
	})

	t.Run("fill error is returned and never cached", func(t *testing.T) {
		boom := errors.New("source down")
		_, err := c.GetOrFill(ctx, "fails", func(context.Context, string) ([]byte, error) { return nil, boom }, nil)
		if !errors.Is(err, boom) {
			t.Fatalf("GetOrFill = %v, want the fill's error", err)
		}
		if _, err := c.Get(ctx, "fails"); !errors.Is(err, clientlib.ErrCacheMiss) {
			t.Fatalf("after a failed fill the key is cached: %v", err)
		}
		// The next caller (still within the failed holder's lease window) must not see the error as a
		// value; with FallbackFill it reads the source itself once the wait runs out.
		v, err := c.GetOrFill(ctx, "fails", func(context.Context, string) ([]byte, error) { return []byte("ok"), nil },
			&clientlib.FillOptions{MaxWait: 100 * time.Millisecond, Fallback: clientlib.FallbackFill})
		if err != nil || string(v.Data) != "ok" {
			t.Fatalf("GetOrFill after a failed fill = %+v %v", v, err)
		}
	})

	t.Run("fill that hangs is cut off by the fill timeout", func(t *testing.T) {
		start := time.Now()
		_, err := c.GetOrFill(ctx, "hangs", func(fctx context.Context, _ string) ([]byte, error) {
			<-fctx.Done()
			return nil, fctx.Err()
		}, &clientlib.FillOptions{FillTimeout: 100 * time.Millisecond, Fallback: clientlib.FallbackError})
		if err == nil {
			t.Fatal("a hanging fill returned no error")
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("hanging fill held the caller for %v with a 100 ms fill timeout", d)
		}
		if _, err := c.Get(ctx, "hangs"); !errors.Is(err, clientlib.ErrCacheMiss) {
			t.Fatalf("after a timed-out fill the key is cached: %v", err)
		}
	})
}
