package integration

import (
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The hot-key detection test (issue 28, doc/design/hotkeys.md): a load in which one key takes 5% of the
// requests and the rest go to a million cold keys. `stats hotkeys` must list the hot key first within
// 2 s of the load's start, with a share near 5%, and must drop it, and everything else, within its stated
// 2 s after the load stops.
const (
	hkLoadClients  = 4
	hkBatch        = 100 // pipelined gets per round trip
	hkHotShare     = 0.05
	hkColdKeys     = 1_000_000
	hkAppearWithin = 2 * time.Second
	hkLoadFor      = 3500 * time.Millisecond
	// hkGoneWithin is the stated cool-down (two windows), plus the poll interval, and the coarse clock's
	// tick and a poll's round trip on a loaded machine.
	hkGoneWithin = 2*time.Second + hkPollEvery + 250*time.Millisecond
	hkPollEvery  = 100 * time.Millisecond
	hkDeadline   = 20 * time.Second // bound of the whole test
)

// hotKeyListing is one `stats hotkeys` answer: the header, and each listed key's fields in rank order.
type hotKeyListing struct {
	head map[string]string
	keys []map[string]string
}

// statsHotKeys asks for `stats hotkeys` on rc and parses the answer.
func statsHotKeys(t *testing.T, rc *rawConn) hotKeyListing {
	t.Helper()
	rep := rc.exchange([]byte("stats hotkeys\r\n"), wholeWrite, []byte("END\r\n"), defaultReplyTimeout)
	require.False(t, rep.timedOut || rep.closed, "stats hotkeys: %q", truncate(rep.data, 200))
	l := hotKeyListing{head: map[string]string{}}
	for _, line := range strings.Split(strings.TrimSuffix(string(rep.data), "END\r\n"), "\r\n") {
		if line == "" {
			continue
		}
		f := strings.Split(line, " ")
		require.Len(t, f, 3, line)
		name, ok := strings.CutPrefix(f[1], "hotkey:")
		if !ok {
			l.head[f[1]] = f[2]
			continue
		}
		rank, field, _ := strings.Cut(name, ":")
		r, err := strconv.Atoi(rank)
		require.NoError(t, err, line)
		if r > len(l.keys) {
			require.Equal(t, len(l.keys)+1, r, "ranks in order: %q", line)
			l.keys = append(l.keys, map[string]string{})
		}
		l.keys[r-1][field] = f[2]
	}
	return l
}

func TestStatsHotKeys(t *testing.T) {
	d := startLeasecached(t)
	deadline := time.Now().Add(hkDeadline)
	poll := dialRaw(t, d)

	idle := statsHotKeys(t, poll)
	assert.Equal(t, map[string]string{"hotkeys_sample_rate": "16", "hotkeys_window_seconds": "2"}, idle.head)
	assert.Empty(t, idle.keys, "an idle server lists nothing")

	var (
		stop     atomic.Bool
		requests atomic.Int64
		hotReqs  atomic.Int64
		wg       sync.WaitGroup
		loadErrs = make(chan error, hkLoadClients)
	)
	start := time.Now()
	for c := range hkLoadClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rc, err := dialRawErr(d)
			if err != nil {
				loadErrs <- err
				return
			}
			defer rc.c.Close()
			rng := rand.New(rand.NewSource(int64(c)))
			var b strings.Builder
			for !stop.Load() && time.Now().Before(deadline) {
				b.Reset()
				hot := 0
				for range hkBatch {
					if rng.Float64() < hkHotShare {
						b.WriteString("get hk:hot\r\n")
						hot++
					} else {
						fmt.Fprintf(&b, "get hk:cold:%d\r\n", rng.Intn(hkColdKeys))
					}
				}
				b.WriteString("mn\r\n")
				rep := rc.exchange([]byte(b.String()), wholeWrite, []byte("MN\r\n"), defaultReplyTimeout)
				if rep.timedOut || rep.closed || rep.writeErr != nil {
					loadErrs <- fmt.Errorf("load round trip: timed out %v, closed %v, %v", rep.timedOut, rep.closed, rep.writeErr)
					return
				}
				requests.Add(hkBatch)
				hotReqs.Add(int64(hot))
			}
		}()
	}
	stopLoad := func() time.Time {
		stop.Store(true)
		wg.Wait()
		return time.Now()
	}
	defer stopLoad()

	// Listed first within 2 s of the start.
	var first hotKeyListing
	for {
		l := statsHotKeys(t, poll)
		if len(l.keys) > 0 && l.keys[0]["key"] == "hk%3Ahot" {
			first = l
			break
		}
		require.Less(t, time.Since(start), hkAppearWithin, "the 5%% key is not listed first after %s (%d requests): %v",
			time.Since(start), requests.Load(), l.keys)
		time.Sleep(hkPollEvery)
	}
	t.Logf("listed first after %s, %d requests: %v", time.Since(start).Round(time.Millisecond), requests.Load(), first.keys[0])

	// Keep the load on for a whole span; the listing then is steady.
	for time.Since(start) < hkLoadFor {
		time.Sleep(hkPollEvery)
	}
	steady := statsHotKeys(t, poll)
	elapsed := time.Since(start).Seconds()
	stopped := stopLoad()
	select {
	case err := <-loadErrs:
		t.Fatal(err)
	default:
	}
	require.NotEmpty(t, steady.keys)
	top := steady.keys[0]
	t.Logf("steady: %v; load %.0f requests/s, %.2f%% of them the hot key", top,
		float64(requests.Load())/elapsed, 100*float64(hotReqs.Load())/float64(requests.Load()))
	assert.Equal(t, "hk%3Ahot", top["key"])
	share, err := strconv.ParseFloat(top["share"], 64)
	require.NoError(t, err)
	assert.InDelta(t, 5, share, 2, "share")
	rate, err := strconv.Atoi(top["rate"])
	require.NoError(t, err)
	hotPerSec := float64(hotReqs.Load()) / elapsed
	assert.InEpsilon(t, hotPerSec, float64(rate), 0.5, "rate against the %.0f/s sent", hotPerSec)
	assert.Equal(t, top["rate"], top["reads"])
	assert.Equal(t, "0", top["writes"])
	for _, k := range steady.keys[1:] {
		s, _ := strconv.ParseFloat(k["share"], 64)
		assert.Less(t, s, share/2, "a cold key ranks far below: %v", k)
	}

	// Gone, with every cold key, within the stated time after the load stops.
	for {
		l := statsHotKeys(t, poll)
		if len(l.keys) == 0 {
			t.Logf("empty %s after the load stopped", time.Since(stopped).Round(time.Millisecond))
			break
		}
		require.Less(t, time.Since(stopped), hkGoneWithin, "still listed after the load stopped: %v", l.keys[0])
		time.Sleep(hkPollEvery)
	}
}
