package clientlib_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasecached/leasecached/clientlib"
	"github.com/stretchr/testify/require"
)

// The early refresh test: one hot key, read without pause by many goroutines spread over several
// Clients (each a process of its own as far as the cache can tell: its own connections, single-flight and
// fill times), while the key's TTL runs out again and again. Each fill is slow.
const (
	earlyClients    = 4
	earlyGoroutines = 25                     // per client
	earlyTTL        = 3 * time.Second        // whole seconds: an item lives between 2 and 3 s
	earlyFillTime   = 400 * time.Millisecond // a reader that waited for a fill would take at least this
	earlyRun        = 7 * time.Second
)

type earlyResult struct {
	calls, errors int
	fills         []time.Time    // fill starts, in order
	afterWarmUp   map[string]int // sources of the calls after warm-up
	slowest       time.Duration  // slowest call after warm-up
	// foreground counts fills after warm-up that ended while the reader whose call started them was still
	// in that call: a reader that waited for its own refresh.
	foreground     int
	waits          uint64 // hot-miss waits after warm-up, all clients
	early, stored  uint64 // early refreshes won, conditional writes stored
	rejected       uint64
	serverMisses   int // get_misses the server counted after warm-up
	duplicateFills int // fills that started less than a fill time after the one before (one refresh, two fills)
}

func (r earlyResult) String() string {
	gaps := make([]string, 0, len(r.fills))
	for i := 1; i < len(r.fills) && i <= 20; i++ {
		gaps = append(gaps, r.fills[i].Sub(r.fills[i-1]).Round(10*time.Millisecond).String())
	}
	return fmt.Sprintf("%d calls, %d errors, %d fills (gaps between starts, up to 20: %v), %d duplicate fills, sources after warm-up %v, "+
		"slowest call after warm-up %v, %d fills waited for, %d hot-miss waits, %d early refreshes won, %d writes stored, %d rejected, "+
		"%d server misses after warm-up", r.calls, r.errors, len(r.fills), gaps, r.duplicateFills, r.afterWarmUp,
		r.slowest.Round(time.Millisecond), r.foreground, r.waits, r.early, r.stored, r.rejected, r.serverMisses)
}

// earlyCall identifies a reader's call in its context: the reader's call counter and its value during the call.
type earlyCall struct {
	seq *atomic.Int64
	at  int64
}

type earlyCallKey struct{}

// runEarly runs the load against addr with the given EarlyRefresh and reports what readers and the
// source saw.
func runEarly(t *testing.T, addr string, beta float64) earlyResult {
	t.Helper()
	const key = "hot"
	var mu sync.Mutex
	res := earlyResult{afterWarmUp: map[string]int{}}
	end := time.Now().Add(earlyRun)
	// warmAt is when the warm-up ended (the first fill's value was cached; set below), in unix
	// nanoseconds: 0 until then, when nothing is after it.
	var warmAt atomic.Int64
	afterWarmUp := func(at time.Time) bool { w := warmAt.Load(); return w != 0 && at.UnixNano() > w }
	fill := func(ctx context.Context, k string) ([]byte, error) {
		began := time.Now()
		mu.Lock()
		res.fills = append(res.fills, began)
		n := len(res.fills)
		mu.Unlock()
		select {
		case <-time.After(earlyFillTime):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		// The call that started this fill: is its reader still in it? (Its calls are numbered: odd while in one.)
		if c, ok := ctx.Value(earlyCallKey{}).(earlyCall); ok && afterWarmUp(began) && c.seq.Load() == c.at {
			mu.Lock()
			res.foreground++
			mu.Unlock()
		}
		return []byte("value " + strconv.Itoa(n)), nil
	}
	clients := make([]*clientlib.Client, earlyClients)
	for i := range clients {
		clients[i] = newClient(t, clientlib.Config{Fill: clientlib.FillOptions{TTL: earlyTTL, EarlyRefresh: beta}}, addr)
	}
	misses := func() int {
		s, err := clients[0].ServerStats(context.Background(), "")
		require.NoError(t, err)
		n, _ := strconv.Atoi(s[addr]["get_misses"])
		return n
	}
	var wg sync.WaitGroup
	for _, c := range clients {
		for range earlyGoroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var seq atomic.Int64
				for time.Now().Before(end) {
					at := seq.Add(1) // odd: in a call
					ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), earlyCallKey{},
						earlyCall{seq: &seq, at: at}), 5*time.Second)
					t0 := time.Now()
					v, err := c.GetOrFill(ctx, key, fill, nil)
					took := time.Since(t0)
					seq.Add(1)
					cancel()
					mu.Lock()
					res.calls++
					if err != nil {
						res.errors++
					}
					if afterWarmUp(t0) {
						res.afterWarmUp[v.Source.String()]++
						res.slowest = max(res.slowest, took)
					}
					mu.Unlock()
					time.Sleep(100 * time.Microsecond) // a service does other work between reads
				}
			}()
		}
	}
	// The first fill (a miss, waited for by every reader) is over once a plain read finds its value (not
	// the empty item memcached's mg N creates for the fill).
	require.Eventually(t, func() bool {
		it, err := clients[0].Get(context.Background(), key)
		return err == nil && it != nil && strings.HasPrefix(string(it.Value), "value ")
	}, 10*time.Second, 10*time.Millisecond, "the first fill's value never reached the cache")
	missesAtWarmUp := misses()
	var waitsAtWarmUp uint64
	for _, c := range clients {
		waitsAtWarmUp += c.Stats().HotMissWaits
	}
	warmAt.Store(time.Now().UnixNano())
	wg.Wait()
	res.serverMisses = misses() - missesAtWarmUp
	res.waits -= waitsAtWarmUp
	for _, c := range clients {
		require.NoError(t, c.Close()) // waits for refreshes in flight
		s := c.Stats()
		res.waits += s.HotMissWaits
		res.early += s.EarlyRefreshes
		res.stored += s.LeaseSetsStored
		res.rejected += s.LeaseSetsRejected
	}
	sort.Slice(res.fills, func(i, j int) bool { return res.fills[i].Before(res.fills[j]) })
	for i := 1; i < len(res.fills); i++ {
		if res.fills[i].Sub(res.fills[i-1]) < earlyFillTime {
			res.duplicateFills++
		}
	}
	return res
}

// TestEarlyRefresh: with EarlyRefresh, a hot key read by 100 goroutines over 4 clients is refreshed
// before it expires, by one fill per refresh in the whole fleet, and after the first fill no reader
// misses, waits, or gets anything but the cached value; against leasecached (mg R, then ms C) and against
// memcached 1.6.18 (the same meta commands). Without it, the same load misses at every expiry: the
// readers wait for the fill (hot-miss waits), and the one that filled returns its fill.
func TestEarlyRefresh(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Run("on", func(t *testing.T) {
				res := runEarly(t, be.start(t).Addr, 1)
				t.Logf("%s, EarlyRefresh 1: %s", be.name, res)
				require.Zero(t, res.errors, "GetOrFill errors")
				require.Zero(t, res.duplicateFills, "fills less than a fill time apart: two fills for one refresh")
				// The first fill, then one per refresh: the item lives 2-3 s and is refreshed in its last
				// second at the latest, so over 7 s at least 2 refreshes. How much earlier is XFetch's: its
				// lead grows with delta*beta*ln(reads), and these readers ask tens of thousands of times a
				// second, so a refresh may follow the previous one by little more than a fill; what must
				// hold is that each refresh is one fill (no two fills start within a fill time).
				require.GreaterOrEqual(t, len(res.fills), 3, "fills: the key was not refreshed")
				require.Equal(t, uint64(len(res.fills)-1), res.early, "every fill but the first is an early refresh won by one reader")
				require.Equal(t, uint64(len(res.fills)), res.stored+res.rejected, "each fill's conditional write")
				require.Equal(t, map[string]int{"cache": res.afterWarmUp["cache"]}, res.afterWarmUp,
					"after warm-up every reader gets the cached value")
				require.Zero(t, res.waits, "hot-miss waits: a reader waited for a fill")
				require.Zero(t, res.serverMisses, "misses the server counted after warm-up")
				// Not the slowest call against the fill time: on a loaded machine a call can take that long
				// without waiting for anything (482 ms against 400 in one run). Whether the reader that won a
				// refresh waited for it is what matters.
				require.Zero(t, res.foreground, "a reader waited for the refresh it started")
			})
			t.Run("off", func(t *testing.T) {
				res := runEarly(t, be.start(t).Addr, 0)
				t.Logf("%s, EarlyRefresh off: %s", be.name, res)
				require.Zero(t, res.errors, "GetOrFill errors")
				require.Zero(t, res.duplicateFills, "one fill per expiry")
				require.Zero(t, res.early, "early refreshes with EarlyRefresh off")
				require.Positive(t, res.afterWarmUp["fill"], "no reader got a fill after warm-up: the key never expired under load")
				require.Positive(t, res.waits, "no reader waited for a fill at an expiry")
				if be.name == "leasecached" { // memcached does not count an mg N that creates the key as a miss
					require.Positive(t, res.serverMisses, "the server counted no miss")
				}
			})
		})
	}
}
