package integration

import (
	"bytes"
	"fmt"
	"math/rand"
	"net"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFuzzDiff is a differential fuzzer: seeded random sequences of valid and mutated commands
// (classic text commands and the meta commands mg, ms, md, ma, me, mn) are sent, pipelined in
// batches and cut into writes at random points, to memcached 1.6.18 and to leasecached, and the
// replies of every batch are compared after the normalisation of the differential tests
// (normalize, normalizeMeta: CAS uniques, VERSION, base64 keys) with TTL and idle numbers allowed
// to differ by fzClockSlack. A divergence is shrunk (batches, then commands, then cuts dropped while
// it still diverges) and printed as a minimal reproducer.
//
// Environment:
//
//	FUZZDIFF_TIME=10m        a long campaign (the default is fzShortTime, the run inside `make test`)
//	FUZZDIFF_SEED=n          the seed of the first sequence (logged on every run): replays a sequence
//	FUZZDIFF_SEQS=n          stop after n sequences (FUZZDIFF_SEED=s FUZZDIFF_SEQS=1 replays sequence s)
//	FUZZDIFF_WORKERS=n       server pairs fuzzed in parallel (default 2; one per CPU in long runs)
//	FUZZDIFF_KEEPGOING=1     report every divergence (up to fzMaxReports) instead of stopping at the first
//
// Every run starts with flush_all (not compared) and a fresh key prefix; every batch ends with
// fzTail (a line of spaces and the mn barrier), and its replies are read until the barrier's MN.
//
// What the generator leaves out, because memcached's own answer is not a function of the bytes sent
// (the intended divergences: leasecached answers as memcached does in the deterministic case), or
// because the command is not comparable between two servers:
//   - stats (values and, for leasecached, extra lease_* counters), lru_crawler, watch, slabs/lru
//     admin commands, cache_memlimit, lease-get/lease-set (leasecached's extension): not generated.
//   - time: exptimes and TTL tokens come from fzTTLs, never small positive numbers, so nothing expires
//     during a sequence by the clock; recache thresholds (R) from fzRecache lie far from every TTL;
//     flush_all only without a positive delay (a delayed flush would fire at a tick-dependent moment).
//   - verbosity only to 0 (a higher level makes memcached log every command).
//   - lines stay under 2048 bytes: memcached closes a connection holding 2048 bytes without a newline,
//     which depends on how the stream was cut into reads; large values are sent only in a valid
//     command alone in its batch, so that their data is never read as a line.
//   - a classic get/gets/gat/gats with a key over 250 bytes always starts a batch: memcached may drop
//     the replies it has queued but not yet written (conn_release_items), which depends on read
//     boundaries ("version\r\nget <251 bytes>\r\n" in one write: memcached answers only the
//     CLIENT_ERROR; leasecached answers VERSION too, as memcached does when the lines come apart).
//   - incr/decr/ma never follow a retrieval of the same key in a batch (fzCanAppend), counters stay
//     below 2^63 (fzDeltas), and memcached runs without its LRU threads (noLRUThreads).
//   - values and junk never contain 'm' or 'M' (so never an mn line, whose MN is the batch barrier),
//     '$' (placeholders) or a 0x80 byte (memcached's binary protocol marker on a fresh connection).
func TestFuzzDiff(t *testing.T) {
	requireMemcached(t)
	budget := fzShortTime
	long := false
	if v := os.Getenv(fzTimeEnv); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err, "%s=%q", fzTimeEnv, v)
		budget, long = d, true
	}
	seed := time.Now().UnixNano() & (1<<48 - 1)
	if v := os.Getenv(fzSeedEnv); v != "" {
		s, err := strconv.ParseInt(v, 10, 64)
		require.NoError(t, err, "%s=%q", fzSeedEnv, v)
		seed = s
	}
	// A worker mostly waits for replies, so two share a CPU well (measured on 2 CPUs under -race: 520
	// commands/s with one, 900 with two).
	workers := 2
	if long {
		workers = max(2, runtime.NumCPU())
	}
	if v := os.Getenv(fzWorkersEnv); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "%s=%q", fzWorkersEnv, v)
		workers = max(1, n)
	}
	keepGoing := os.Getenv(fzKeepGoingEnv) != ""
	maxSeqs := int64(fzMaxSeqs)
	if v := os.Getenv(fzSeqsEnv); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		require.NoError(t, err, "%s=%q", fzSeqsEnv, v)
		maxSeqs = min(maxSeqs, n)
		if _, set := os.LookupEnv(fzTimeEnv); !set {
			budget = 10 * time.Minute // a replay runs its sequences, however long they take
		}
	}
	t.Logf("fuzzdiff: seed %d (replay: %s=%d), %v, %d worker(s)", seed, fzSeedEnv, seed, budget, workers)

	c := &fzCampaign{t: t, seed: seed, deadline: time.Now().Add(budget), keepGoing: keepGoing, maxSeqs: maxSeqs}
	pairs := make([]*fzPair, workers)
	for i := range pairs {
		pairs[i] = &fzPair{mc: startMemcached(t, noLRUThreads...), lc: startLeasecached(t)}
	}
	start := time.Now()
	var wg sync.WaitGroup
	for _, p := range pairs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.work(p)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	seqs, cmds, batches := c.seqs.Load(), c.cmds.Load(), c.batches.Load()
	t.Logf("fuzzdiff: %d sequences, %d batches, %d commands in %v (%.0f commands/s, %.0f commands/min); %d batches left the servers waiting for data; %d divergences, %d not reproducible",
		seqs, batches, cmds, elapsed.Round(time.Millisecond), float64(cmds)/elapsed.Seconds(), float64(cmds)/elapsed.Minutes(), c.waiting.Load(),
		c.reported.Load(), c.flaky.Load())
	assert.Positive(t, seqs, "no sequence ran")
	for _, p := range pairs {
		// Every run starts with flush_all, so nothing should ever have been evicted: evictions
		// would make the servers' answers depend on their different eviction policies.
		for _, d := range []*daemon{p.mc, p.lc} {
			if n := fzStat(d, "evictions"); n != "0" {
				t.Logf("fuzzdiff: %s evicted %s items: divergences may be eviction policy", d.name, n)
			}
		}
	}
	if testing.Verbose() {
		t.Logf("fuzzdiff: memcached's replies by kind:\n%s", c.kinds.String())
	}
}

// fzKinds counts memcached's reply lines by kind (verb and error text, meta status with its
// W/X/Z flags), to show what a campaign reached.
type fzKinds struct {
	mu sync.Mutex
	n  map[string]int
}

func (k *fzKinds) add(replies string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.n == nil {
		k.n = map[string]int{}
	}
	for _, line := range strings.Split(replies, "\r\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != strings.ToUpper(f[0]) || strings.ContainsAny(f[0][:1], "0123456789") {
			continue
		}
		kind := f[0]
		switch {
		case strings.HasSuffix(kind, "_ERROR") || kind == "ERROR":
			kind = line
		case len(kind) == 2:
			for _, fl := range f[1:] {
				if fl == "W" || fl == "X" || fl == "Z" {
					kind += " " + fl
				}
			}
		}
		k.n[kind]++
	}
}

func (k *fzKinds) String() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	keys := make([]string, 0, len(k.n))
	for kind := range k.n {
		keys = append(keys, kind)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, kind := range keys {
		fmt.Fprintf(&b, "  %8d %q\n", k.n[kind], kind)
	}
	return b.String()
}

// Knobs of the campaign.
const (
	fzTimeEnv      = "FUZZDIFF_TIME"
	fzSeedEnv      = "FUZZDIFF_SEED"
	fzWorkersEnv   = "FUZZDIFF_WORKERS"
	fzKeepGoingEnv = "FUZZDIFF_KEEPGOING"
	fzSeqsEnv      = "FUZZDIFF_SEQS"
	// fzShortTime is the campaign inside `make test`.
	fzShortTime = 15 * time.Second
	// fzMaxSeqs bounds a campaign by count as well as by time.
	fzMaxSeqs = 50_000_000
	// fzMaxReports bounds the divergences reported by one campaign in keep-going mode.
	fzMaxReports = 20
	// fzQuiet: when neither server has answered a batch's barrier and both have been silent this
	// long with the same replies, both are waiting for bytes that will not come (a data block
	// declared longer than what was sent).
	fzQuiet = 500 * time.Millisecond
	// fzReplyTimeout bounds the wait for a batch's replies after its last write.
	fzReplyTimeout = 2 * time.Second
	// fzClockSlack is how far TTL (t, exp=) and idle (l, la=) numbers may differ: memcached's clock
	// ticks once a second on its own schedule and lags the wall clock by up to a second more for
	// absolute exptimes, so one item's TTL may read up to two seconds apart on the two servers.
	fzClockSlack = 2
	// fzShrinkRuns and fzShrinkTime bound the shrinking of one divergence.
	fzShrinkRuns = 400
	fzShrinkTime = 90 * time.Second
	// fzConfirmRuns is how often a divergence is replayed before it is reported.
	fzConfirmRuns = 3
	// Shape of a sequence.
	fzMaxBatches  = 8
	fzMaxBatchLen = 8
	// fzTooLarge is a value length over both servers' default 1 MB item limit, far enough above it
	// that the two servers' different item headers do not matter.
	fzTooLarge = 1100 * 1000
)

// fzCampaign is the state shared by the workers.
type fzCampaign struct {
	t         *testing.T
	seed      int64
	deadline  time.Time
	keepGoing bool
	maxSeqs   int64

	next     atomic.Int64 // sequence number handed out next
	seqs     atomic.Int64
	batches  atomic.Int64
	cmds     atomic.Int64
	reported atomic.Int64
	flaky    atomic.Int64
	waiting  atomic.Int64 // batches after which both servers still waited for data
	kinds    fzKinds
	stop     atomic.Bool
	prefixes atomic.Int64 // key prefixes handed out (every run gets its own)
	mu       sync.Mutex   // serialises reports
}

// The fuzzer runs memcached without its LRU maintainer and crawler threads (noLRUThreads). Both hold
// references to items at moments of their own choosing (the maintainer holds one from a second fetch
// of an item in the cold LRU, an asynchronous bump, until it next wakes up, up to a second later),
// and memcached rewrites a counter in place on incr/decr/ma only when nobody else holds the item:
// otherwise it makes a new item, which loses the fetched, win-token and stale bits and the space
// padding of a shorter result. With the threads on, the same bytes sometimes answer "HD W" and
// sometimes "HD Z" (a recache after ma on an item fetched twice). Without them memcached's in-place
// rule depends only on the connection's own queued replies (see fzCanAppend).

// fzPair is one memcached and one leasecached, driven by one worker.
type fzPair struct{ mc, lc *daemon }

func (c *fzCampaign) work(p *fzPair) {
	for !c.stop.Load() && time.Now().Before(c.deadline) {
		n := c.next.Add(1) - 1
		if n >= c.maxSeqs {
			return
		}
		seq := fzGenerate(c.seed + n)
		res := c.run(p, seq)
		c.seqs.Add(1)
		c.batches.Add(int64(res.batchesRun))
		c.cmds.Add(int64(res.cmdsRun))
		if res.err != nil {
			c.t.Errorf("fuzzdiff: seed %d: %v", seq.seed, res.err)
			c.stop.Store(true)
			return
		}
		if res.diverged < 0 {
			continue
		}
		c.report(p, seq, res)
	}
}

// report confirms, shrinks and prints one divergence.
func (c *fzCampaign) report(p *fzPair, seq fzSeq, first fzResult) {
	reproduced := 0
	for i := 0; i < fzConfirmRuns && reproduced == 0; i++ {
		if c.run(p, seq).diverged >= 0 {
			reproduced++
		}
	}
	if reproduced == 0 {
		// A divergence that does not come back is a timing effect (a loaded machine stretching
		// one server's answer past the quiet window); it is logged, not failed.
		c.flaky.Add(1)
		c.t.Logf("fuzzdiff: seed %d diverged once and not in %d replays (timing?):\n%s", seq.seed, fzConfirmRuns, first.describe())
		return
	}
	small, runs := c.shrink(p, seq)
	res := c.run(p, small)
	if res.diverged < 0 {
		res = first
		small = seq
	}
	oracleSplit := c.oracleSplitConsistent(p, small)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.keepGoing {
		c.stop.Store(true)
	}
	if c.reported.Add(1) > fzMaxReports {
		c.stop.Store(true)
		return
	}
	c.t.Errorf("fuzzdiff: leasecached differs from memcached; sequence seed %d (replay: %s=%d %s=1), shrunk in %d runs to %d command(s)%s:\n%s\n%s",
		seq.seed, fzSeedEnv, seq.seed, fzSeqsEnv, runs, small.numCmds(), oracleSplit, small.reproducer(), res.describe())
}

// oracleSplitConsistent checks whether memcached answers the shrunk sequence the same sent whole:
// if not, memcached itself depends on read boundaries there, and the generator should avoid it.
func (c *fzCampaign) oracleSplitConsistent(p *fzPair, seq fzSeq) string {
	whole := seq.clone()
	for i := range whole.batches {
		whole.batches[i].split = 0
	}
	a := c.runOne(p.mc, seq)
	b := c.runOne(p.mc, whole)
	if len(a) != len(b) {
		return " (memcached answers differently when the batches are sent whole!)"
	}
	for i := range a {
		if !fzSame(a[i], b[i]) {
			return " (memcached answers differently when the batches are sent whole!)"
		}
	}
	return ""
}

// shrink drops batches, then commands, then cuts, then merges batches, while the sequence still
// diverges, within fzShrinkRuns runs and fzShrinkTime.
func (c *fzCampaign) shrink(p *fzPair, seq fzSeq) (fzSeq, int) {
	runs := 0
	deadline := time.Now().Add(fzShrinkTime)
	try := func(cand fzSeq) bool {
		if runs >= fzShrinkRuns || time.Now().After(deadline) || cand.numCmds() == 0 {
			return false
		}
		runs++
		return c.run(p, cand).diverged >= 0
	}
	for progress := true; progress; {
		progress = false
		for i := len(seq.batches) - 1; i >= 0; i-- {
			cand := seq.clone()
			cand.batches = append(cand.batches[:i], cand.batches[i+1:]...)
			if try(cand) {
				seq, progress = cand, true
			}
		}
		for i := len(seq.batches) - 1; i >= 0; i-- {
			for j := len(seq.batches[i].cmds) - 1; j >= 0; j-- {
				cand := seq.clone()
				b := &cand.batches[i]
				b.cmds = append(b.cmds[:j], b.cmds[j+1:]...)
				emptied := len(b.cmds) == 0
				if emptied {
					cand.batches = append(cand.batches[:i], cand.batches[i+1:]...)
				}
				if try(cand) {
					seq, progress = cand, true
					if emptied {
						break
					}
				}
			}
		}
		for i := range seq.batches {
			if seq.batches[i].split == 0 {
				continue
			}
			cand := seq.clone()
			cand.batches[i].split = 0
			if try(cand) {
				seq, progress = cand, true
			}
		}
		for i := len(seq.batches) - 2; i >= 0; i-- {
			merged := seq.batches[i].cmds
			for _, c := range seq.batches[i+1].cmds {
				if merged == nil || !fzCanAppend(merged, c) {
					merged = nil
					break
				}
				merged = append(slices.Clip(merged), c)
			}
			if merged == nil {
				continue
			}
			cand := seq.clone()
			cand.batches[i].cmds = append(cand.batches[i].cmds, cand.batches[i+1].cmds...)
			cand.batches = append(cand.batches[:i+1], cand.batches[i+2:]...)
			if try(cand) {
				seq, progress = cand, true
			}
		}
	}
	return seq, runs
}

// ---------------------------------------------------------------------------------------------
// Running a sequence.

// fzResult is the outcome of one run of a sequence on a pair.
type fzResult struct {
	diverged   int      // index of the first batch whose replies differ, -1 if none
	want, got  []string // normalised replies per batch, up to and including the divergent one
	sent       []string // what was sent per batch (memcached's expansion)
	batchesRun int
	cmdsRun    int
	err        error // the harness failed (not a divergence)
}

func (r fzResult) describe() string {
	if r.diverged < 0 {
		return "(no divergence)"
	}
	var b strings.Builder
	for i := 0; i <= r.diverged && i < len(r.want); i++ {
		mark := "  "
		if i == r.diverged {
			mark = "=>"
		}
		fmt.Fprintf(&b, "%s batch %d sent %q (and fzTail)\n", mark, i, truncate([]byte(r.sent[i]), 600))
		if i == r.diverged {
			b.WriteString(describeDiff(r.want[i], r.got[i]))
		} else {
			fmt.Fprintf(&b, "     replies %q\n", truncate([]byte(r.want[i]), 300))
		}
	}
	return b.String()
}

// fzSide is one server's connection and what the runner tracks for it.
type fzSide struct {
	d       *daemon
	conn    *fzConn
	lastCAS string
}

func (s *fzSide) close() {
	if s.conn != nil {
		s.conn.close()
		s.conn = nil
	}
}

// fzConn is a connection whose replies are read continuously by a goroutine, so that a server is
// never blocked writing to us and the runner can watch for silence.
type fzConn struct {
	c      net.Conn
	mu     sync.Mutex
	buf    []byte
	closed bool
	last   time.Time // when the last byte arrived
	wake   chan struct{}
	done   chan struct{}
}

func fzDial(d *daemon) (*fzConn, error) {
	rc, err := dialRawErr(d)
	if err != nil {
		return nil, err
	}
	f := &fzConn{c: rc.c, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go f.read()
	return f, nil
}

func (f *fzConn) read() {
	defer close(f.done)
	b := make([]byte, readBufSize)
	for {
		n, err := f.c.Read(b)
		f.mu.Lock()
		f.buf = append(f.buf, b[:n]...)
		if n > 0 {
			f.last = time.Now()
		}
		if err != nil {
			f.closed = true
		}
		f.mu.Unlock()
		select {
		case f.wake <- struct{}{}:
		default:
		}
		if err != nil {
			return
		}
	}
}

// fzBarrierReply is the barrier's reply as the end of a transcript: a whole line.
var fzBarrierReply = append([]byte("\n"), sentinelReply...)

// state reports whether the replies so far end with the barrier's MN line, whether the server
// closed, and when the last byte came.
func (f *fzConn) state() (complete, closed bool, last time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	complete = bytes.Equal(f.buf, sentinelReply) || bytes.HasSuffix(f.buf, fzBarrierReply)
	return complete, f.closed, f.last
}

// take returns and clears what was read.
func (f *fzConn) take() []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.buf
	f.buf = nil
	return b
}

func (f *fzConn) close() {
	f.c.Close()
	<-f.done
}

// write sends b in pieces cut at cuts, pausing between pieces so that the server sees them in
// separate reads. A write error (the server closed) ends the write quietly: the reader reports it.
func (f *fzConn) write(b []byte, cuts []int) {
	prev := 0
	for _, cut := range append(cuts, len(b)) {
		if cut <= prev || cut > len(b) {
			continue
		}
		_ = f.c.SetWriteDeadline(time.Now().Add(fzReplyTimeout))
		if _, err := f.c.Write(b[prev:cut]); err != nil {
			return
		}
		prev = cut
		if cut < len(b) {
			time.Sleep(chunkPause)
		}
	}
}

// runOne runs a sequence on one daemon alone and returns its normalised replies per batch (for the
// oracle's self-consistency check).
func (c *fzCampaign) runOne(d *daemon, seq fzSeq) []string {
	prefix := c.newPrefix()
	side := &fzSide{d: d}
	defer side.close()
	if err := fzFlush(d); err != nil {
		return []string{"<" + err.Error() + ">"}
	}
	now := time.Now()
	var out []string
	for _, b := range seq.batches {
		if side.conn == nil {
			conn, err := fzDial(d)
			if err != nil {
				return append(out, "<"+err.Error()+">")
			}
			side.conn = conn
		}
		script, encoded := b.expand(prefix, side.lastCAS, now)
		side.conn.write(script, b.cuts(len(script)-len(fzTail)))
		written := time.Now()
		deadline := written.Add(fzReplyTimeout)
		for time.Now().Before(deadline) {
			complete, closed, last := side.conn.state()
			if last.Before(written) {
				last = written
			}
			if complete || closed || time.Since(last) > fzQuiet {
				break
			}
			select {
			case <-side.conn.wake:
			case <-time.After(10 * time.Millisecond):
			}
		}
		rep := c.finish(side, prefix, encoded)
		out = append(out, rep)
	}
	return out
}

// fzFlush empties a server before a run (on a connection of its own, not compared): every run
// starts from an empty cache as well as with fresh keys, and what earlier runs stored is reclaimed
// instead of filling -m, where the two servers would evict differently.
func fzFlush(d *daemon) error {
	rc, err := dialRawErr(d)
	if err != nil {
		return err
	}
	defer rc.c.Close()
	rep := rc.exchange([]byte("flush_all\r\nmn\r\n"), wholeWrite, sentinelReply, defaultReplyTimeout)
	if string(rep.data) != "OK\r\nMN\r\n" {
		return fmt.Errorf("%s: flush_all answered %q", d.name, rep.data)
	}
	return nil
}

// fzStat returns one value of a server's stats ("" if unavailable).
func fzStat(d *daemon, name string) string {
	rc, err := dialRawErr(d)
	if err != nil {
		return ""
	}
	defer rc.c.Close()
	rep := rc.exchange([]byte("stats\r\nmn\r\n"), wholeWrite, sentinelReply, defaultReplyTimeout)
	for _, line := range strings.Split(string(rep.data), "\r\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "STAT" && f[1] == name {
			return f[2]
		}
	}
	return ""
}

// newPrefix returns a fresh key prefix of keyPrefixLen bytes, so that every run starts from keys
// no earlier run touched.
func (c *fzCampaign) newPrefix() string {
	n := c.prefixes.Add(1)
	p := "f" + strconv.FormatInt(n%(36*36*36*36), 36)
	p += strings.Repeat("_", keyPrefixLen-len(p))
	return p
}

// run runs a sequence on both servers of p and compares the replies batch by batch.
func (c *fzCampaign) run(p *fzPair, seq fzSeq) fzResult {
	res := fzResult{diverged: -1}
	prefix := c.newPrefix()
	mc, lc := &fzSide{d: p.mc}, &fzSide{d: p.lc}
	defer mc.close()
	defer lc.close()
	sides := [2]*fzSide{mc, lc}
	for _, s := range sides {
		if err := fzFlush(s.d); err != nil {
			res.err = err
			return res
		}
	}
	now := time.Now()
	for bi, b := range seq.batches {
		for _, s := range sides {
			if s.conn != nil {
				continue
			}
			conn, err := fzDial(s.d)
			if err != nil {
				res.err = err
				return res
			}
			s.conn = conn
		}
		var scripts [2][]byte
		var encoded [2]map[string]string
		var wg sync.WaitGroup
		for i, s := range sides {
			scripts[i], encoded[i] = b.expand(prefix, s.lastCAS, now)
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.conn.write(scripts[i], b.cuts(len(scripts[i])-len(fzTail)))
			}()
		}
		wg.Wait()
		c.await(sides, prefix, encoded)
		want := c.finish(mc, prefix, encoded[0])
		got := c.finish(lc, prefix, encoded[1])
		res.want = append(res.want, want)
		res.got = append(res.got, got)
		res.sent = append(res.sent, string(scripts[0][:len(scripts[0])-len(fzTail)]))
		if strings.HasSuffix(want, fzMarkWaiting) {
			c.waiting.Add(1)
		}
		c.kinds.add(want)
		res.batchesRun++
		res.cmdsRun += len(b.cmds)
		same := fzSame(want, got)
		if strings.HasSuffix(want, fzMarkWaiting) && strings.HasSuffix(got, fzMarkWaiting) {
			same = fzWaitingSame(strings.TrimSuffix(want, fzMarkWaiting), strings.TrimSuffix(got, fzMarkWaiting))
		}
		if !same {
			res.diverged = bi
			return res
		}
	}
	return res
}

// await waits until both servers answered the batch's barrier or closed, or both went quiet with
// the same replies (both wait for data), or fzReplyTimeout passed.
func (c *fzCampaign) await(sides [2]*fzSide, prefix string, encoded [2]map[string]string) {
	written := time.Now()
	deadline := written.Add(fzReplyTimeout)
	for {
		var complete [2]bool
		lastByte := written
		for i, s := range sides {
			done, closed, last := s.conn.state()
			complete[i] = done || closed
			if last.After(lastByte) {
				lastByte = last
			}
		}
		now := time.Now()
		if complete[0] && complete[1] || now.After(deadline) {
			return
		}
		if !complete[0] && !complete[1] && now.Sub(lastByte) >= fzQuiet {
			a, b := c.peek(sides[0], prefix, encoded[0]), c.peek(sides[1], prefix, encoded[1])
			if fzWaitingSame(a, b) {
				return
			}
		}
		wait := 10 * time.Millisecond
		select {
		case <-sides[0].conn.wake:
		case <-sides[1].conn.wake:
		case <-time.After(wait):
		}
	}
}

func (c *fzCampaign) peek(s *fzSide, prefix string, encoded map[string]string) string {
	s.conn.mu.Lock()
	b := append([]byte(nil), s.conn.buf...)
	s.conn.mu.Unlock()
	return fzNormalize(b, prefix, encoded)
}

// finish takes a side's replies to a batch, updates its last CAS, and returns them normalised with
// markers: the barrier's MN is removed; a connection the server closed is marked and dropped; a
// connection still waiting for data is marked and dropped (the next batch starts afresh).
func (c *fzCampaign) finish(s *fzSide, prefix string, encoded map[string]string) string {
	complete, closed, _ := s.conn.state()
	raw := s.conn.take()
	if cas := fzLastCAS(raw); cas != "" {
		s.lastCAS = cas
	}
	var mark string
	switch {
	case complete:
		raw = bytes.TrimSuffix(raw, sentinelReply)
	case closed:
		mark = markClosed
		s.close()
	default:
		mark = fzMarkWaiting
		s.close()
	}
	return fzNormalize(raw, prefix, encoded) + mark
}

// fzMarkWaiting ends the replies of a batch after which the server still waited for data.
const fzMarkWaiting = "<waiting>"

// fzNormalize is the differential tests' normalisation: normalize, then normalizeMeta.
func fzNormalize(raw []byte, prefix string, encoded map[string]string) string {
	return normalizeMeta(normalize(raw, prefix), encoded)
}

// fzSame compares two normalised transcripts, allowing TTL and idle numbers (clockToken) to differ
// by fzClockSlack unless either is -1 (t-1 and exp=-1 mean "never expires"; me's exp= of a live
// item is otherwise its negated TTL).
func fzSame(a, b string) bool { return sameWithinClock(a, b, fzClockSlack) }

// fzWaitingSame compares the replies of a batch after which both servers still wait for the rest
// of a data block (fzTail normally prevents it). memcached does not write the replies it queued
// before such a block until the block completes (conn_nread stops on EAGAIN without flushing), while
// leasecached writes them at once: the same stream, later. So memcached's replies must be a prefix
// of leasecached's.
func fzWaitingSame(mc, lc string) bool {
	if len(lc) > len(mc) {
		lc = lc[:len(mc)]
	}
	return fzSame(mc, lc)
}

// fzCASToken finds a CAS unique in a reply line: a meta status line's " c123" or me's "cas=123".
var fzCASToken = regexp.MustCompile(`^(?:(?:HD|VA|EN|NF|NS|EX) .*\bc|ME .*\bcas=)([0-9]+)\b`)

// fzLastCAS returns the last CAS unique in a server's replies (gets/gats VALUE lines, meta c flags,
// me's cas=), skipping data blocks; "" if none.
func fzLastCAS(b []byte) string {
	cas := ""
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			break
		}
		line := bytes.TrimSuffix(b[:i], []byte("\r"))
		b = b[i+1:]
		f := bytes.Fields(line)
		if len(f) == 0 {
			continue
		}
		if string(f[0]) == "VALUE" && len(f) == 5 {
			cas = string(f[4])
		} else if m := fzCASToken.FindSubmatch(line); m != nil {
			cas = string(m[1])
		}
		var n int
		var err error
		switch {
		case string(f[0]) == "VALUE" && len(f) >= 4:
			n, err = strconv.Atoi(string(f[3]))
		case string(f[0]) == "VA" && len(f) >= 2:
			n, err = strconv.Atoi(string(f[1]))
		default:
			continue
		}
		if err == nil && n >= 0 && n+2 <= len(b) {
			b = b[n+2:]
		}
	}
	return cas
}

// ---------------------------------------------------------------------------------------------
// Sequences.

// fzSeq is a generated sequence: batches sent one after the other on one connection (a new one
// after the server closed it or left it waiting for data), each followed by the mn barrier.
type fzSeq struct {
	seed    int64
	batches []fzBatch
}

type fzBatch struct {
	cmds  []fzCmd
	split int64 // seed of the cut points, 0: one write
}

// fzCmd is one generated command: request text (line and data block) as a template with the
// placeholders of transcript_test.go ($k, $cas, $future, $past) and $b64{x}.
type fzCmd struct {
	text string
	kind string
	// lead: a classic retrieval naming a key over 250 bytes, kept first in its batch.
	lead bool
	// last: quit, kept last in its batch.
	last bool
	// solo: a too-large data block, alone in its batch.
	solo bool
	// read: a retrieval (get, gets, gat, gats, mg); arith: incr, decr, ma; keys: the key names
	// they name (see fzCanAppend).
	read, arith bool
	keys        []string
}

func (s fzSeq) clone() fzSeq {
	c := fzSeq{seed: s.seed, batches: make([]fzBatch, len(s.batches))}
	for i, b := range s.batches {
		c.batches[i] = fzBatch{cmds: append([]fzCmd(nil), b.cmds...), split: b.split}
	}
	return c
}

func (s fzSeq) numCmds() int {
	n := 0
	for _, b := range s.batches {
		n += len(b.cmds)
	}
	return n
}

// fzTail ends every batch: a line of fzFillerLen spaces, then the mn barrier. A data block declared
// longer than what the batch sent takes its missing bytes from the spaces (and is then a bad data
// chunk), and what is left of the line is answered ERROR; without it both servers would wait for
// data, and memcached holds back the replies it queued before such a block until the block
// completes, so there would be nothing to compare. On a batch without a pending block the line is
// one more ERROR. Generated data blocks are at most a few hundred bytes, far below fzFillerLen.
var fzTail = []byte(strings.Repeat(" ", fzFillerLen) + "\r\n" + string(sentinelCmd))

const fzFillerLen = 1024

// expand renders the batch for one server (its last CAS, the run's key prefix) followed by fzTail,
// and returns the base64 encodings of keys for normalizeMeta.
func (b fzBatch) expand(prefix, cas string, now time.Time) ([]byte, map[string]string) {
	var sb strings.Builder
	for _, c := range b.cmds {
		sb.WriteString(c.text)
	}
	if cas == "" {
		cas = "0"
	}
	steps, encoded := expandBase64Keys([]string{sb.String()}, prefix)
	return append([]byte(expand(steps[0], prefix, cas, now)), fzTail...), encoded
}

// cuts returns the write boundaries of an n-byte batch: none, a few random ones, or pieces of 1 to
// maxRandomChunk bytes.
func (b fzBatch) cuts(n int) []int {
	if b.split == 0 || n < 2 {
		return nil
	}
	r := rand.New(rand.NewSource(b.split))
	var cuts []int
	if r.Intn(4) == 0 && n < 400 {
		for at := 1 + r.Intn(maxRandomChunk); at < n; at += 1 + r.Intn(maxRandomChunk) {
			cuts = append(cuts, at)
		}
		return cuts
	}
	for i := 1 + r.Intn(4); i > 0; i-- {
		cuts = append(cuts, 1+r.Intn(n-1))
	}
	sortInts(cuts)
	return cuts
}

func sortInts(a []int) {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j] < a[j-1]; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}

// reproducer renders the sequence as Go strings, one per batch, with the key prefix shown as $k.
func (s fzSeq) reproducer() string {
	var b strings.Builder
	b.WriteString("minimal reproducer ($k: a 6-byte key prefix; $cas: the CAS unique last returned; each batch is followed by 1024 spaces, \"\\r\\n\" and \"mn\\r\\n\"):\n")
	for i, bt := range s.batches {
		var sb strings.Builder
		for _, c := range bt.cmds {
			sb.WriteString(c.text)
		}
		how := "one write"
		if bt.split != 0 {
			how = fmt.Sprintf("cut at %v", bt.cuts(sb.Len()))
		}
		fmt.Fprintf(&b, "  batch %d (%s): %q\n", i, how, truncate([]byte(sb.String()), 2000))
	}
	return b.String()
}

// ---------------------------------------------------------------------------------------------
// The generator.

// Value tables. Every exptime and TTL is either "never", "already expired" or at least a minute
// away, so nothing expires by the clock during a sequence (see TestFuzzDiff).
var (
	fzFlagsOK  = []string{"0", "0", "1", "7", "4294967295"}
	fzFlagsBad = []string{"4294967296", "-1", "x", "1x", "", "+1", "0x10", "99999999999999999999", "007", " 1"}
	fzTTLs     = []string{"0", "0", "-1", "60", "1000", "100000", "$future", "$past", "2592001"}
	fzTTLsLive = []string{"0", "0", "60", "1000", "100000"}
	fzTTLsBad  = []string{"x", "1x", "", "+1000", "-0", "01000", "99999999999999999999", "4000000000", "-99999999999", "1.5"}
	// Counters stay below 2^63, values and deltas alike (a sequence has fewer than 2^6 increments).
	// memcached's safe_strtoull checks a number of 2^63 or more for a '-' with strchr(), over the
	// item's data, which is not NUL-terminated: it reads on into whatever lies after the item in
	// memory (old items' bytes, binary headers), so incr/decr/ma of such a value answers "CLIENT_ERROR
	// cannot increment or decrement non-numeric value" or not depending on memory contents (found by
	// this fuzzer: the same "set k 1 60 20\r\n18446744073709551615\r\nma k\r\n" answered HD on a
	// fresh memcached and the error after a few minutes of traffic). leasecached always treats it as
	// the number, which is memcached's answer on clean memory (TestDifferentialClassic checks the
	// wrap at 2^64 on a fresh memcached).
	fzDeltas   = []string{"0", "1", "1", "7", "100", "36028797018963968"}
	fzDeltaBad = []string{"-1", "x", "18446744073709551616", "1x", "+1", "0x1", "", "99999999999999999999999", "-0"}
	fzCASOK    = []string{"$cas", "$cas", "$cas", "0", "99999999999"}
	fzCASBad   = []string{"x", "-1", "18446744073709551616", "", "1x", "+1"}
	// fzRecache: R thresholds, far from every TTL of fzTTLs (60 < 500, 1000 > 500).
	fzRecache    = []string{"10", "500", "5000000"}
	fzRecacheBad = []string{"x", "-1", "", "1x"}
	fzNumbers    = []string{"0", "1", "5", "20", "4611686018427387904", "99999999999999999999", "0009"}
	// value and junk alphabets: no 'm' (no mn line), no '$', no 0x80.
	fzValueChars = "abcdefgh0123456789"
	fzJunkChars  = "abcdefghijklnopqrstuvwxyz0123456789 _-:\t\x00\x01\x7f\xc3\xa9!"
	fzJunkLines  = []string{"foo", "GET $ka", "Set $ka 0 0 1", "gets", "get", "get ", "\t", "",
		"incr", "touch", "delete", "cas", "verbosity noreply", "verbosity 0 noreply", "verbosity x", "verbosity",
		"version x", "flush_all x", "flush_all 1 2 3", "flush_all noreply extra", "quitx", "mg", "ms", "md", "ma", "me",
		"mg ", "ms $ka", "ms $ka x", "ms $ka -1", "me $ka x y", "mz $ka", "m", "mgg $ka", "get\t$ka", "set\t$ka 0 0 1"}
	fzModesSet = []string{"E", "A", "P", "R", "S", "e", "a", "p", "r", "s", "X", "", "SS", "x"}
	fzModesAr  = []string{"I", "i", "+", "D", "d", "-", "X", "", "II", "x"}
)

type fzGen struct {
	r *rand.Rand
	// keys: the key space, as templates.
	keys []string
}

// fzGenerate builds the sequence of a seed.
func fzGenerate(seed int64) fzSeq {
	g := &fzGen{r: rand.New(rand.NewSource(seed)),
		keys: []string{"a", "b", "c", "d", "a", "b", "c", "p" + strings.Repeat("q", 40), strings.Repeat("l", 250-keyPrefixLen)}}
	seq := fzSeq{seed: seed}
	var cur fzBatch
	target := 1 + g.r.Intn(fzMaxBatchLen)
	flush := func() {
		if len(cur.cmds) > 0 {
			if g.chance(2) {
				cur.split = 1 + g.r.Int63()
			}
			seq.batches = append(seq.batches, cur)
		}
		cur = fzBatch{}
		target = 1 + g.r.Intn(fzMaxBatchLen)
	}
	if g.chance(2) {
		// Half the sequences start with some keys stored, so that more commands find items.
		for _, k := range g.r.Perm(4)[:1+g.r.Intn(3)] {
			name := g.keys[k]
			v := g.value()
			if g.chance(2) {
				cur.cmds = append(cur.cmds, fzCmd{text: fmt.Sprintf("set $k%s %s %s %d\r\n%s\r\n", name, g.pick(fzFlagsOK), g.pick(fzTTLsLive), len(v), v), kind: "set"})
			} else {
				cur.cmds = append(cur.cmds, fzCmd{text: fmt.Sprintf("ms $k%s %d T%s F%s\r\n%s\r\n", name, len(v), g.pick(fzTTLsLive), g.pick(fzFlagsOK), v), kind: "ms"})
			}
		}
		flush()
	}
	nb := 1 + g.r.Intn(fzMaxBatches)
	for len(seq.batches) < nb {
		c := g.command()
		if !fzCanAppend(cur.cmds, c) {
			flush()
		}
		cur.cmds = append(cur.cmds, c)
		switch {
		case c.last || c.solo:
			flush()
		case g.chance(12):
			// A CAS round trip: read a key's CAS at the end of this batch and use it at the start
			// of the next, so that $cas matches.
			k := g.key()
			if g.chance(2) {
				cur.cmds = append(cur.cmds, fzCmd{text: "gets $k" + k + "\r\n", kind: "gets", read: true, keys: []string{k}})
			} else {
				cur.cmds = append(cur.cmds, fzCmd{text: "mg $k" + k + " c v\r\n", kind: "mg", read: true, keys: []string{k}})
			}
			flush()
			cur.cmds = append(cur.cmds, g.casUser(k))
		case len(cur.cmds) >= target:
			flush()
		}
	}
	flush()
	return seq
}

// fzCanAppend is the placement rule of commands in batches (see TestFuzzDiff): a classic
// retrieval of an over-long key starts its batch, quit ends it, a too-large data block is alone,
// and incr/decr/ma never follow a retrieval of the same key in the same batch: memcached rewrites
// a counter in place only while no queued reply references the item, else it makes a new item
// (shorter results unpadded, fetched and win/stale state cleared), so its answer would depend on
// whether the earlier reply had been written out yet. After the batch's barrier it has been.
func fzCanAppend(b []fzCmd, c fzCmd) bool {
	if len(b) == 0 {
		return true
	}
	if c.lead || c.solo || b[len(b)-1].last || b[0].solo {
		return false
	}
	if c.arith {
		for _, e := range b {
			if !e.read {
				continue
			}
			for _, k := range e.keys {
				if slices.Contains(c.keys, k) {
					return false
				}
			}
		}
	}
	return true
}

func (g *fzGen) pick(s []string) string { return s[g.r.Intn(len(s))] }
func (g *fzGen) chance(n int) bool      { return g.r.Intn(n) == 0 }

// key returns a key name (after the $k prefix) from the small key space.
func (g *fzGen) key() string { return g.pick(g.keys) }

// value returns a data block: usually short, sometimes a number (for incr), rarely longer.
func (g *fzGen) value() string {
	switch g.r.Intn(10) {
	case 0, 1, 2:
		return g.pick(fzNumbers)
	case 3:
		return g.str(fzValueChars, g.r.Intn(400))
	case 4:
		if g.chance(4) {
			return "ab\r\ncd" // a CRLF inside a value
		}
		return ""
	}
	return g.str(fzValueChars, 1+g.r.Intn(12))
}

func (g *fzGen) str(chars string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = chars[g.r.Intn(len(chars))]
	}
	return string(b)
}

// tok is a token of a command line being generated, with what a mutation may replace it by.
type tok struct {
	s    string
	bad  []string // replacements that make it invalid (nil: not a number)
	key  bool
	b64  bool
	name string // the key's name in the key space ("" once mutated)
}

// line is a command being generated.
type line struct {
	verb    string
	toks    []tok
	data    *string
	lenTok  int // index in toks of the data length, -1 if none
	classic bool
	meta    bool
}

func (g *fzGen) keyTok(name string, b64 bool) tok {
	if b64 {
		return tok{s: "$b64{" + name + "}", key: true, b64: true, name: name}
	}
	return tok{s: "$k" + name, key: true, name: name}
}

// command generates one command, valid or mutated.
func (g *fzGen) command() fzCmd {
	switch x := g.r.Intn(200); {
	case x < 1:
		return fzCmd{text: "quit\r\n", kind: "quit", last: true}
	case x < 3:
		return fzCmd{text: g.pick([]string{"flush_all", "flush_all 0", "flush_all noreply", "flush_all 0 noreply", "flush_all -1"}) + "\r\n", kind: "flush_all"}
	case x < 4:
		return fzCmd{text: g.pick([]string{"version", "verbosity 0", "verbosity 0 noreply"}) + "\r\n", kind: "misc"}
	case x < 9:
		text := g.pick(fzJunkLines)
		if g.chance(2) {
			text = g.str(fzJunkChars, g.r.Intn(40))
		}
		return fzCmd{text: text + g.pick([]string{"\r\n", "\r\n", "\n"}), kind: "junk"}
	case x < 11:
		// A large value, valid and alone in its batch (its data must never be read as a line).
		n := g.pick([]string{"1500", "4000", "16400", "70000", "300000"})
		size, _ := strconv.Atoi(n)
		v := g.str(fzValueChars, 16) + strings.Repeat("w", size-16)
		if g.chance(2) {
			return fzCmd{text: fmt.Sprintf("%s $k%s 3 0 %d\r\n%s\r\n", g.pick([]string{"set", "set", "add", "replace"}), g.key(), size, v), kind: "set", solo: true}
		}
		return fzCmd{text: fmt.Sprintf("ms $k%s %d%s\r\n%s\r\n", g.key(), size, g.pick([]string{"", " T1000 F3", " MR", " ME c", " I", " q k"}), v), kind: "ms", solo: true}
	case x < 12:
		v := strings.Repeat("v", fzTooLarge)
		if g.chance(2) {
			return fzCmd{text: fmt.Sprintf("set $k%s 0 0 %d\r\n%s\r\n", g.key(), fzTooLarge, v), kind: "set", solo: true}
		}
		return fzCmd{text: fmt.Sprintf("ms $k%s %d%s\r\n%s\r\n", g.key(), fzTooLarge, g.pick([]string{"", " q", " MA", " ME k", " I"}), v), kind: "ms", solo: true}
	case x < 100:
		return g.render(g.classic())
	default:
		return g.render(g.metaCmd())
	}
}

func (g *fzGen) classic() line {
	l := line{classic: true, lenTok: -1}
	add := func(t ...tok) { l.toks = append(l.toks, t...) }
	num := func(ok, bad []string) tok { return tok{s: g.pick(ok), bad: bad} }
	keys := func() {
		for n := 1 + g.r.Intn(3); n > 0; n-- {
			add(g.keyTok(g.key(), false))
		}
	}
	switch x := g.r.Intn(100); {
	case x < 15:
		l.verb = g.pick([]string{"get", "get", "gets"})
		keys()
		if g.chance(10) {
			for n := 20 + g.r.Intn(20); n > 0; n-- { // past memcached's 24 tokens a line
				add(g.keyTok(g.pick(g.keys[:4]), false))
			}
		}
	case x < 20:
		l.verb = g.pick([]string{"gat", "gats"})
		add(num(fzTTLs, fzTTLsBad))
		keys()
	case x < 55:
		l.verb = g.pick([]string{"set", "set", "add", "replace", "append", "prepend", "cas"})
		v := g.value()
		l.data = &v
		add(g.keyTok(g.key(), false), num(fzFlagsOK, fzFlagsBad), num(fzTTLs, fzTTLsBad))
		l.lenTok = len(l.toks)
		add(tok{s: strconv.Itoa(len(v)), bad: []string{"-1", "x", "", "1x", "99999999999999999999", "+" + strconv.Itoa(len(v))}})
		if l.verb == "cas" {
			add(num(fzCASOK, fzCASBad))
		}
	case x < 70:
		l.verb = g.pick([]string{"incr", "decr"})
		add(g.keyTok(g.key(), false), num(fzDeltas, fzDeltaBad))
	case x < 80:
		l.verb = "touch"
		add(g.keyTok(g.key(), false), num(fzTTLs, fzTTLsBad))
	default:
		l.verb = "delete"
		add(g.keyTok(g.key(), false))
		if g.chance(8) {
			add(tok{s: g.pick([]string{"0", "0", "5", "x"})})
		}
	}
	if l.verb != "get" && l.verb != "gets" && l.verb != "gat" && l.verb != "gats" && g.chance(5) {
		add(tok{s: "noreply"})
	}
	return l
}

// metaFlag returns a random flag of the meta command verb, valid or not.
func (g *fzGen) metaFlag(verb string) tok {
	opaque := func() tok {
		n := g.r.Intn(9)
		if g.chance(10) {
			n = 31 + g.r.Intn(3)
		}
		return tok{s: "O" + g.str("abcdef0123456789", n)}
	}
	ttl := func(f string) tok { return tok{s: f + g.pick(fzTTLs), bad: prefixAll(f, fzTTLsBad)} }
	switch verb {
	case "mg":
		switch x := g.r.Intn(20); {
		case x < 9:
			return tok{s: g.pick([]string{"v", "v", "k", "s", "t", "c", "f", "h", "l", "u", "q"})}
		case x < 11:
			return opaque()
		case x < 13:
			return ttl("T")
		case x < 16:
			return ttl("N")
		default:
			return tok{s: "R" + g.pick(fzRecache), bad: prefixAll("R", fzRecacheBad)}
		}
	case "ms":
		switch x := g.r.Intn(20); {
		case x < 4:
			return tok{s: g.pick([]string{"c", "k", "q", "I", "s", "f", "v"})}
		case x < 6:
			return opaque()
		case x < 9:
			return ttl("T")
		case x < 12:
			return tok{s: "F" + g.pick(fzFlagsOK), bad: prefixAll("F", fzFlagsBad)}
		case x < 15:
			return tok{s: "C" + g.pick(fzCASOK), bad: prefixAll("C", fzCASBad)}
		default:
			return tok{s: "M" + g.pick(fzModesSet[:5]), bad: prefixAll("M", fzModesSet[5:])}
		}
	case "md":
		switch x := g.r.Intn(20); {
		case x < 6:
			return tok{s: g.pick([]string{"q", "k", "I", "I"})}
		case x < 9:
			return opaque()
		case x < 13:
			return ttl("T")
		default:
			return tok{s: "C" + g.pick(fzCASOK), bad: prefixAll("C", fzCASBad)}
		}
	case "ma":
		switch x := g.r.Intn(20); {
		case x < 6:
			return tok{s: g.pick([]string{"v", "v", "t", "c", "k", "q"})}
		case x < 8:
			return opaque()
		case x < 10:
			return ttl("T")
		case x < 12:
			return ttl("N")
		case x < 14:
			return tok{s: "J" + g.pick(fzDeltas), bad: prefixAll("J", fzDeltaBad)}
		case x < 17:
			return tok{s: "D" + g.pick(fzDeltas), bad: prefixAll("D", fzDeltaBad)}
		case x < 18:
			return tok{s: "C" + g.pick(fzCASOK), bad: prefixAll("C", fzCASBad)}
		default:
			return tok{s: "M" + g.pick(fzModesAr[:6]), bad: prefixAll("M", fzModesAr[6:])}
		}
	}
	return tok{s: "k"}
}

func prefixAll(p string, s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = p + v
	}
	return out
}

func (g *fzGen) metaCmd() line {
	l := line{meta: true, lenTok: -1}
	switch x := g.r.Intn(100); {
	case x < 35:
		l.verb = "mg"
	case x < 65:
		l.verb = "ms"
	case x < 77:
		l.verb = "md"
	case x < 93:
		l.verb = "ma"
	default:
		l.verb = "me"
	}
	b64 := l.verb != "me" && g.chance(10)
	l.toks = append(l.toks, g.keyTok(g.key(), b64))
	if l.verb == "ms" {
		v := g.value()
		l.data = &v
		l.lenTok = len(l.toks)
		l.toks = append(l.toks, tok{s: strconv.Itoa(len(v)), bad: []string{"-1", "x", "", "1x", "99999999999999999999"}})
	}
	if l.verb == "me" {
		if b64 {
			l.toks = append(l.toks, tok{s: "b"})
		}
		return l
	}
	// Distinct flags (a repeated flag is an error, left to the mutations).
	seen := map[byte]bool{}
	for n := g.r.Intn(5); n > 0; n-- {
		f := g.metaFlag(l.verb)
		if !seen[f.s[0]] {
			seen[f.s[0]] = true
			l.toks = append(l.toks, f)
		}
	}
	if b64 {
		l.toks = append(l.toks, tok{s: "b"})
	}
	return l
}

// casUser is a command that uses $cas on key k: the second half of a CAS round trip.
func (g *fzGen) casUser(k string) fzCmd {
	v := g.value()
	switch g.r.Intn(5) {
	case 0, 1:
		return fzCmd{text: fmt.Sprintf("cas $k%s %s 0 %d $cas%s\r\n%s\r\n", k, g.pick(fzFlagsOK), len(v), g.pick([]string{"", " noreply"}), v), kind: "cas"}
	case 2:
		return fzCmd{text: fmt.Sprintf("ms $k%s %d C$cas%s\r\n%s\r\n", k, len(v), g.pick([]string{"", " I", " q", " MA", " MR c", " ME"}), v), kind: "ms"}
	case 3:
		return fzCmd{text: fmt.Sprintf("md $k%s C$cas%s\r\n", k, g.pick([]string{"", " I", " q", " I T60"})), kind: "md"}
	default:
		return fzCmd{text: fmt.Sprintf("ma $k%s C$cas%s\r\n", k, g.pick([]string{"", " v", " MD v", " N0 v"})), kind: "ma", arith: true, keys: []string{k}}
	}
}

// render applies 0 to 2 mutations and returns the command text.
func (g *fzGen) render(l line) fzCmd {
	orig := l
	orig.toks = slices.Clone(l.toks)
	verb := l.verb
	eol, dataEOL := "\r\n", "\r\n"
	sep := " "
	lead := ""
	data := l.data
	nmut := 0
	if g.chance(3) {
		nmut = 1 + g.r.Intn(2)
	}
	for ; nmut > 0; nmut-- {
		switch g.r.Intn(14) {
		case 0, 1, 2: // a bad number
			var idx []int
			for i, t := range l.toks {
				if t.bad != nil {
					idx = append(idx, i)
				}
			}
			if len(idx) > 0 {
				i := idx[g.r.Intn(len(idx))]
				l.toks[i].s = g.pick(l.toks[i].bad)
			}
		case 3: // a missing token
			if len(l.toks) > 0 {
				i := g.r.Intn(len(l.toks))
				l.toks = append(l.toks[:i], l.toks[i+1:]...)
				if l.lenTok == i {
					l.lenTok = -1
				} else if l.lenTok > i {
					l.lenTok--
				}
			}
		case 4: // an odd key
			for i, t := range l.toks {
				if t.key {
					l.toks[i].name = ""
					if t.b64 {
						l.toks[i].s = g.pick([]string{"$b64{" + strings.Repeat("x", 251) + "}", "$b64{" + strings.Repeat("y", 250-keyPrefixLen) + "}",
							"!!!!", "a", "ab==", "$ka", "===="})
					} else {
						l.toks[i].s = g.pick([]string{keyOfLen(251), keyOfLen(251), keyOfLen(300), "$kz\x01", "$k\xc3\xa9", "$k\x7f"})
					}
					break
				}
			}
		case 5: // a data block whose length differs from the declared one
			if data != nil && l.lenTok >= 0 {
				n, _ := strconv.Atoi(l.toks[l.lenTok].s)
				n += []int{-2, -1, 1, 2, 3, 8}[g.r.Intn(6)]
				if n >= 0 {
					l.toks[l.lenTok].s = strconv.Itoa(n)
				}
			}
		case 6: // a bad data terminator
			if data != nil {
				dataEOL = g.pick([]string{"\n", "", "\r\r\n", "x\r\n"})
			}
		case 7: // an unknown flag or an extra token
			if l.meta {
				l.toks = append(l.toks, tok{s: g.pick([]string{"Z", "x", "E5", "Y1", "P", "L", "\xff", "vv", "O", "k", "q", "b"})})
			} else {
				extra := g.pick([]string{"x", "0", "noreply", "1 2", "a b c d e f g h i j"})
				if g.chance(4) { // past memcached's 24 tokens a line
					extra = strings.TrimSpace(strings.Repeat("t ", 20+g.r.Intn(10)))
				}
				l.toks = append(l.toks, tok{s: extra})
			}
		case 8: // noreply, spelled right or wrong
			l.toks = append(l.toks, tok{s: g.pick([]string{"noreply", "noreply", "norepl", "NOREPLY"})})
		case 9: // a duplicated token
			if len(l.toks) > 1 {
				l.toks = append(l.toks, l.toks[1+g.r.Intn(len(l.toks)-1)])
			}
		case 10: // separators
			switch g.r.Intn(3) {
			case 0:
				sep = "  "
			case 1:
				lead = "  "
			default:
				eol = " " + eol
			}
		case 11: // bare LF
			eol = "\n"
		case 12: // verb spelling
			verb = g.pick([]string{strings.ToUpper(verb), verb + "x", verb[:1]})
		case 13: // many flags: memcached's token and flag count limits
			if l.meta {
				for n := 20 + g.r.Intn(10); n > 0; n-- {
					l.toks = append(l.toks, g.metaFlag(l.verb))
				}
			}
		}
	}
	text := l.text(lead, verb, sep, eol, dataEOL, data)
	if data != nil && fzDeclaresMuch(text) {
		// Mutations moved a big number (an exptime, a flag) to the data length: keep every
		// declared length within what fzTail completes.
		text = orig.text("", orig.verb, " ", "\r\n", "\r\n", orig.data)
		l = orig
	}
	c := fzCmd{text: text, kind: l.verb}
	switch l.verb {
	case "get", "gets", "gat", "gats", "mg":
		c.read = true
	case "incr", "decr", "ma":
		c.arith = true
	}
	for _, t := range l.toks {
		if t.key && t.name != "" {
			c.keys = append(c.keys, t.name)
		}
	}
	if l.classic && (l.verb == "get" || l.verb == "gets" || l.verb == "gat" || l.verb == "gats") {
		for _, t := range l.toks {
			if t.key && len(expand(t.s, strings.Repeat("p", keyPrefixLen), "0", time.Time{})) > 250 {
				c.lead = true
			}
		}
	}
	return c
}

// text renders a command line and its data block.
func (l line) text(lead, verb, sep, eol, dataEOL string, data *string) string {
	var sb strings.Builder
	sb.WriteString(lead + verb)
	for _, t := range l.toks {
		sb.WriteString(sep + t.s)
	}
	sb.WriteString(eol)
	if data != nil {
		sb.WriteString(*data + dataEOL)
	}
	return sb.String()
}

// fzDeclaresMuch reports whether a storage command's line, as memcached tokenizes it (on single
// spaces, empty tokens dropped), declares a data block longer than fzFillerLen/2.
func fzDeclaresMuch(text string) bool {
	line, _, _ := strings.Cut(text, "\n")
	var toks []string
	for _, t := range strings.Split(strings.TrimSuffix(line, "\r"), " ") {
		if t != "" {
			toks = append(toks, t)
		}
	}
	at := 0
	switch {
	case len(toks) == 0:
	case toks[0] == "ms":
		at = 2
	case slices.Contains([]string{"set", "add", "replace", "append", "prepend", "cas"}, toks[0]):
		at = 4
	}
	if at == 0 || at >= len(toks) {
		return false
	}
	n, err := strconv.ParseUint(strings.TrimPrefix(expand(toks[at], "", "1", time.Now()), "+"), 10, 64)
	return err == nil && n > fzFillerLen/2
}

// TestFuzzDiffHelpers checks the fuzzer's own pieces: the clock-tolerant comparison, CAS
// extraction, generation being a function of the seed, and placement rules.
func TestFuzzDiffHelpers(t *testing.T) {
	assert.True(t, fzSame("HD t1000\r\n", "HD t998\r\n"))
	assert.False(t, fzSame("HD t1000\r\n", "HD t997\r\n"))
	assert.False(t, fzSame("HD t-1\r\n", "HD t1\r\n"))
	assert.True(t, fzSame("ME k exp=-60 la=0\r\n", "ME k exp=-59 la=1\r\n"))
	assert.False(t, fzSame("ME k exp=-1 la=0\r\n", "ME k exp=-2 la=0\r\n"))
	assert.True(t, fzSame("ME k exp=99 la=1 cas=<cas>\r\n", "ME k exp=100 la=0 cas=<cas>\r\n"))
	assert.False(t, fzSame("HD\r\n", "HD \r\n"))

	assert.Equal(t, "12", fzLastCAS([]byte("VALUE a 0 1 12\r\nx\r\nEND\r\n")))
	assert.Equal(t, "7", fzLastCAS([]byte("VALUE a 0 1 12\r\nx\r\nVA 5 c7 t-1\r\nc8 hi\r\n")))
	assert.Equal(t, "9", fzLastCAS([]byte("ME k exp=-1 la=0 cas=9 fetch=no cls=1 size=60\r\n")))
	assert.Equal(t, "", fzLastCAS([]byte("HD k\r\nEND\r\n")))

	a, b := fzGenerate(42), fzGenerate(42)
	require.Equal(t, a.reproducer(), b.reproducer())
	for s := int64(0); s < 500; s++ {
		seq := fzGenerate(s)
		require.NotEmpty(t, seq.batches)
		for _, bt := range seq.batches {
			require.NotEmpty(t, bt.cmds, "seed %d", s)
			for i, c := range bt.cmds {
				assert.True(t, fzCanAppend(bt.cmds[:i], c), "seed %d batch %q: placement", s, bt.cmds)
				if c.lead {
					assert.Zero(t, i, "seed %d: a long-key get must start its batch", s)
				}
				if c.last {
					assert.Equal(t, len(bt.cmds)-1, i, "seed %d: quit must end its batch", s)
				}
				if c.solo {
					assert.Len(t, bt.cmds, 1, "seed %d: a too-large block is alone", s)
				}
				body := c.text
				if c.solo {
					body = body[:strings.IndexByte(body, '\n')]
				}
				assert.NotContains(t, body, "mn\r", "seed %d", s)
				if !c.solo {
					assert.False(t, fzDeclaresMuch(c.text), "seed %d: %q declares too much", s, c.text)
				}
				for _, ln := range strings.Split(body, "\n") {
					assert.Less(t, len(ln), 1500, "seed %d: line too long", s)
				}
			}
		}
	}
}
