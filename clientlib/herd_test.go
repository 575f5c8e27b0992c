package clientlib_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
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

// The fleet herd test: several client processes hammer a few hot keys that keep expiring while each
// fill is slow. Every fill, in any process, is reported to the parent, which plays the source of
// truth. With leases there must be one fill per key per expiry in the whole fleet.
const (
	herdChildEnv     = "CLIENTLIB_HERD_CHILD"  // set in a child: its value is the server list
	herdRunEnv       = "CLIENTLIB_HERD_RUN"    // how long a child runs
	herdProcesses    = 4                       // client processes
	herdGoroutines   = 50                      // goroutines per process
	herdKeys         = 20                      // hot keys
	herdTTL          = 2 * time.Second         // short TTL: each key expires about every 2 s
	herdFillTime     = 100 * time.Millisecond  // a slow source
	herdRun          = 4500 * time.Millisecond // load duration in each child
	herdMaxCalls     = 200000                  // per goroutine, so the loop is bounded by count too
	herdCallTimeout  = 2 * time.Second         // each GetOrFill's deadline
	herdChildTimeout = 30 * time.Second        // the parent kills a child that runs longer
	// herdMinFillGap: two fills of a key closer than this were one expiry's herd. Exptimes are whole
	// seconds (memcached's clock), so an item stored with TTL 2 s lives between 1 and 2 s: the gap
	// between legitimate fills can be as short as herdTTL-1s, while a herd's fills land within a fill
	// time of each other.
	herdMinFillGap = herdTTL - time.Second - 300*time.Millisecond
)

// TestFleetHerd: 3 servers, 4 client processes of 50 goroutines, 20 hot keys with a 2 s TTL, fills of
// 100 ms: one fill per key per expiry in the whole fleet, against leasecached (leases) and against
// memcached 1.6 (meta commands: mg N, ms C), and no server ejected.
func TestFleetHerd(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			servers := []*proc{be.start(t), be.start(t), be.start(t)}
			res := runHerd(t, procAddrs(servers))
			t.Logf("%s: %s", be.name, res)
			require.NotZero(t, res.stored, "no conditional write was stored: the server granted no lease or recache flag")
			require.Zero(t, res.duplicates, "fills that were duplicates within one expiry (want one fill per key per expiry)")
			require.Zero(t, res.errors, "GetOrFill calls that failed")
			require.Zero(t, res.ejections, "servers ejected")
			// Expect about one fill per key per TTL over the run, plus the first one.
			maxFills := herdKeys * (int(herdRun/herdTTL) + 2)
			require.True(t, res.fills >= herdKeys && res.fills <= maxFills, "%d fills for %d keys over %v with TTL %v, want %d..%d",
				res.fills, herdKeys, herdRun, herdTTL, herdKeys, maxFills)
		})
	}
}

// TestFleetHerdThroughTwemproxy is the control: twemproxy passes neither lease-get nor meta commands (it
// closes the connection on them), so GetOrFill uses gets, fill and set with in-process single-flight
// only, and the same load fills keys once per process per expiry. It shows the herd test can see a herd,
// and that learning what the proxy speaks ejects nothing.
func TestFleetHerdThroughTwemproxy(t *testing.T) {
	if testing.Short() {
		t.Skip("control experiment")
	}
	proxy := startNutcracker(t, startMemcached(t), startMemcached(t), startMemcached(t))
	res := runHerd(t, []string{proxy})
	t.Logf("twemproxy: %s", res)
	require.NotZero(t, res.duplicates, "no duplicate fills without leases: the herd test cannot detect a herd")
	require.Zero(t, res.errors, "GetOrFill calls that failed")
	require.Zero(t, res.ejections, "proxy ejected")
}

func procAddrs(ps []*proc) []string {
	addrs := make([]string, len(ps))
	for i, p := range ps {
		addrs[i] = p.Addr
	}
	return addrs
}

type herdResult struct {
	calls, errors, fills, duplicates int
	expiries                         int // fills more than herdMinFillGap after the key's previous fill
	perProcess                       []int
	coalesced, waits                 int
	fallbacks, stored, rejected      int
	ejections                        int
}

// perExpiry is the source's load: fills (database calls) per expiry of a key.
func (r herdResult) perExpiry() float64 {
	if r.expiries == 0 {
		return 0
	}
	return float64(r.fills) / float64(r.expiries)
}

func (r herdResult) String() string {
	return fmt.Sprintf("%.2f database calls per expiry (%d fills, %d expiries); "+
		"%d GetOrFill calls by %d processes x %d goroutines on %d keys, %d fills in total "+
		"(per process %v), %d duplicate fills within one expiry, %d calls coalesced in-process, %d hot-miss waits, "+
		"%d fallbacks, %d conditional writes stored, %d rejected, %d errors, %d ejections",
		r.perExpiry(), r.fills, r.expiries, r.calls, herdProcesses, herdGoroutines, herdKeys, r.fills, r.perProcess, r.duplicates, r.coalesced, r.waits,
		r.fallbacks, r.stored, r.rejected, r.errors, r.ejections)
}

func runHerd(t *testing.T, addrs []string) herdResult {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), herdChildTimeout)
	defer cancel()
	fills := map[string][]time.Time{} // key -> fill start times, across the fleet
	res := herdResult{perProcess: make([]int, herdProcesses)}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for p := range herdProcesses {
		cmd := exec.CommandContext(ctx, self, "-test.run=^$")
		cmd.Env = append(os.Environ(), herdChildEnv+"="+strings.Join(addrs, ","), herdRunEnv+"="+herdRun.String())
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				f := strings.Fields(sc.Text())
				mu.Lock()
				switch {
				case len(f) == 3 && f[0] == "FILL":
					ns, _ := strconv.ParseInt(f[2], 10, 64)
					fills[f[1]] = append(fills[f[1]], time.Unix(0, ns))
					res.fills++
					res.perProcess[p]++
				case len(f) == 9 && f[0] == "DONE":
					res.calls += atoi(f[1])
					res.errors += atoi(f[2])
					res.coalesced += atoi(f[3])
					res.waits += atoi(f[4])
					res.fallbacks += atoi(f[5])
					res.stored += atoi(f[6])
					res.rejected += atoi(f[7])
					res.ejections += atoi(f[8])
				}
				mu.Unlock()
			}
			if err := cmd.Wait(); err != nil {
				t.Errorf("herd child %d: %v", p, err)
			}
		}()
	}
	wg.Wait()
	for _, times := range fills {
		sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
		res.expiries++
		for i := 1; i < len(times); i++ {
			if times[i].Sub(times[i-1]) < herdMinFillGap {
				res.duplicates++
			} else {
				res.expiries++
			}
		}
	}
	return res
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// runHerdChild is a client process of the herd test. It prints "FILL <key> <unix-ns>" for each fill
// it runs and, at the end, "DONE <calls> <errors> <coalesced> <hot-miss waits> <fallbacks> <conditional
// writes stored> <rejected> <ejections>".
func runHerdChild() int {
	run, err := time.ParseDuration(os.Getenv(herdRunEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "herd child:", err)
		return 2
	}
	c, err := clientlib.NewFromAddrs(strings.Split(os.Getenv(herdChildEnv), ",")...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "herd child:", err)
		return 2
	}
	defer c.Close()
	var outMu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	fill := func(ctx context.Context, key string) ([]byte, error) {
		var line bytes.Buffer
		fmt.Fprintf(&line, "FILL %s %d\n", key, time.Now().UnixNano())
		outMu.Lock()
		out.Write(line.Bytes())
		outMu.Unlock()
		select {
		case <-time.After(herdFillTime):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return []byte("value of " + key), nil
	}
	opts := &clientlib.FillOptions{TTL: herdTTL}
	var calls, errs atomic.Int64
	end := time.Now().Add(run)
	var wg sync.WaitGroup
	for range herdGoroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < herdMaxCalls && time.Now().Before(end); i++ {
				key := "hot:" + strconv.Itoa(rand.IntN(herdKeys))
				ctx, cancel := context.WithTimeout(context.Background(), herdCallTimeout)
				v, err := c.GetOrFill(ctx, key, fill, opts)
				cancel()
				calls.Add(1)
				if err != nil || string(v.Data) != "value of "+key {
					errs.Add(1)
					fmt.Fprintln(os.Stderr, "herd child: GetOrFill:", key, err)
				}
				time.Sleep(time.Millisecond) // a service does other work between reads
			}
		}()
	}
	wg.Wait()
	s := c.Stats()
	ejections := uint64(0)
	for _, h := range s.Servers {
		ejections += h.Ejections
	}
	outMu.Lock()
	fmt.Fprintf(out, "DONE %d %d %d %d %d %d %d %d\n", calls.Load(), errs.Load(), s.CallersCoalesced, s.HotMissWaits,
		s.Fallbacks, s.LeaseSetsStored, s.LeaseSetsRejected, ejections)
	out.Flush()
	outMu.Unlock()
	return 0
}
