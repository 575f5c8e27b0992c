package integration

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"io"
	mrand "math/rand"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSoak is issue 23's "nothing lost" integrity soak. soakWorkers connections at once run a random mix of
// set, add, replace, append, prepend, cas, gets, get (single and multi-key), gat, touch, delete, incr, decr,
// lease-get and lease-set, some of it pipelined (several requests written before the first reply is read),
// against one leasecached. Each worker owns its keys and keeps an exact model of them, so every reply is
// predicted: every value read must equal the model byte for byte, flags included. Values run from 0 to 500
// KB and check themselves as well: a value is a run of segments, each a header naming its key, a version
// and a length, with a CRC of its body, so a torn, truncated or misplaced value is named as such before
// the model is consulted. All workers also race on one counter through gets+cas retry loops, which must
// end at exactly the number of successful cas; and the server's own counters (soakCheckedStats) must
// equal what the workers counted.
//
// It runs twice on a fresh server each time: once with memory to spare (-m 1024, some 15 MB of items and
// as much again of stale values: nothing may be evicted or lost; this run found shards evicting while they
// held empty pages, shard/emptypage.go), and once overfilled (-m 64 against about 100 MB of mostly large
// values: evictions must happen, and then a value is either present and exact, or absent; a key that was
// seen absent never comes back, with any version).
//
// Each run lasts soakDefaultTime; SOAK_TIME (a Go duration) sets another length (`make soak
// SOAKTIME=10m`). Every exchange has a deadline and every loop a count bound as well.
func TestSoak(t *testing.T) {
	requireLeases(t)
	dur := soakDefaultTime
	if s := os.Getenv(soakTimeEnv); s != "" {
		d, err := time.ParseDuration(s)
		require.NoError(t, err, "%s=%q", soakTimeEnv, s)
		require.Positive(t, d, "%s", soakTimeEnv)
		dur = d
	}
	for _, cfg := range []soakConfig{
		{name: "no-eviction", memMB: "1024", valueKeys: 16, counterKeys: 2},
		{name: "overfilled", memMB: "64", valueKeys: 16, counterKeys: 2, evict: true},
	} {
		t.Run(cfg.name, func(t *testing.T) { runSoak(t, cfg, dur) })
	}
}

// Bounds and shape of the soak.
const (
	soakTimeEnv     = "SOAK_TIME"
	soakDefaultTime = 12 * time.Second // per run: two runs, each with start-up and checks, stay well under 1 minute
	soakWorkers     = 32
	// soakMaxOps bounds each worker's operations, whatever the time (a count bound besides the clock).
	soakMaxOps = 5_000_000
	// soakOpTimeout bounds one exchange (a pipeline included): generous, for -race on a loaded machine.
	soakOpTimeout = 30 * time.Second
	// soakCasRetries bounds one worker's gets+cas attempts for one increment of the shared counter.
	soakCasRetries = 10_000
	// soakMaxValue is the largest value a set writes; soakAppendLimit the model length past which a worker
	// stops appending to a key, soakMaxSegment the largest appended piece. So a value stays below 600 KB,
	// inside the default 1 MB item limit, even after a pipeline of appends.
	soakMaxValue    = 500 << 10
	soakAppendLimit = 400 << 10
	soakMaxSegment  = 8 << 10
	soakMaxPipeline = 8
	soakPoolSize    = 1 << 20
	// soakStaleSure is how long after a delete a stale value must still be served with no memory pressure:
	// the stale window is 10 s counted in whole seconds, so some margin.
	soakStaleSure = 7 * time.Second
	// soakSettle bounds the wait for the server's counters to include the last replies' (connections
	// merge their counts after writing their replies).
	soakSettle   = 5 * time.Second
	soakTraceLen = 24
	soakHistLen  = 12
	soakShared   = "soak:shared"
)

// soakCheckedStats are the `stats` counters whose change over a run must equal the workers' count.
var soakCheckedStats = []string{
	"cmd_get", "get_hits", "get_misses", "cmd_set", "cmd_touch", "touch_hits", "touch_misses",
	"delete_hits", "delete_misses", "incr_hits", "incr_misses", "decr_hits", "decr_misses",
	"cas_hits", "cas_badval", "cas_misses", "store_no_memory",
	"lease_grants", "lease_hot_misses", "lease_sets_stored", "lease_sets_rejected", "lease_invalidations",
	"bytes_read", "bytes_written",
}

type soakConfig struct {
	name        string
	memMB       string
	valueKeys   int // per worker
	counterKeys int // per worker
	evict       bool
}

// soakKey is a worker's model of one of its keys.
type soakKey struct {
	name    string
	short   string // for the trace
	counter bool   // holds a decimal number (incr/decr), not checksummed segments
	present bool
	val     []byte
	flags   uint32
	ver     uint64 // the last version written into a segment of this key
	// The stale value lease-get may show: the value the last delete removed, until the key is stored again.
	hasStale   bool
	stale      []byte
	staleFlags uint32
	staleAt    time.Time
	// cas is the unique of the last gets hit; casLive says nothing has written the key since.
	cas     uint64
	casLive bool
	// hist are the last requests on the key, for failure reports (note).
	hist  [soakHistLen]string
	histN int
}

// soakTally is one worker's figures, summed over workers at the end.
type soakTally struct {
	exp        map[string]uint64 // expected change of the stats counters
	cmds       map[string]uint64 // requests sent, per command
	pipelines  uint64
	piped      uint64 // requests sent inside pipelines
	bytesOut   uint64
	bytesIn    uint64
	sharedIncr uint64 // successful cas increments of the shared counter
	casRetries uint64 // EXISTS on the shared counter
	vanished   uint64 // keys the model held that turned out absent (evicted)
	oom        uint64 // SERVER_ERROR out of memory replies (overfilled only)
	staleLo    uint64 // lease-get misses that carried a stale value
	staleHi    uint64 // ... plus those that may have carried an empty one with flags 0
	hits       uint64
	misses     uint64
}

func newSoakTally() soakTally {
	return soakTally{exp: map[string]uint64{}, cmds: map[string]uint64{}}
}

func (t *soakTally) add(o soakTally) {
	for k, v := range o.exp {
		t.exp[k] += v
	}
	for k, v := range o.cmds {
		t.cmds[k] += v
	}
	t.pipelines += o.pipelines
	t.piped += o.piped
	t.bytesOut += o.bytesOut
	t.bytesIn += o.bytesIn
	t.sharedIncr += o.sharedIncr
	t.casRetries += o.casRetries
	t.vanished += o.vanished
	t.oom += o.oom
	t.staleLo += o.staleLo
	t.staleHi += o.staleHi
	t.hits += o.hits
	t.misses += o.misses
}

// soakConn is a connection that counts the bytes it moves.
type soakConn struct {
	c   net.Conn
	r   *bufio.Reader
	in  uint64 // bytes read from the socket
	out uint64 // bytes written
}

func (s *soakConn) Read(p []byte) (int, error) {
	n, err := s.c.Read(p)
	s.in += uint64(n)
	return n, err
}

func dialSoak(d *daemon) (*soakConn, error) {
	c, err := net.DialTimeout("tcp", d.addr, dialTimeout)
	if err != nil {
		return nil, fmt.Errorf("dial %s at %s: %w", d.name, d.addr, err)
	}
	s := &soakConn{c: c}
	s.r = bufio.NewReaderSize(s, 64<<10)
	return s, nil
}

func (s *soakConn) write(b []byte) error {
	n, err := s.c.Write(b)
	s.out += uint64(n)
	return err
}

// line reads one reply line without its CRLF.
func (s *soakConn) line() (string, error) {
	l, err := s.r.ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("read reply line (got %q): %w", truncate([]byte(l), 80), err)
	}
	if !strings.HasSuffix(l, "\r\n") {
		return "", fmt.Errorf("reply line %q does not end with CRLF", truncate([]byte(l), 80))
	}
	return l[:len(l)-2], nil
}

// block reads an n-byte data block and its CRLF.
func (s *soakConn) block(n int) ([]byte, error) {
	buf := make([]byte, n+2)
	if _, err := io.ReadFull(s.r, buf); err != nil {
		return nil, fmt.Errorf("read %d-byte data block: %w", n, err)
	}
	if buf[n] != '\r' || buf[n+1] != '\n' {
		return nil, fmt.Errorf("%d-byte data block not followed by CRLF: ...%q", n, truncate(buf[max(0, n-20):], 40))
	}
	return buf[:n], nil
}

// call writes a request and reads a one-line reply.
func (s *soakConn) call(req string) (string, error) {
	_ = s.c.SetDeadline(time.Now().Add(soakOpTimeout))
	if err := s.write([]byte(req)); err != nil {
		return "", err
	}
	return s.line()
}

// stats reads `stats`, and reports the bytes of the request and of its reply.
func (s *soakConn) stats() (map[string]string, uint64, uint64, error) {
	_ = s.c.SetDeadline(time.Now().Add(soakOpTimeout))
	in, out := s.in-uint64(s.r.Buffered()), s.out
	if err := s.write([]byte("stats\r\n")); err != nil {
		return nil, 0, 0, err
	}
	var all []byte
	for {
		l, err := s.line()
		if err != nil {
			return nil, 0, 0, fmt.Errorf("stats: %w", err)
		}
		if l == "END" {
			break
		}
		all = append(all, l...)
		all = append(all, "\r\n"...)
	}
	return statsMap(all), s.out - out, s.in - uint64(s.r.Buffered()) - in, nil
}

func runSoak(t *testing.T, cfg soakConfig, dur time.Duration) {
	d := startLeasecached(t, "-m", cfg.memMB)
	admin, err := dialSoak(d)
	require.NoError(t, err)
	defer admin.c.Close()
	l, err := admin.call("set " + soakShared + " 0 0 1\r\n0\r\n")
	require.NoError(t, err)
	require.Equal(t, "STORED", l)
	base, adminIn, adminOut, err := admin.stats()
	require.NoError(t, err)
	// The counters move by the workers' traffic and by this connection's stats exchanges from base on (each
	// is counted once served, so after its own snapshot): adminIn and adminOut are the bytes of those.

	pool := make([]byte, soakPoolSize)
	_, err = rand.Read(pool)
	require.NoError(t, err)

	start := time.Now()
	deadline := start.Add(dur)
	var stop atomic.Bool
	workers := make([]*soakWorker, soakWorkers)
	errs := make([]error, soakWorkers)
	var wg sync.WaitGroup
	for i := range workers {
		w := newSoakWorker(i, &cfg, pool, time.Now().UnixNano()+int64(i))
		w.start = start
		workers[i] = w
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.run(d, deadline, &stop); err != nil {
				errs[i] = errors.New(w.report(err))
				stop.Store(true)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	failed := 0
	for _, err := range errs {
		if err != nil {
			if failed < 5 {
				t.Error(err)
			}
			failed++
		}
	}
	if failed > 0 {
		if st, _, _, err := admin.stats(); err == nil {
			var b strings.Builder
			for _, name := range []string{"evictions", "curr_items", "lease_stale_items", "lease_outstanding",
				"slabs_moved", "direct_reclaims", "reclaimed", "store_no_memory", "bytes", "limit_maxbytes"} {
				fmt.Fprintf(&b, " %s %s", name, st[name])
			}
			t.Logf("server after the failure:%s", b.String())
		}
	}
	require.Zero(t, failed, "%d of %d workers failed", failed, soakWorkers)

	total := newSoakTally()
	present := 0
	for _, w := range workers {
		total.add(w.tally)
		for _, k := range w.all {
			if k.present {
				present++
			}
		}
	}

	// The server's counters: poll until the last connections' counts are merged, then compare.
	var final map[string]string
	delta := func(name string) uint64 {
		a, errA := strconv.ParseUint(final[name], 10, 64)
		b, errB := strconv.ParseUint(base[name], 10, 64)
		if errA != nil || errB != nil {
			return ^uint64(0)
		}
		return a - b
	}
	want := func(name string) uint64 {
		switch name {
		case "bytes_read":
			return total.bytesOut + adminIn
		case "bytes_written":
			return total.bytesIn + adminOut
		}
		return total.exp[name]
	}
	settle := time.Now().Add(soakSettle)
	for {
		var rq, rp uint64
		final, rq, rp, err = admin.stats()
		require.NoError(t, err)
		same := true
		for _, name := range soakCheckedStats {
			same = same && delta(name) == want(name)
		}
		if same || time.Now().After(settle) {
			break
		}
		adminIn += rq
		adminOut += rp
		time.Sleep(20 * time.Millisecond)
	}
	for _, name := range soakCheckedStats {
		assert.Equal(t, want(name), delta(name), "stats %s: change over the run (want: as the workers counted)", name)
	}
	staleServed := delta("lease_stale_served")
	assert.True(t, total.staleLo <= staleServed && staleServed <= total.staleHi,
		"lease_stale_served %d, want within [%d, %d]", staleServed, total.staleLo, total.staleHi)
	assert.Equal(t, "0", final["lease_outstanding"], "every lease granted was used or invalidated")
	evictions, err := strconv.ParseUint(final["evictions"], 10, 64)
	require.NoError(t, err, "evictions %q", final["evictions"])
	currItems, err := strconv.Atoi(final["curr_items"])
	require.NoError(t, err, "curr_items %q", final["curr_items"])
	if cfg.evict {
		assert.Positive(t, evictions, "an overfilled server must have evicted")
		assert.Positive(t, total.vanished, "no key of the model vanished although the server evicted")
		assert.LessOrEqual(t, currItems, present+1, "curr_items: more than the keys the model may hold (+1 shared counter)")
	} else {
		assert.Zero(t, evictions, "evictions with memory to spare")
		assert.Zero(t, total.vanished)
		assert.Equal(t, present+1, currItems, "curr_items: the keys the model holds, and the shared counter")
	}

	// The shared counter ends at exactly the number of successful cas increments (read after the stats,
	// which this get would move).
	l, err = admin.call("get " + soakShared + "\r\n")
	require.NoError(t, err)
	wantLine := fmt.Sprintf("VALUE %s 0 %d", soakShared, len(strconv.FormatUint(total.sharedIncr, 10)))
	require.Equal(t, wantLine, l, "shared counter header")
	data, err := admin.block(len(strconv.FormatUint(total.sharedIncr, 10)))
	require.NoError(t, err)
	assert.Equal(t, strconv.FormatUint(total.sharedIncr, 10), string(data), "shared counter: successful cas increments")
	l, err = admin.line()
	require.NoError(t, err)
	require.Equal(t, "END", l)

	// The figures.
	kinds := make([]string, 0, len(total.cmds))
	var requests uint64
	for k, n := range total.cmds {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
		requests += n
	}
	sort.Strings(kinds)
	t.Logf("%s (-m %s): %d workers for %v: %d requests (%.0f/s), %d of them in %d pipelines; %s",
		cfg.name, cfg.memMB, soakWorkers, elapsed.Round(time.Millisecond), requests, float64(requests)/elapsed.Seconds(),
		total.piped, total.pipelines, strings.Join(kinds, ", "))
	t.Logf("%s: %.1f MB written, %.1f MB read; key reads %d hits, %d misses; evictions %d; keys vanished from the model %d; "+
		"out-of-memory replies %d; shared counter %d (%d cas retries); lease_stale_served %d; curr_items %d; stats checked: %s",
		cfg.name, float64(total.bytesOut)/1e6, float64(total.bytesIn)/1e6, total.hits, total.misses, evictions,
		total.vanished, total.oom, total.sharedIncr, total.casRetries, staleServed, currItems, strings.Join(soakCheckedStats, " "))
}

// soakWorker runs one connection's traffic over its own keys and the shared counter.
type soakWorker struct {
	id    int
	cfg   *soakConfig
	pool  []byte
	cn    *soakConn
	rng   *mrand.Rand
	keys  []*soakKey // checksummed values
	ctrs  []*soakKey // numbers
	all   []*soakKey
	tally soakTally
	// sharedSeen is the largest value of the shared counter this worker read: it never goes down.
	sharedSeen uint64
	trace      [soakTraceLen]string
	traceN     int
	start      time.Time
}

func newSoakWorker(id int, cfg *soakConfig, pool []byte, seed int64) *soakWorker {
	w := &soakWorker{id: id, cfg: cfg, pool: pool, rng: mrand.New(mrand.NewSource(seed)), tally: newSoakTally()}
	for i := 0; i < cfg.valueKeys; i++ {
		w.keys = append(w.keys, &soakKey{name: fmt.Sprintf("soak:w%02d:k%02d", id, i), short: fmt.Sprintf("k%02d", i)})
	}
	for i := 0; i < cfg.counterKeys; i++ {
		w.ctrs = append(w.ctrs, &soakKey{name: fmt.Sprintf("soak:w%02d:n%02d", id, i), short: fmt.Sprintf("n%02d", i), counter: true})
	}
	w.all = append(append([]*soakKey(nil), w.keys...), w.ctrs...)
	return w
}

// note records a request and its outcome, at the time since the run started, in the worker's trace and in
// the history of its key (k, nil for the shared counter): what a failure report shows.
func (w *soakWorker) note(k *soakKey, format string, args ...any) {
	s := fmt.Sprintf("%6.3fs ", time.Since(w.start).Seconds()) + fmt.Sprintf(format, args...)
	w.trace[w.traceN%soakTraceLen] = s
	w.traceN++
	if k != nil {
		k.hist[k.histN%soakHistLen] = s
		k.histN++
	}
}

// report is a failure's context: the worker's last requests, and the last requests on each key err names.
func (w *soakWorker) report(err error) string {
	var b strings.Builder
	fmt.Fprintf(&b, "worker %d: %v\nlast requests of worker %d, oldest first:", w.id, err, w.id)
	for i := max(0, w.traceN-soakTraceLen); i < w.traceN; i++ {
		b.WriteString("\n  " + w.trace[i%soakTraceLen])
	}
	for _, k := range w.all {
		if !strings.Contains(err.Error(), k.name+":") && !strings.Contains(err.Error(), k.name+" ") {
			continue
		}
		fmt.Fprintf(&b, "\nlast requests on %s (%s), oldest first:", k.name, k.short)
		for i := max(0, k.histN-soakHistLen); i < k.histN; i++ {
			b.WriteString("\n  " + k.hist[i%soakHistLen])
		}
	}
	return b.String()
}

func (w *soakWorker) run(d *daemon, deadline time.Time, stop *atomic.Bool) error {
	cn, err := dialSoak(d)
	if err != nil {
		return err
	}
	w.cn = cn
	defer func() {
		cn.c.Close()
		w.tally.bytesOut, w.tally.bytesIn = cn.out, cn.in
	}()
	for n := 0; n < soakMaxOps && !stop.Load() && time.Now().Before(deadline); n++ {
		if err := w.step(); err != nil {
			return err
		}
	}
	if stop.Load() {
		return nil
	}
	// Last, every key of the worker in one get: the model's final state, exactly.
	return w.do(w.getReq("get", w.all, 0))
}

// soakReq is one request: its bytes, and the function that reads and checks its reply against the model
// (run in request order, so a pipeline is checked as if its requests had been sent one by one).
type soakReq struct {
	cmd    string
	buf    []byte
	handle func() error
}

// do sends reqs (as one write when there are several: a pipeline) and checks their replies in order. A
// pipeline is written by a second goroutine while this one reads, so neither side can block the other
// however large the replies are.
func (w *soakWorker) do(reqs ...soakReq) error {
	_ = w.cn.c.SetDeadline(time.Now().Add(soakOpTimeout))
	for _, r := range reqs {
		w.tally.cmds[r.cmd]++
	}
	if len(reqs) == 1 {
		if err := w.cn.write(reqs[0].buf); err != nil {
			return fmt.Errorf("%s: write: %w", reqs[0].cmd, err)
		}
		return reqs[0].handle()
	}
	w.tally.pipelines++
	w.tally.piped += uint64(len(reqs))
	var buf []byte
	for _, r := range reqs {
		buf = append(buf, r.buf...)
	}
	wrote := make(chan error, 1)
	go func() { wrote <- w.cn.write(buf) }()
	var err error
	for i, r := range reqs {
		if err = r.handle(); err != nil {
			err = fmt.Errorf("pipeline of %d, request %d: %w", len(reqs), i+1, err)
			break
		}
	}
	if err != nil {
		_ = w.cn.c.SetDeadline(time.Now()) // unblock the writer
	}
	if werr := <-wrote; err == nil && werr != nil {
		err = fmt.Errorf("pipeline of %d: write: %w", len(reqs), werr)
	}
	return err
}

// step runs one randomly chosen operation.
func (w *soakWorker) step() error {
	switch p := w.rng.Intn(100); {
	case p < 14:
		return w.do(w.getReq("get", []*soakKey{w.anyKey()}, 0))
	case p < 19:
		return w.do(w.getReq("get", w.distinctKeys(2+w.rng.Intn(5)), 0))
	case p < 23:
		return w.do(w.getReq("gets", w.distinctKeys(1+w.rng.Intn(2)), 0))
	case p < 25:
		return w.do(w.getReq("gat", w.distinctKeys(1+w.rng.Intn(2)), w.exptime()))
	case p < 37:
		return w.do(w.storeReq("set", w.anyKey(), 0))
	case p < 40:
		return w.do(w.storeReq("add", w.anyKey(), 0))
	case p < 43:
		return w.do(w.storeReq("replace", w.anyKey(), 0))
	case p < 49:
		return w.do(w.concatReq("append", w.valueKey()))
	case p < 53:
		return w.do(w.concatReq("prepend", w.valueKey()))
	case p < 59:
		return w.do(w.deleteReq(w.anyKey()))
	case p < 66:
		return w.opCas()
	case p < 72:
		return w.do(w.arithReq("incr", w.counterKey()))
	case p < 75:
		return w.do(w.arithReq("decr", w.counterKey()))
	case p < 78:
		return w.do(w.touchReq(w.anyKey()))
	case p < 87:
		return w.opLease()
	case p < 93:
		return w.opShared()
	default:
		return w.opPipeline()
	}
}

func (w *soakWorker) anyKey() *soakKey     { return w.all[w.rng.Intn(len(w.all))] }
func (w *soakWorker) valueKey() *soakKey   { return w.keys[w.rng.Intn(len(w.keys))] }
func (w *soakWorker) counterKey() *soakKey { return w.ctrs[w.rng.Intn(len(w.ctrs))] }

func (w *soakWorker) distinctKeys(n int) []*soakKey {
	perm := w.rng.Perm(len(w.all))
	out := make([]*soakKey, 0, n)
	for _, i := range perm[:min(n, len(perm))] {
		out = append(out, w.all[i])
	}
	return out
}

// exptime is 0 or a day: both keep the item for the whole run, but they differ in the item's layout, so
// touch and gat sometimes move an item to a new chunk.
func (w *soakWorker) exptime() int {
	if w.rng.Intn(3) == 0 {
		return 86400
	}
	return 0
}

func (w *soakWorker) flags() uint32 {
	if w.rng.Intn(3) == 0 {
		return 0
	}
	return w.rng.Uint32()
}

// A value is a run of segments "{<key> <version:16 hex> <length:7 decimal> <crc32:8 hex>}<body>", the body
// a slice of the shared random pool chosen by key and version.
func soakHeaderLen(key string) int { return 1 + len(key) + 1 + 16 + 1 + 7 + 1 + 8 + 1 }

func (w *soakWorker) segment(k *soakKey, size int) []byte {
	k.ver++
	n := max(0, size-soakHeaderLen(k.name))
	h := fnv.New64a()
	h.Write([]byte(k.name))
	off := int((h.Sum64() ^ k.ver*0x9e3779b97f4a7c15) % uint64(len(w.pool)-n+1))
	body := w.pool[off : off+n]
	out := make([]byte, 0, soakHeaderLen(k.name)+n)
	out = fmt.Appendf(out, "{%s %016x %07d %08x}", k.name, k.ver, n, crc32.ChecksumIEEE(body))
	return append(out, body...)
}

// valueSize draws a set's value size: most small, some large; mostly large when overfilling.
func (w *soakWorker) valueSize() int {
	large := 10
	if w.cfg.evict {
		large = 65
	}
	switch p := w.rng.Intn(100); {
	case p < 5:
		return 0
	case p < 100-large-25:
		return w.rng.Intn(200)
	case p < 100-large-10:
		return 200 + w.rng.Intn(4<<10)
	case p < 100-large:
		return 4<<10 + w.rng.Intn(60<<10)
	default:
		return 64<<10 + w.rng.Intn(soakMaxValue-64<<10+1)
	}
}

// newValue is a fresh value for k: checksummed segments, or a number for a counter key.
func (w *soakWorker) newValue(k *soakKey) []byte {
	if k.counter {
		var n uint64
		switch w.rng.Intn(3) {
		case 0:
			n = uint64(w.rng.Intn(1000))
		case 1:
			n = w.rng.Uint64()
		default:
			n = ^uint64(0) - uint64(w.rng.Intn(100)) // incr wraps from here
		}
		return strconv.AppendUint(nil, n, 10)
	}
	size := w.valueSize()
	if size == 0 {
		return []byte{}
	}
	return w.segment(k, size)
}

// checkSegments checks a value of key k on its own, without the model: whole segments of this key with
// intact bodies. It returns the versions found, for messages.
func soakCheckSegments(key string, v []byte) ([]string, error) {
	hl := soakHeaderLen(key)
	var vers []string
	for off := 0; off < len(v); {
		rest := v[off:]
		if len(rest) < hl || rest[0] != '{' || rest[hl-1] != '}' {
			return vers, fmt.Errorf("byte %d of %d: no segment header here: %q", off, len(v), truncate(rest, 60))
		}
		f := strings.Fields(string(rest[1 : hl-1]))
		if len(f) != 4 || f[0] != key {
			return vers, fmt.Errorf("byte %d: segment header %q is not one of key %s (misplaced value?)", off, rest[:hl], key)
		}
		n, err1 := strconv.Atoi(f[2])
		crc, err2 := strconv.ParseUint(f[3], 16, 32)
		if err1 != nil || err2 != nil || n < 0 || n > len(rest)-hl {
			return vers, fmt.Errorf("byte %d: segment header %q: bad or overlong length (%d bytes left)", off, rest[:hl], len(rest)-hl)
		}
		body := rest[hl : hl+n]
		if got := crc32.ChecksumIEEE(body); got != uint32(crc) {
			return vers, fmt.Errorf("byte %d: segment %s of %d bytes: crc %08x, header says %08x (torn value)", off, f[1], n, got, crc)
		}
		vers = append(vers, fmt.Sprintf("v%s/%d", strings.TrimLeft(f[1], "0"), n))
		off += hl + n
	}
	return vers, nil
}

// describe names a value for messages: its segments, or its text when short.
func (k *soakKey) describe(v []byte) string {
	if k.counter || len(v) == 0 {
		return fmt.Sprintf("%q", truncate(v, 40))
	}
	vers, err := soakCheckSegments(k.name, v)
	s := fmt.Sprintf("%d bytes [%s]", len(v), strings.Join(vers, " "))
	if err != nil {
		s += " then " + err.Error()
	}
	return s
}

func (w *soakWorker) errf(format string, args ...any) error {
	return fmt.Errorf(format, args...)
}

// hit checks a value read for k against the model.
func (w *soakWorker) hit(cmd string, k *soakKey, flags uint32, v []byte) error {
	w.tally.hits++
	if !k.counter {
		if _, err := soakCheckSegments(k.name, v); err != nil {
			return w.errf("%s %s: corrupt value: %v", cmd, k.name, err)
		}
	}
	if !k.present {
		return w.errf("%s %s: hit, but the key is absent (deleted, or seen missing): got flags %d, %s", cmd, k.name, flags, k.describe(v))
	}
	if flags != k.flags || !bytes.Equal(v, k.val) {
		i := 0
		for i < len(v) && i < len(k.val) && v[i] == k.val[i] {
			i++
		}
		return w.errf("%s %s: got flags %d, %s; want flags %d, %s (first difference at byte %d)",
			cmd, k.name, flags, k.describe(v), k.flags, k.describe(k.val), i)
	}
	return nil
}

// miss records that k is absent: an error unless the model has it absent or eviction is allowed.
func (w *soakWorker) miss(cmd string, k *soakKey) error {
	w.tally.misses++
	k.casLive = false
	if !k.present {
		return nil
	}
	if !w.cfg.evict {
		return w.errf("%s %s: miss, but the key holds flags %d, %s (lost with no eviction)", cmd, k.name, k.flags, k.describe(k.val))
	}
	w.tally.vanished++
	k.present, k.val = false, nil
	return nil
}

// stored records a successful store of v.
func (k *soakKey) stored(flags uint32, v []byte) {
	k.present, k.val, k.flags = true, v, flags
	k.hasStale, k.stale = false, nil
	k.casLive = false
}

// oom accepts a memory failure only when overfilling.
func (w *soakWorker) oom(cmd string, k *soakKey, l string) error {
	if !w.cfg.evict || !strings.HasPrefix(l, "SERVER_ERROR out of memory") {
		return w.errf("%s %s: unexpected reply %q", cmd, k.name, l)
	}
	w.tally.oom++
	return nil
}

// getReq is get, gets or gat of keys (distinct), checked key by key: hits in request order, misses silent.
func (w *soakWorker) getReq(cmd string, keys []*soakKey, exptime int) soakReq {
	b := []byte(cmd)
	if cmd == "gat" {
		b = fmt.Appendf(b, " %d", exptime)
	}
	for _, k := range keys {
		b = append(append(b, ' '), k.name...)
	}
	b = append(b, "\r\n"...)
	return soakReq{cmd: cmd, buf: b, handle: func() error {
		withCas := cmd == "gets"
		next := 0
		for {
			l, err := w.cn.line()
			if err != nil {
				return w.errf("%s: %w", cmd, err)
			}
			if l == "END" {
				break
			}
			f := strings.Fields(l)
			if len(f) != 4+btoi(withCas) || f[0] != "VALUE" {
				return w.errf("%s: unexpected line %q", cmd, l)
			}
			i := next
			for i < len(keys) && keys[i].name != f[1] {
				i++
			}
			if i == len(keys) {
				return w.errf("%s: %q: not a key requested, or out of order (request: %s)", cmd, l, truncate(b, 200))
			}
			flags, err1 := strconv.ParseUint(f[2], 10, 32)
			n, err2 := strconv.Atoi(f[3])
			if err1 != nil || err2 != nil || n < 0 {
				return w.errf("%s: bad VALUE line %q", cmd, l)
			}
			var cas uint64
			if withCas {
				if cas, err = strconv.ParseUint(f[4], 10, 64); err != nil {
					return w.errf("%s: bad cas in %q", cmd, l)
				}
			}
			data, err := w.cn.block(n)
			if err != nil {
				return w.errf("%s %s: %w", cmd, f[1], err)
			}
			for ; next < i; next++ {
				if err := w.countGet(cmd, keys[next], false); err != nil {
					return err
				}
			}
			k := keys[i]
			if err := w.hit(cmd, k, uint32(flags), data); err != nil {
				return err
			}
			if err := w.countGet(cmd, k, true); err != nil {
				return err
			}
			if withCas {
				k.cas, k.casLive = cas, true
			}
			next = i + 1
		}
		for ; next < len(keys); next++ {
			if err := w.countGet(cmd, keys[next], false); err != nil {
				return err
			}
		}
		return nil
	}}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// countGet counts one key of a retrieval (gat counts as a touch, as memcached counts it) and, for a
// miss, checks it against the model.
func (w *soakWorker) countGet(cmd string, k *soakKey, hit bool) error {
	w.note(k, "%s %s: %s", cmd, k.short, map[bool]string{true: "hit", false: "miss"}[hit])
	if cmd == "gat" {
		w.tally.exp["cmd_touch"]++
		w.tally.exp[map[bool]string{true: "touch_hits", false: "touch_misses"}[hit]]++
	} else {
		w.tally.exp["cmd_get"]++
		w.tally.exp[map[bool]string{true: "get_hits", false: "get_misses"}[hit]]++
	}
	if !hit {
		return w.miss(cmd, k)
	}
	return nil
}

// storeReq is set, add, replace or cas of a fresh value (cas with the given unique).
func (w *soakWorker) storeReq(cmd string, k *soakKey, unique uint64) soakReq {
	flags, exp, v := w.flags(), w.exptime(), w.newValue(k)
	b := fmt.Appendf(nil, "%s %s %d %d %d", cmd, k.name, flags, exp, len(v))
	if cmd == "cas" {
		b = fmt.Appendf(b, " %d", unique)
	}
	b = append(append(append(b, "\r\n"...), v...), "\r\n"...)
	return soakReq{cmd: cmd, buf: b, handle: func() error {
		l, err := w.cn.line()
		if err != nil {
			return w.errf("%s %s: %w", cmd, k.name, err)
		}
		w.note(k, "%s %s %s -> %s", cmd, k.short, k.describe(v), l)
		w.tally.exp["cmd_set"]++
		if strings.HasPrefix(l, "SERVER_ERROR") {
			if err := w.oom(cmd, k, l); err != nil {
				return err
			}
			w.tally.exp["store_no_memory"]++
			if cmd == "set" && k.present {
				// memcached's "avoid stale data": a failed set removes the old value.
				k.present, k.val, k.casLive = false, nil, false
			}
			return nil
		}
		switch cmd {
		case "set":
			if l != "STORED" {
				return w.errf("set %s: %q", k.name, l)
			}
		case "add":
			switch {
			case l == "STORED" && k.present && !w.cfg.evict:
				return w.errf("add %s: STORED over a value the model holds (%s)", k.name, k.describe(k.val))
			case l == "STORED":
				if k.present {
					w.tally.vanished++
				}
			case l == "NOT_STORED" && !k.present:
				return w.errf("add %s: NOT_STORED, but the key is absent", k.name)
			case l == "NOT_STORED":
				return nil
			default:
				return w.errf("add %s: %q", k.name, l)
			}
		case "replace":
			switch l {
			case "STORED":
				if !k.present {
					return w.errf("replace %s: STORED, but the key is absent", k.name)
				}
			case "NOT_STORED":
				return w.miss(cmd, k)
			default:
				return w.errf("replace %s: %q", k.name, l)
			}
		case "cas":
			live := k.casLive && unique == k.cas
			switch l {
			case "STORED":
				w.tally.exp["cas_hits"]++
				if !k.present {
					return w.errf("cas %s %d: STORED, but the key is absent", k.name, unique)
				}
				if !live {
					return w.errf("cas %s %d: STORED with a unique that is not the item's (live unique %d: %v)", k.name, unique, k.cas, k.casLive)
				}
			case "EXISTS":
				w.tally.exp["cas_badval"]++
				if !k.present {
					return w.errf("cas %s %d: EXISTS, but the key is absent", k.name, unique)
				}
				if live {
					return w.errf("cas %s: EXISTS with the unique %d of the last gets, nothing written since", k.name, unique)
				}
				return nil
			case "NOT_FOUND":
				w.tally.exp["cas_misses"]++
				return w.miss(cmd, k)
			default:
				return w.errf("cas %s: %q", k.name, l)
			}
		}
		k.stored(flags, v)
		return nil
	}}
}

// concatReq is append or prepend of a new segment.
func (w *soakWorker) concatReq(cmd string, k *soakKey) soakReq {
	if len(k.val) > soakAppendLimit {
		return w.getReq("get", []*soakKey{k}, 0)
	}
	flags := w.flags() // ignored by the server: the item keeps its flags
	v := w.segment(k, soakHeaderLen(k.name)+w.rng.Intn(soakMaxSegment))
	b := fmt.Appendf(nil, "%s %s %d 0 %d\r\n", cmd, k.name, flags, len(v))
	b = append(append(b, v...), "\r\n"...)
	return soakReq{cmd: cmd, buf: b, handle: func() error {
		l, err := w.cn.line()
		if err != nil {
			return w.errf("%s %s: %w", cmd, k.name, err)
		}
		w.note(k, "%s %s %s -> %s", cmd, k.short, k.describe(v), l)
		w.tally.exp["cmd_set"]++
		switch l {
		case "STORED":
			if !k.present {
				return w.errf("%s %s: STORED, but the key is absent", cmd, k.name)
			}
			nv := make([]byte, 0, len(k.val)+len(v))
			if cmd == "append" {
				nv = append(append(nv, k.val...), v...)
			} else {
				nv = append(append(nv, v...), k.val...)
			}
			k.val, k.casLive = nv, false
			return nil
		case "NOT_STORED":
			if w.cfg.evict {
				// Absent, or no memory for the longer value (memcached answers NOT_STORED to both): the
				// model keeps the value, which a later read finds exact or absent.
				return nil
			}
			return w.miss(cmd, k)
		}
		return w.errf("%s %s: %q", cmd, k.name, l)
	}}
}

func (w *soakWorker) deleteReq(k *soakKey) soakReq {
	return soakReq{cmd: "delete", buf: fmt.Appendf(nil, "delete %s\r\n", k.name), handle: func() error {
		l, err := w.cn.line()
		if err != nil {
			return w.errf("delete %s: %w", k.name, err)
		}
		w.note(k, "delete %s -> %s", k.short, l)
		switch l {
		case "DELETED":
			w.tally.exp["delete_hits"]++
			if !k.present {
				return w.errf("delete %s: DELETED, but the key is absent", k.name)
			}
			k.hasStale, k.stale, k.staleFlags, k.staleAt = true, k.val, k.flags, time.Now()
			k.present, k.val, k.casLive = false, nil, false
			return nil
		case "NOT_FOUND":
			w.tally.exp["delete_misses"]++
			return w.miss("delete", k)
		}
		return w.errf("delete %s: %q", k.name, l)
	}}
}

func (w *soakWorker) touchReq(k *soakKey) soakReq {
	exp := w.exptime()
	return soakReq{cmd: "touch", buf: fmt.Appendf(nil, "touch %s %d\r\n", k.name, exp), handle: func() error {
		l, err := w.cn.line()
		if err != nil {
			return w.errf("touch %s: %w", k.name, err)
		}
		w.note(k, "touch %s %d -> %s", k.short, exp, l)
		w.tally.exp["cmd_touch"]++
		switch l {
		case "TOUCHED":
			w.tally.exp["touch_hits"]++
			if !k.present {
				return w.errf("touch %s: TOUCHED, but the key is absent", k.name)
			}
			return nil // touch keeps the value and the cas unique
		case "NOT_FOUND":
			w.tally.exp["touch_misses"]++
			return w.miss("touch", k)
		}
		return w.errf("touch %s: %q", k.name, l)
	}}
}

// soakArith is the model of incr/decr on a counter value: wrap at 2^64 up, stop at 0 down; a result no
// longer than the old value is written over it padded with spaces, as memcached does.
func soakArith(v []byte, incr bool, delta uint64) ([]byte, uint64, error) {
	n, err := strconv.ParseUint(strings.TrimRight(string(v), " "), 10, 64)
	if err != nil {
		return nil, 0, fmt.Errorf("model value %q is not a counter", v)
	}
	switch {
	case incr:
		n += delta
	case delta > n:
		n = 0
	default:
		n -= delta
	}
	d := strconv.AppendUint(nil, n, 10)
	if len(d) <= len(v) {
		d = append(d, bytes.Repeat([]byte{' '}, len(v)-len(d))...)
	}
	return d, n, nil
}

func (w *soakWorker) arithReq(cmd string, k *soakKey) soakReq {
	var delta uint64
	switch w.rng.Intn(4) {
	case 0:
		delta = w.rng.Uint64()
	case 1:
		delta = uint64(w.rng.Intn(1_000_000))
	default:
		delta = uint64(w.rng.Intn(10))
	}
	incr := cmd == "incr"
	return soakReq{cmd: cmd, buf: fmt.Appendf(nil, "%s %s %d\r\n", cmd, k.name, delta), handle: func() error {
		l, err := w.cn.line()
		if err != nil {
			return w.errf("%s %s: %w", cmd, k.name, err)
		}
		w.note(k, "%s %s %d -> %s", cmd, k.short, delta, l)
		switch {
		case l == "NOT_FOUND":
			w.tally.exp[cmd+"_misses"]++
			return w.miss(cmd, k)
		case strings.HasPrefix(l, "SERVER_ERROR"):
			return w.oom(cmd, k, l) // counted as neither hit nor miss, the value unchanged
		}
		got, err := strconv.ParseUint(l, 10, 64)
		if err != nil {
			return w.errf("%s %s %d: %q", cmd, k.name, delta, l)
		}
		w.tally.exp[cmd+"_hits"]++
		if !k.present {
			return w.errf("%s %s: %q, but the key is absent", cmd, k.name, l)
		}
		nv, n, err := soakArith(k.val, incr, delta)
		if err != nil {
			return w.errf("%s %s: %v", cmd, k.name, err)
		}
		if got != n {
			return w.errf("%s %s %d on %q: got %d, want %d", cmd, k.name, delta, k.val, got, n)
		}
		k.val, k.casLive = nv, false
		return nil
	}}
}

// opCas is gets then cas: with the unique just read (stored), with one made stale by a write in between
// (EXISTS), with an older one, or with one never issued.
func (w *soakWorker) opCas() error {
	k := w.anyKey()
	switch w.rng.Intn(4) {
	case 0, 1:
		if err := w.do(w.getReq("gets", []*soakKey{k}, 0)); err != nil {
			return err
		}
		if w.rng.Intn(5) == 0 {
			if err := w.do(w.storeReq("set", k, 0)); err != nil {
				return err
			}
		}
	case 2: // whatever unique the model has (maybe stale, maybe of a value deleted since)
	default:
		k.cas, k.casLive = 1<<62+uint64(w.rng.Int63n(1<<40)), false
	}
	unique := k.cas
	if unique == 0 {
		unique = 1<<62 + uint64(w.rng.Int63n(1<<40))
	}
	return w.do(w.storeReq("cas", k, unique))
}

// opShared increments the shared counter with a gets+cas retry loop.
func (w *soakWorker) opShared() error {
	for attempt := 0; attempt < soakCasRetries; attempt++ {
		_ = w.cn.c.SetDeadline(time.Now().Add(soakOpTimeout))
		w.tally.cmds["gets"]++
		if err := w.cn.write([]byte("gets " + soakShared + "\r\n")); err != nil {
			return err
		}
		l, err := w.cn.line()
		if err != nil {
			return w.errf("gets %s: %w", soakShared, err)
		}
		w.tally.exp["cmd_get"]++
		f := strings.Fields(l)
		if len(f) != 5 || f[0] != "VALUE" || f[1] != soakShared {
			return w.errf("gets %s: %q (the shared counter must never be missing)", soakShared, l)
		}
		w.tally.exp["get_hits"]++
		n, err1 := strconv.Atoi(f[3])
		unique, err2 := strconv.ParseUint(f[4], 10, 64)
		if err1 != nil || err2 != nil || n < 0 || n > 20 {
			return w.errf("gets %s: bad line %q", soakShared, l)
		}
		data, err := w.cn.block(n)
		if err != nil {
			return w.errf("gets %s: %w", soakShared, err)
		}
		if l, err = w.cn.line(); err != nil || l != "END" {
			return w.errf("gets %s: %q instead of END (%v)", soakShared, l, err)
		}
		v, err := strconv.ParseUint(string(data), 10, 64)
		if err != nil {
			return w.errf("gets %s: value %q is not a number", soakShared, data)
		}
		if v < w.sharedSeen {
			return w.errf("gets %s: %d after this worker saw %d: the counter went back", soakShared, v, w.sharedSeen)
		}
		w.sharedSeen = v
		nv := strconv.FormatUint(v+1, 10)
		w.tally.cmds["cas"]++
		l, err = w.cn.call(fmt.Sprintf("cas %s 0 0 %d %d\r\n%s\r\n", soakShared, len(nv), unique, nv))
		if err != nil {
			return w.errf("cas %s: %w", soakShared, err)
		}
		w.tally.exp["cmd_set"]++
		switch l {
		case "STORED":
			w.tally.exp["cas_hits"]++
			w.tally.sharedIncr++
			w.sharedSeen = v + 1
			w.note(nil, "shared %d -> %d after %d retries", v, v+1, attempt)
			return nil
		case "EXISTS":
			w.tally.exp["cas_badval"]++
			w.tally.casRetries++
		default:
			return w.errf("cas %s %d: %q", soakShared, unique, l)
		}
	}
	return w.errf("shared counter: no cas succeeded in %d attempts", soakCasRetries)
}

// opLease is a lease-get of one key (after a delete, at times, so that it misses and shows the deleted
// value as stale), then, on a miss, one of: lease-set with the token (stored); a second lease-get (a hot
// miss) and then the lease-set (stored); a write that invalidates the lease, then the lease-set (refused).
// Now and then a lease-set with a token never granted comes first (refused).
func (w *soakWorker) opLease() error {
	k := w.valueKey()
	if w.rng.Intn(10) < 4 {
		if err := w.do(w.deleteReq(k)); err != nil {
			return err
		}
	}
	if w.rng.Intn(10) == 0 {
		if err := w.do(w.leaseSetReq(k, 1<<61+uint64(w.rng.Int63n(1<<40)), false)); err != nil {
			return err
		}
	}
	var first leaseBlock
	if err := w.do(w.leaseGetReq(k, &first, false)); err != nil || first.hit {
		return err
	}
	switch v := w.rng.Intn(10); {
	case v < 2:
		var again leaseBlock
		if err := w.do(w.leaseGetReq(k, &again, true)); err != nil {
			return err
		}
	case v < 4:
		inval := w.deleteReq(k)
		if w.rng.Intn(2) == 0 {
			inval = w.storeReq("set", k, 0)
		}
		if err := w.do(inval); err != nil {
			return err
		}
		w.tally.exp["lease_invalidations"]++
		return w.do(w.leaseSetReq(k, first.token, false))
	}
	return w.do(w.leaseSetReq(k, first.token, true))
}

// leaseGetReq is lease-get of k; hot says a lease on k is outstanding (token 1 expected), else a miss
// must grant one. The block is left in out.
func (w *soakWorker) leaseGetReq(k *soakKey, out *leaseBlock, hot bool) soakReq {
	return soakReq{cmd: "lease-get", buf: fmt.Appendf(nil, "lease-get %s\r\n", k.name), handle: func() error {
		l, err := w.cn.line()
		if err != nil {
			return w.errf("lease-get %s: %w", k.name, err)
		}
		b, n, err := parseLeaseHeader(l)
		if err != nil {
			return w.errf("lease-get %s: %v", k.name, err)
		}
		if b.key != k.name {
			return w.errf("lease-get %s: block of %q", k.name, b.key)
		}
		if b.data, err = w.cn.block(n); err != nil {
			return w.errf("lease-get %s: %w", k.name, err)
		}
		if end, err := w.cn.line(); err != nil || end != "END" {
			return w.errf("lease-get %s: %q instead of END (%v)", k.name, end, err)
		}
		*out = b
		w.tally.exp["cmd_get"]++
		if b.hit {
			w.note(k, "lease-get %s -> hit", k.short)
			w.tally.exp["get_hits"]++
			if hot {
				return w.errf("lease-get %s: a hit while the lease granted before is outstanding", k.name)
			}
			return w.hit("lease-get", k, b.flags, b.data)
		}
		w.note(k, "lease-get %s -> token %d, stale %s", k.short, b.token, k.describe(b.data))
		w.tally.exp["get_misses"]++
		if err := w.miss("lease-get", k); err != nil {
			return err
		}
		switch {
		case hot && b.token != hotMissToken:
			return w.errf("lease-get %s: token %d while another lease is outstanding: want the hot miss 1", k.name, b.token)
		case hot:
			w.tally.exp["lease_hot_misses"]++
		case b.token == hotMissToken:
			return w.errf("lease-get %s: hot miss, but no lease on the key is outstanding", k.name)
		default:
			if err := checkGrantToken(b.token); err != nil {
				return w.errf("lease-get %s: %v", k.name, err)
			}
			w.tally.exp["lease_grants"]++
		}
		// The stale value: the one the last delete removed, exactly, or none (its window passed, or it was
		// evicted).
		switch {
		case len(b.data) > 0 || b.flags != 0:
			if !k.hasStale {
				return w.errf("lease-get %s: LVALUE carries flags %d, %s, but the key has no stale value", k.name, b.flags, k.describe(b.data))
			}
			if _, err := soakCheckSegments(k.name, b.data); err != nil {
				return w.errf("lease-get %s: corrupt stale value: %v", k.name, err)
			}
			if b.flags != k.staleFlags || !bytes.Equal(b.data, k.stale) {
				return w.errf("lease-get %s: stale value flags %d, %s; want flags %d, %s", k.name, b.flags, k.describe(b.data),
					k.staleFlags, k.describe(k.stale))
			}
			w.tally.staleLo++
			w.tally.staleHi++
		case k.hasStale && len(k.stale) == 0 && k.staleFlags == 0:
			w.tally.staleHi++ // an empty stale value with flags 0 looks like none
		case k.hasStale && !w.cfg.evict && time.Since(k.staleAt) < soakStaleSure:
			return w.errf("lease-get %s: no stale value %v after the delete of flags %d, %s", k.name,
				time.Since(k.staleAt).Round(time.Millisecond), k.staleFlags, k.describe(k.stale))
		}
		return nil
	}}
}

// leaseSetReq is lease-set of a fresh value with token: stored when want, else refused.
func (w *soakWorker) leaseSetReq(k *soakKey, token uint64, want bool) soakReq {
	flags, v := w.flags(), w.newValue(k)
	b := fmt.Appendf(nil, "lease-set %s %d %d 0 %d\r\n", k.name, token, flags, len(v))
	b = append(append(b, v...), "\r\n"...)
	return soakReq{cmd: "lease-set", buf: b, handle: func() error {
		l, err := w.cn.line()
		if err != nil {
			return w.errf("lease-set %s: %w", k.name, err)
		}
		w.note(k, "lease-set %s %d %s -> %s", k.short, token, k.describe(v), l)
		w.tally.exp["cmd_set"]++
		switch {
		case want && l == "STORED":
			w.tally.exp["lease_sets_stored"]++
			k.stored(flags, v)
			return nil
		case want && strings.HasPrefix(l, "SERVER_ERROR"):
			w.tally.exp["lease_sets_rejected"]++
			w.tally.exp["store_no_memory"]++
			return w.oom("lease-set", k, l)
		case !want && l == "NOT_STORED":
			w.tally.exp["lease_sets_rejected"]++
			return nil
		}
		return w.errf("lease-set %s with token %d: %q, want %s", k.name, token, l, map[bool]string{true: "STORED", false: "NOT_STORED"}[want])
	}}
}

// opPipeline writes 2 to soakMaxPipeline requests at once, then checks the replies in order.
func (w *soakWorker) opPipeline() error {
	n := 2 + w.rng.Intn(soakMaxPipeline-1)
	reqs := make([]soakReq, 0, n)
	for range n {
		var r soakReq
		switch w.rng.Intn(12) {
		case 0, 1:
			r = w.getReq("get", w.distinctKeys(1+w.rng.Intn(3)), 0)
		case 2:
			r = w.getReq("gets", []*soakKey{w.anyKey()}, 0)
		case 3:
			r = w.getReq("gat", []*soakKey{w.anyKey()}, w.exptime())
		case 4, 5:
			r = w.storeReq("set", w.anyKey(), 0)
		case 6:
			r = w.storeReq([]string{"add", "replace"}[w.rng.Intn(2)], w.anyKey(), 0)
		case 7:
			r = w.concatReq([]string{"append", "prepend"}[w.rng.Intn(2)], w.valueKey())
		case 8:
			r = w.deleteReq(w.anyKey())
		case 9, 10:
			r = w.arithReq([]string{"incr", "decr"}[w.rng.Intn(2)], w.counterKey())
		default:
			r = w.touchReq(w.anyKey())
		}
		reqs = append(reqs, r)
	}
	return w.do(reqs...)
}
