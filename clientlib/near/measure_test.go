package near

import (
	"bufio"
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasecached/leasecached/clientlib"
	"github.com/stretchr/testify/require"
)

// TestMeasure reports the two numbers of doc/design/near-cache.md against real leasecached. It takes
// several seconds and asserts no timings, so it runs only with NEAR_MEASURE=1:
//
//	NEAR_MEASURE=1 go test -count=1 -run TestMeasure -v ./clientlib/near/
func TestMeasure(t *testing.T) {
	if os.Getenv("NEAR_MEASURE") == "" {
		t.Skip("set NEAR_MEASURE=1")
	}
	d := startLeasecached(t)
	ctx := context.Background()
	writer := newClient(t, d.Addr)
	// The other half of the reads spread over 100,000 keys that are not stored: misses are never
	// copied, so every cold read reaches the server and the hot key's server reads are exact.
	const cold = 100000
	set(t, writer, "hot", "w0")
	nc := newNear(t, newClient(t, d.Addr), Config{}) // the defaults: TTL 1 s, 16 reads a second

	t.Run("server share of the hot key's reads", func(t *testing.T) {
		serverGets := func() int {
			st, err := writer.ServerStats(ctx, "")
			require.NoError(t, err)
			n, _ := strconv.Atoi(st[d.Addr]["cmd_get"])
			return n
		}
		before, s0 := serverGets(), nc.Stats()
		var hotReads, coldReads atomic.Int64
		deadline := time.Now().Add(3 * time.Second)
		var wg sync.WaitGroup
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; time.Now().Before(deadline); i++ {
					key := "hot"
					if i%2 == 1 {
						key = "cold" + strconv.Itoa(rand.IntN(cold))
						coldReads.Add(1)
					} else {
						hotReads.Add(1)
					}
					if _, err := nc.Get(ctx, key); err != nil && !errors.Is(err, clientlib.ErrCacheMiss) {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		s1 := nc.Stats()
		misses := s1.Misses - s0.Misses
		hotAtServer := misses - coldReads.Load()
		byServer := int64(serverGets()-before) - coldReads.Load()
		t.Logf("reads: hot %d, cold %d; near hits %d (all of the hot key: misses are never copied), fills %d",
			hotReads.Load(), coldReads.Load(), s1.Hits-s0.Hits, s1.Fills-s0.Fills)
		t.Logf("hot key reads that reached the server: %d by the near-cache's misses, %d by the server's cmd_get: %.4f%% of %d",
			hotAtServer, byServer, 100*float64(byServer)/float64(hotReads.Load()), hotReads.Load())
	})

	for _, readers := range []int{8, 1} {
		t.Run("write to visible by "+strconv.Itoa(readers)+" readers", func(t *testing.T) {
			writeToVisible(t, nc, writer, readers)
		})
	}
}

// writeToVisible times 50 writes by another client, each from just before its set is sent to the
// first of readers goroutines (reading the key through nc in a loop) that sees the new value. Each
// value names its write, and each write has its own slot for the time it was first seen, so a reader
// late with an old value cannot be taken for a sighting of the new one.
func writeToVisible(t *testing.T, nc *Cache, writer *clientlib.Client, readers int) {
	ctx := context.Background()
	const writes = 50
	prefix := "r" + strconv.Itoa(readers) + "-"
	var (
		seen  [writes + 1]atomic.Int64 // unix ns when write i's value was first read
		begun [writes + 1]int64        // unix ns just before write i's set was sent
		stop  atomic.Bool
		wg    sync.WaitGroup
	)
	for g := 0; g < readers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				it, err := nc.Get(ctx, "hot")
				if err != nil {
					continue
				}
				rest, ok := strings.CutPrefix(string(it.Value), prefix)
				if i, err := strconv.Atoi(rest); ok && err == nil && i > 0 && i <= writes {
					seen[i].CompareAndSwap(0, time.Now().UnixNano())
				}
			}
		}()
	}
	var lat, setDur, invDur []time.Duration
	for i := 1; i <= writes; i++ {
		time.Sleep(100 * time.Millisecond) // let the readers copy the last value again
		inv0 := nc.invalidations.Load()
		begun[i] = time.Now().UnixNano()
		require.NoError(t, writer.Set(ctx, &clientlib.Item{Key: "hot", Value: []byte(prefix + strconv.Itoa(i))}))
		setDur = append(setDur, time.Duration(time.Now().UnixNano()-begun[i]))
		for j := 0; j < 2000 && nc.invalidations.Load() == inv0; j++ {
			time.Sleep(100 * time.Microsecond)
		}
		invDur = append(invDur, time.Duration(time.Now().UnixNano()-begun[i]))
		for j := 0; j < 2000 && seen[i].Load() == 0; j++ {
			time.Sleep(time.Millisecond)
		}
		require.NotZero(t, seen[i].Load(), "write %d never seen", i)
		lat = append(lat, time.Duration(seen[i].Load()-begun[i]))
	}
	stop.Store(true)
	wg.Wait()
	for _, d := range [][]time.Duration{lat, setDur, invDur} {
		slices.Sort(d)
	}
	t.Logf("the set's own round trip: p50 %v, max %v", setDur[writes/2], setDur[writes-1])
	t.Logf("to the copy's invalidation (writer polling every 100µs): p50 %v, max %v", invDur[writes/2], invDur[writes-1])
	t.Logf("write by another client to near-cache readers seeing it, %d writes: p50 %v, p90 %v, max %v (TTL %v)",
		writes, lat[writes/2], lat[writes*9/10], lat[writes-1], nc.cfg.TTL)
	t.Logf("near stats: %+v", nc.Stats())
}

// TestMeasureStream times the server's stream alone: from just before a set is sent by one client to
// its item_store line arriving on a bare "watch mutations deletions" connection (same pacing as
// writeToVisible), so the near-cache's share of the delay can be told apart.
func TestMeasureStream(t *testing.T) {
	if os.Getenv("NEAR_MEASURE") == "" {
		t.Skip("set NEAR_MEASURE=1")
	}
	d := startLeasecached(t)
	writer := newClient(t, d.Addr)
	conn, err := net.Dial("tcp", d.Addr)
	require.NoError(t, err)
	defer conn.Close()
	r := bufio.NewReader(conn)
	_, err = conn.Write([]byte("watch mutations deletions\r\n"))
	require.NoError(t, err)
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "OK\r\n", line)
	var lat []time.Duration
	for i := 0; i < 50; i++ {
		time.Sleep(100 * time.Millisecond)
		start := time.Now()
		set(t, writer, "hot", "x")
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(2*time.Second)))
		line, err := r.ReadString('\n')
		require.NoError(t, err)
		require.Contains(t, line, "type=item_store key=hot ")
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	t.Logf("set to its watch line, 50 writes: p50 %v, p90 %v, max %v", lat[len(lat)/2], lat[len(lat)*9/10], lat[len(lat)-1])
}
