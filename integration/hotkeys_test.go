package integration

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Shape of the hot-keys test (issue 23, "eviction keeps what is hot"): at -m 64, a dozen keys of a
// mid-size class are read several times a second while their class is filled past the limit with cold
// items and then a flood of tiny sets goes into other size classes, which must take pages from the full
// class. Before the fix, page moves evicted whole pages, hot keys included (4 of 12 lost in the issue's
// measurement; here all 12, at the first move, because the hot keys are the class's first items).
const (
	hotKeys      = 12
	hotValueLen  = 3000                   // a 2-4 KB class
	hotFillers   = 26_000                 // cold items of the hot keys' class: ~78 MB, past the 64 MB limit
	hotFlood     = 300_000                // tiny sets into other classes
	hotFloodMax  = 60                     // tiny values are 1..hotFloodMax bytes: six classes
	hotReadEvery = 100 * time.Millisecond // each hot key is read 10 times a second
	hotBatch     = 1000                   // noreply sets per batch, each batch closed by a mn round trip
	// hotFloodFor paces the flood: page moves between classes follow item ages in seconds (shard's
	// rebalance.go), so a flood over in a second would only exercise the moves that give new classes
	// their first page.
	hotFloodFor = 6 * time.Second
	// hotFillFor paces the fill, so that the hot keys are read several times while their class fills.
	hotFillFor  = 2 * time.Second
	hotDeadline = 25 * time.Second // bound of one daemon's run
)

// hotValue is hot key i's value: its own bytes, so that a read checks it is the right item, intact.
func hotValue(i int) []byte {
	v := bytes.Repeat([]byte{byte('A' + i)}, hotValueLen)
	copy(v, fmt.Sprintf("hot-%02d:", i))
	return v
}

// hotRun is what one daemon did under the hot-keys workload.
type hotRun struct {
	reads      int            // rounds of reads of all hot keys
	missed     map[int]string // hot key -> phase and round of its first miss
	corrupt    []string
	evictions  uint64
	slabsMoved uint64
}

// runHotKeys drives the workload against d and reports what the reader saw.
func runHotKeys(t *testing.T, d *daemon) hotRun {
	t.Helper()
	deadline := time.Now().Add(hotDeadline)
	w, err := dialRawErr(d)
	require.NoError(t, err)
	defer w.c.Close()
	require.NoError(t, w.c.SetDeadline(deadline))
	wr, rd := bufio.NewWriterSize(w.c, 1<<20), bufio.NewReaderSize(w.c, 64<<10)
	// barrier sends the buffered noreply sets and waits for the server to have run them all.
	barrier := func() {
		_, err := wr.Write(sentinelCmd)
		require.NoError(t, err)
		require.NoError(t, wr.Flush())
		line, err := rd.ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, string(sentinelReply), line, "reply to a batch of noreply sets")
	}
	for i := range hotKeys {
		fmt.Fprintf(wr, "set hot:%02d 0 0 %d noreply\r\n%s\r\n", i, hotValueLen, hotValue(i))
	}
	barrier()

	// The reader: every hotReadEvery, one get of all the hot keys on its own connection.
	run := hotRun{missed: map[int]string{}}
	var mu sync.Mutex
	phase := "fill"
	stop, done := make(chan struct{}), make(chan struct{})
	r, err := dialRawErr(d)
	require.NoError(t, err)
	defer r.c.Close()
	require.NoError(t, r.c.SetDeadline(deadline))
	var readErr error
	go func() {
		defer close(done)
		var get strings.Builder
		get.WriteString("get")
		for i := range hotKeys {
			fmt.Fprintf(&get, " hot:%02d", i)
		}
		get.WriteString("\r\n")
		br := bufio.NewReaderSize(r.c, 64<<10)
		tick := time.NewTicker(hotReadEvery)
		defer tick.Stop()
		for {
			if _, err := r.c.Write([]byte(get.String())); err != nil {
				readErr = err
				return
			}
			vals, err := readValues(br)
			if err != nil {
				readErr = err
				return
			}
			mu.Lock()
			run.reads++
			for i := range hotKeys {
				v, ok := vals[fmt.Sprintf("hot:%02d", i)]
				switch {
				case !ok:
					if _, seen := run.missed[i]; !seen {
						run.missed[i] = fmt.Sprintf("%s, read %d", phase, run.reads)
					}
				case !bytes.Equal(v.data, hotValue(i)):
					run.corrupt = append(run.corrupt, fmt.Sprintf("hot:%02d in %s", i, phase))
				}
			}
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	setPhase := func(p string) {
		mu.Lock()
		phase = p
		mu.Unlock()
	}

	// Cold items of the hot keys' class, past the limit: the class ends up with most of the pages.
	filler := bytes.Repeat([]byte("f"), hotValueLen)
	fillStart := time.Now()
	for i := range hotFillers {
		fmt.Fprintf(wr, "set fill:%d 0 0 %d noreply\r\n%s\r\n", i, hotValueLen, filler)
		if i%hotBatch == hotBatch-1 {
			barrier()
			time.Sleep(time.Until(fillStart.Add(hotFillFor * time.Duration(i+1) / hotFillers)))
		}
	}
	barrier()

	// The flood: tiny values of many sizes, classes that have no page yet and must take them.
	setPhase("flood")
	floodStart := time.Now()
	for i := range hotFlood {
		n := 1 + i%hotFloodMax
		fmt.Fprintf(wr, "set t:%d 0 0 %d noreply\r\n%s\r\n", i, n, filler[:n])
		if i%hotBatch == hotBatch-1 {
			barrier()
			time.Sleep(time.Until(floodStart.Add(hotFloodFor * time.Duration(i+1) / hotFlood)))
		}
	}
	barrier()
	setPhase("after")
	time.Sleep(3 * hotReadEvery) // a few more rounds of reads, after the last set
	close(stop)
	<-done
	require.NoError(t, readErr, "hot-key reader")

	_, err = wr.WriteString("stats\r\n")
	require.NoError(t, err)
	require.NoError(t, wr.Flush())
	var stats bytes.Buffer
	for !bytes.HasSuffix(stats.Bytes(), []byte("END\r\n")) {
		line, err := rd.ReadString('\n')
		require.NoError(t, err)
		stats.WriteString(line)
	}
	st := statsMap(stats.Bytes())
	run.evictions, err = strconv.ParseUint(st["evictions"], 10, 64)
	require.NoError(t, err)
	run.slabsMoved, _ = strconv.ParseUint(st["slabs_moved"], 10, 64)
	return run
}

// TestHotKeysSurviveSmallSetFlood: keys read ten times a second are never evicted while a flood of tiny
// sets into other size classes forces evictions and page moves (memcached 1.6.18 keeps them too; its run
// is logged for reference).
func TestHotKeysSurviveSmallSetFlood(t *testing.T) {
	lc := startLeasecached(t, "-m", "64")
	start := time.Now()
	got := runHotKeys(t, lc)
	t.Logf("leasecached: %d rounds of reads in %v, evictions %d, slabs moved %d, hot keys missed %v",
		got.reads, time.Since(start).Round(time.Millisecond), got.evictions, got.slabsMoved, got.missed)
	assert.Empty(t, got.corrupt, "hot keys read back wrong")
	assert.Empty(t, got.missed, "hot keys evicted (key -> phase and read round of the first miss)")
	assert.Positive(t, got.evictions, "the workload must evict, or it tests nothing")
	assert.Positive(t, got.slabsMoved, "the flood must move pages to the tiny classes, or it tests nothing")
	assert.GreaterOrEqual(t, got.reads, 5, "the reader must have read the hot keys throughout")

	if memcachedPath == "" {
		t.Log("memcached is not on PATH: no reference run")
		return
	}
	mc := startMemcached(t, "-m", "64")
	start = time.Now()
	ref := runHotKeys(t, mc)
	t.Logf("memcached (reference): %d rounds of reads in %v, evictions %d, slabs moved %d, hot keys missed %v",
		ref.reads, time.Since(start).Round(time.Millisecond), ref.evictions, ref.slabsMoved, ref.missed)
}
