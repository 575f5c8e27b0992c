package integration

import (
	"bytes"
	"fmt"
	"math/rand"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFuzzDiffBinary is the binary protocol's differential fuzzer, the counterpart of TestFuzzDiff:
// seeded random sequences of request packets (every opcode memcached 1.6.18 dispatches, quiet forms,
// CAS from earlier replies, now and then an unknown opcode, a wrong extras length, an over-long key
// or a QUIT) over a small key space, in batches each closed by the sentinel NOOP and cut into writes
// at random points, are sent to memcached and to leasecached; the replies of every batch are
// compared after binNormalizer. Now and then a batch is one text command (classic or meta) on a
// second, text connection to the same server, on the same keys. A divergence is shrunk (batches, then packets, dropped while it still
// diverges) and reported with the bytes sent and both servers' replies in hex.
//
// Environment:
//
//	FUZZDIFF_BINARY_TIME=10m   a long campaign (the default is fbShortTime, the run inside `make test`)
//	FUZZDIFF_BINARY_SEED=n     the seed of the first sequence (logged on every run)
//	FUZZDIFF_BINARY_SEQS=n     stop after n sequences (SEED=s SEQS=1 replays sequence s)
//	FUZZDIFF_BINARY_WORKERS=n  server pairs fuzzed in parallel (default 2; one per CPU in long runs)
//
// What the generator leaves out, because memcached's own answer is not a function of the bytes:
//   - STAT (values; the groups are the cases' business), FLUSH with a delay, small positive
//     exptimes: nothing expires by the clock during a sequence (exptimes are 0, an hour, or an
//     absolute time in the past or in 2106).
//   - INCREMENT/DECREMENT never follow a read (GET, GAT, TOUCH, any form) of the same key in the
//     same batch: memcached rewrites a counter in place only when no queued reply holds the item
//     (see fuzzdiff_test.go); memcached runs without its LRU threads (noLRUThreads) for the same
//     reason.
//   - counters stay below 2^63: for a value of 2^63 or more memcached's incr looks for a '-' with
//     strchr, which reads on past the item's data (not NUL-terminated) into whatever memory follows
//     it, and answers DELTA_BADVAL when it finds one there (util.c, safe_strtoull). No value is 2^63
//     or more, deltas and initial values are at most 2^40, and a key an append or prepend touched
//     (digits after digits) gets no incr or decr for the rest of its sequence.
//   - lengths always match what is sent, except in packets after which memcached closes the
//     connection (wrong extras length, key over 250, keylen+extlen over bodylen); so no batch leaves
//     a server waiting for bytes.
//   - hostile headers (fbHostile) come alone in a batch of their own, as the last use of a connection.
//   - a packet that closes the connection ends its batch (the replies memcached queued before a close
//     are lost or not depending on read boundaries), and it is never cut from what precedes it.
func TestFuzzDiffBinary(t *testing.T) {
	requireMemcached(t)
	budget, long := fbShortTime, false
	if v := os.Getenv(fbTimeEnv); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err, "%s=%q", fbTimeEnv, v)
		budget, long = d, true
	}
	seed := time.Now().UnixNano() & (1<<48 - 1)
	if v := os.Getenv(fbSeedEnv); v != "" {
		s, err := strconv.ParseInt(v, 10, 64)
		require.NoError(t, err, "%s=%q", fbSeedEnv, v)
		seed = s
	}
	maxSeqs := int64(1 << 40)
	if v := os.Getenv(fbSeqsEnv); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		require.NoError(t, err, "%s=%q", fbSeqsEnv, v)
		maxSeqs = n
	}
	workers := 2
	if long {
		workers = max(2, runtime.NumCPU())
	}
	if v := os.Getenv(fbWorkersEnv); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "%s=%q", fbWorkersEnv, v)
		workers = max(1, n)
	}
	t.Logf("fuzzdiff-binary: seed %d (replay: %s=%d %s=1), %v, %d worker(s)", seed, fbSeedEnv, seed, fbSeqsEnv, budget, workers)

	var next, seqs, packets, reported, flaky atomic.Int64
	var stop atomic.Bool
	deadline := time.Now().Add(budget)
	var wg sync.WaitGroup
	for w := range workers {
		mc, lc := startMemcached(t, noLRUThreads...), startLeasecached(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			f := &fbRunner{mc: mc, lc: lc, worker: w}
			for !stop.Load() && time.Now().Before(deadline) {
				n := next.Add(1) - 1
				if n >= maxSeqs {
					return
				}
				seq := fbGenerate(seed + n)
				res := f.run(seq)
				seqs.Add(1)
				packets.Add(int64(seq.numPackets()))
				if res.err != nil {
					t.Errorf("fuzzdiff-binary: seed %d: %v", seq.seed, res.err)
					stop.Store(true)
					return
				}
				if res.diverged < 0 {
					continue
				}
				reproduced := false
				for range fbConfirmRuns {
					if f.run(seq).diverged >= 0 {
						reproduced = true
						break
					}
				}
				if !reproduced {
					// A divergence that does not come back is a timing effect; logged, not failed.
					flaky.Add(1)
					t.Logf("fuzzdiff-binary: seed %d diverged once and not in %d replays (timing?):\n%s", seq.seed, fbConfirmRuns, describeFb(seq, res))
					continue
				}
				if stop.Swap(true) {
					return // another worker reports
				}
				reported.Add(1)
				small, runs := f.shrink(seq)
				t.Errorf("fuzzdiff-binary: leasecached differs from memcached; sequence seed %d (replay: %s=%d %s=1), shrunk in %d runs to %d packet(s)%s:\n%s\nthe whole sequence as first run:\n%s",
					seq.seed, fbSeedEnv, seq.seed, fbSeqsEnv, runs, small.numPackets(), f.oracleSplitNote(small), describeFb(small, f.run(small)), describeFb(seq, res))
			}
		}()
	}
	wg.Wait()
	t.Logf("fuzzdiff-binary: %d sequences, %d packets, %d divergence(s), %d not reproducible", seqs.Load(), packets.Load(), reported.Load(), flaky.Load())
	assert.Positive(t, seqs.Load(), "no sequence ran")
}

// Knobs of the binary campaign.
const (
	fbTimeEnv    = "FUZZDIFF_BINARY_TIME"
	fbSeedEnv    = "FUZZDIFF_BINARY_SEED"
	fbSeqsEnv    = "FUZZDIFF_BINARY_SEQS"
	fbWorkersEnv = "FUZZDIFF_BINARY_WORKERS"
	// fbShortTime is the campaign inside `make test`.
	fbShortTime = 10 * time.Second
	// fbReplyTimeout bounds the wait for a batch's replies after its last write.
	fbReplyTimeout = 3 * time.Second
	// fbConfirmRuns is how many replays a divergence gets to come back before it counts.
	fbConfirmRuns = 3
	// fbMaxShrinkRuns bounds the shrinking of one divergence.
	fbMaxShrinkRuns = 300
)

// fbBatch is a run of packets written together (cut at cuts, fractions of its length in per mille),
// then the sentinel NOOP; closes says its last packet makes memcached close the connection.
type fbBatch struct {
	reqs    []binReq
	cuts    []int
	closes  bool
	hostile bool
	// text, when set, is a text command sent instead on a text connection of its own (kept for
	// the sequence), closed by mn: both protocols work on the same items.
	text string
}

// fbSeq is one generated sequence.
type fbSeq struct {
	seed    int64
	batches []fbBatch
}

func (s fbSeq) numPackets() int {
	n := 0
	for _, b := range s.batches {
		n += len(b.reqs)
	}
	return n
}

// fbKeys is the key space: few keys, so that commands meet each other's items.
var fbKeys = []string{"$ka", "$kb", "$kc", "$kd"}

var fbValues = []string{"", "0", "1", "9", "10", "42", "99", "4611686018427387904", "18446744073709551616", "-1", " 1", "abc",
	"\x80\x00\x81\r\n", "hello world"}

func fbGenerate(seed int64) fbSeq {
	r := rand.New(rand.NewSource(seed))
	past := uint32(time.Now().Add(-time.Hour).Unix())
	exptimes := []uint32{0, 0, 0, 3600, past, 0xfffffffe}
	seq := fbSeq{seed: seed}
	// appended: keys an append or prepend touched in this sequence: their value may be a long run of
	// digits (2^63 or more), so no incr/decr on them (see the strchr note above).
	appended := map[string]bool{}
	for range 1 + r.Intn(6) {
		var b fbBatch
		if r.Intn(25) == 0 {
			seq.batches = append(seq.batches, fbHostile(r))
			continue
		}
		if r.Intn(6) == 0 {
			seq.batches = append(seq.batches, fbTextBatch(r, appended))
			continue
		}
		read := map[string]bool{} // keys read earlier in this batch (no incr/decr on them)
		n := 1 + r.Intn(10)
		for tries := 0; len(b.reqs) < n && !b.closes && tries < 100; tries++ {
			key := fbKeys[r.Intn(len(fbKeys))]
			value := fbValues[r.Intn(len(fbValues))]
			exp := exptimes[r.Intn(len(exptimes))]
			var req binReq
			switch k := r.Intn(100); {
			case k < 22:
				req = bGet([]byte{opGet, opGetQ, opGetK, opGetKQ}[r.Intn(4)], key)
				read[key] = true
			case k < 44:
				op := []byte{opSet, opSetQ, opAdd, opAddQ, opReplace, opReplaceQ}[r.Intn(6)]
				req = bStore(op, key, value, []uint32{0, 1, 0xffffffff}[r.Intn(3)], exp)
			case k < 54:
				req = bValue([]byte{opAppend, opAppendQ, opPrepend, opPrependQ}[r.Intn(4)], key, value)
				appended[key] = true
			case k < 60:
				req = bKey([]byte{opDelete, opDeleteQ}[r.Intn(2)], key)
			case k < 73:
				if read[key] || appended[key] {
					continue
				}
				op := []byte{opIncrement, opIncrementQ, opDecrement, opDecrementQ}[r.Intn(4)]
				delta := []uint64{0, 1, 1, 7, 1 << 40}[r.Intn(5)]
				initial := []uint64{0, 5, 1 << 40}[r.Intn(3)]
				req = bArith(op, key, delta, initial, []uint32{0, 0, 0xffffffff, 3600}[r.Intn(4)])
			case k < 83:
				req = bTouch([]byte{opTouch, opGAT, opGATQ, opGATK, opGATKQ}[r.Intn(5)], key, exp)
				read[key] = true
			case k < 87:
				req = bSimple([]byte{opNoop, opVersion}[r.Intn(2)])
			case k < 89:
				req = bSimple(opFlush)
				if r.Intn(2) == 0 {
					req = bFlushDelay([]byte{opFlush, opFlushQ}[r.Intn(2)], 0)
				}
			case k < 93:
				// An opcode memcached does not dispatch, with a body it swallows.
				req = bValue([]byte{0x1b, 0x1f, 0x25, 0x30, 0x3c, 0x3d, 0x4f, 0xff}[r.Intn(8)], "", value)
			case k < 96:
				req = bValue([]byte{opSASLAuth, opSASLStep}[r.Intn(2)], "PLAIN", value)
				if r.Intn(3) == 0 {
					req = bSimple(opSASLList)
				}
			default:
				// Something memcached answers by closing the connection.
				switch r.Intn(5) {
				case 0:
					req = bGet(opGet, keyOfLen(251))
				case 1:
					req = bKey(opGet, key).withExtras(0, 0, 0, 0)
				case 2:
					req = bStore(opSet, key, value, 0, 0).withExtras(1, 2, 3, 4)
				case 3:
					req = bSimple([]byte{opQuit, opQuitQ}[r.Intn(2)])
				default:
					req = bGet(opGetK, key).withBodyLen(2)
				}
				b.closes = true
			}
			if r.Intn(8) == 0 {
				switch r.Intn(3) {
				case 0:
					req = req.withCASRef(casLast)
				case 1:
					req = req.withCASRef(casLastWrong)
				default:
					req = req.withCAS(uint64(1 + r.Intn(3)))
				}
			}
			if r.Intn(10) == 0 {
				req = req.withOpaque(r.Uint32() | 1).withDatatype(byte(r.Intn(256))).withVbucket(uint16(r.Intn(65536)))
			}
			b.reqs = append(b.reqs, req)
		}
		if len(b.reqs) == 0 {
			b.reqs = append(b.reqs, bSimple(opNoop))
		}
		if r.Intn(3) > 0 {
			for range 1 + r.Intn(4) {
				b.cuts = append(b.cuts, r.Intn(1000))
			}
		}
		seq.batches = append(seq.batches, b)
		if b.closes && r.Intn(2) == 0 {
			break
		}
	}
	return seq
}

// fbTextBatch is one text command on a key of the same key space (never mn: it is the barrier). Alone
// in its batch, an incr never follows a read of its key there (see fuzzdiff_test.go).
func fbTextBatch(r *rand.Rand, appended map[string]bool) fbBatch {
	key := fbKeys[r.Intn(len(fbKeys))]
	value := fbTextValues[r.Intn(len(fbTextValues))]
	cmds := []string{
		"get " + key, "gets " + key, "mg " + key + " v f t s c k",
		fmt.Sprintf("set %s %d 0 %d\r\n%s", key, r.Intn(3), len(value), value),
		fmt.Sprintf("cas %s 0 0 %d $cas\r\n%s", key, len(value), value),
		"delete " + key, "md " + key + " q", "touch " + key + " 0", "gat 3600 " + key,
	}
	if appended[key] {
		cmds = append(cmds, fmt.Sprintf("append %s 0 0 %d\r\n%s", key, len(value), value))
	} else {
		cmds = append(cmds, "incr "+key+" 3", "decr "+key+" 1", "ma "+key+" N0 J7 v")
		if r.Intn(4) == 0 {
			appended[key] = true
			cmds = []string{fmt.Sprintf("append %s 0 0 %d\r\n%s", key, len(value), value)}
		}
	}
	return fbBatch{text: cmds[r.Intn(len(cmds))] + "\r\n"}
}

// fbTextValues are values the text batches store (no line breaks).
var fbTextValues = []string{"", "0", "7", "123", "abc", "\x80\x00"}

// fbHostile is a batch of one packet whose header lies: a valid request of a random kind with its
// magic, key length, extras length or body length replaced by a random value. The batch is sent
// whole, alone (no reply of an earlier request is pending: memcached holds those back while it
// swallows a body), and read for fbHostileWait at most (a server may wait for bytes that never come);
// its connection is not used again. STAT is not among them: its replies list the server's own
// slab classes, and for "reset", "settings" and "detail" memcached compares that many bytes whatever
// the key length, reading past a shortened key (a case of its own, "stat key shorter than its group
// name").
func fbHostile(r *rand.Rand) fbBatch {
	bases := []binReq{bGet(opGet, "$ka"), bGet(opGetKQ, "$kb"), bStore(opSet, "$ka", "value", 1, 0), bStore(opAddQ, "$kc", "", 0, 0),
		bArith(opIncrement, "$ka", 1, 1, 0), bTouch(opGAT, "$ka", 0), bValue(opAppend, "$ka", "x"), bKey(opDelete, "$ka"),
		bSimple(opNoop), bSimple(opVersion), bSimple(opFlush), bValue(opSASLAuth, "PLAIN", "\x00a\x00b"),
		bSimple(opSASLList), bValue(0x1b, "k", "v"), bSimple(opQuit)}
	req := bases[r.Intn(len(bases))]
	switch r.Intn(5) {
	case 0:
		req = req.withMagic(byte(r.Intn(256)))
	case 1:
		req = req.withKeyLen(uint32(r.Intn(300)))
	case 2:
		req = req.withExtLen(uint32(r.Intn(40)))
	case 3:
		req = req.withBodyLen(uint32(r.Intn(400)))
	default:
		req = req.withKeyLen(uint32(r.Intn(20))).withExtLen(uint32(r.Intn(24))).withBodyLen(uint32(r.Intn(64)))
	}
	return fbBatch{reqs: []binReq{req}, closes: true, hostile: true}
}

// fbHostileWait bounds the wait for the replies to a hostile batch.
const fbHostileWait = 150 * time.Millisecond

// fbRunner runs sequences on one pair of servers.
type fbRunner struct {
	mc, lc *daemon
	worker int
	n      int
}

// fbResult is the outcome of one sequence on both servers.
type fbResult struct {
	diverged  int // index of the first diverging batch, -1 if none
	want, got []fbSide
	err       error
}

// fbSide is one server's answer to one batch.
type fbSide struct {
	sent []byte
	raw  []byte
	norm string
}

// prefix is a fresh key prefix for every run, so that runs never share items.
func (f *fbRunner) prefix() string {
	f.n++
	p := fmt.Sprintf("b%d%s", f.worker, strconv.FormatInt(int64(f.n%(36*36*36)), 36))
	return p + strings.Repeat("_", keyPrefixLen-len(p))
}

func (f *fbRunner) run(seq fbSeq) fbResult {
	res := fbResult{diverged: -1}
	prefix := f.prefix()
	var outs [2][]fbSide
	var errs [2]error
	var wg sync.WaitGroup
	for i, d := range []*daemon{f.mc, f.lc} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = fbRunOne(d, seq, prefix, false)
		}()
	}
	wg.Wait()
	res.want, res.got = outs[0], outs[1]
	if errs[0] != nil || errs[1] != nil {
		res.err = fmt.Errorf("memcached: %v, leasecached: %v", errs[0], errs[1])
		return res
	}
	for i := range res.want {
		if i >= len(res.got) || !fbSame(res.want[i].norm, res.got[i].norm) {
			res.diverged = i
			return res
		}
	}
	return res
}

// fbRunOne runs a sequence on one server: each batch (its cuts ignored when whole is set), then
// the sentinel, its replies read until the sentinel's, a close or fbReplyTimeout. A closed
// connection is replaced by a new one for the next batch. One binNormalizer spans the sequence.
func fbRunOne(d *daemon, seq fbSeq, prefix string, whole bool) ([]fbSide, error) {
	norm := newBinNormalizer(prefix)
	var out []fbSide
	var c net.Conn
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	var binCAS uint64
	var tc net.Conn // the text connection
	defer func() {
		if tc != nil {
			tc.Close()
		}
	}()
	textCAS := "0"
	opaque := uint32(binAutoOpaque)
	for _, b := range seq.batches {
		if b.text != "" {
			if tc == nil {
				rc, err := dialRawErr(d)
				if err != nil {
					return out, err
				}
				tc = rc.c
			}
			script := expand(b.text, prefix, textCAS, time.Now())
			raw, closed, timedOut := fbTextExchange(tc, script)
			if cas := lastCAS(raw); cas != "" {
				textCAS = cas
			}
			s := fbSide{sent: []byte(script), raw: raw, norm: "text: " + normalizeMeta(normalize(raw, prefix), nil)}
			if closed || timedOut {
				s.norm += fmt.Sprintf("<closed %v, timed out %v>", closed, timedOut)
				tc.Close()
				tc = nil
			}
			out = append(out, s)
			continue
		}
		if c == nil {
			rc, err := dialRawErr(d)
			if err != nil {
				return out, err
			}
			c = rc.c
		}
		var script []byte
		for _, r := range b.reqs {
			opaque++
			script = append(script, r.encode(prefix, opaque, binCAS)...)
		}
		sent := script
		script = append(script[:len(script):len(script)], binSentinelReq...)
		cuts := b.cuts
		if whole {
			cuts = nil
		}
		wait := fbReplyTimeout
		if b.hostile {
			wait = fbHostileWait
		}
		raw, closed, timedOut := fbExchange(c, script, cuts, b.closes, wait)
		if endsWithBinSentinel(raw) {
			raw = raw[:len(raw)-len(binSentinelReply)]
		}
		if cas := lastBinCAS(raw); cas != 0 {
			binCAS = cas
		}
		s := fbSide{sent: sent, raw: raw, norm: norm.render(raw)}
		switch {
		case closed:
			s.norm += markClosed
			c.Close()
			c = nil
		case timedOut && b.hostile:
			s.norm += "<waiting>"
			c.Close()
			c = nil
		case b.hostile:
			c.Close()
			c = nil
		case timedOut:
			s.norm += markTimeout
			c.Close()
			c = nil
		}
		out = append(out, s)
	}
	return out, nil
}

// fbExchange writes script cut at cuts (per mille of the packets' length; a batch whose last packet
// closes the connection is sent whole) and reads until the sentinel's reply, EOF or fbReplyTimeout.
func fbExchange(c net.Conn, script []byte, cuts []int, closes bool, wait time.Duration) (raw []byte, closed, timedOut bool) {
	_ = c.SetDeadline(time.Now().Add(wait))
	got := make(chan reply, 1)
	go func() { got <- readUntil(c, binSentinelReply) }()
	if closes {
		cuts = nil
	}
	prev := 0
	for _, cut := range append(fbPositions(cuts, len(script)-len(binSentinelReq)), len(script)) {
		if cut <= prev {
			continue
		}
		if _, err := c.Write(script[prev:cut]); err != nil {
			break
		}
		prev = cut
		if cut < len(script) {
			time.Sleep(chunkPause)
		}
	}
	_ = c.SetReadDeadline(time.Now().Add(wait))
	rep := <-got
	return rep.data, rep.closed, rep.timedOut
}

// fbSame compares one batch's normalised replies; a text batch's TTLs may differ by fzClockSlack
// (memcached's clock ticks on its own schedule).
func fbSame(a, b string) bool {
	if strings.HasPrefix(a, "text: ") {
		return sameWithinClock(a, b, fzClockSlack)
	}
	return a == b
}

// fbTextExchange writes a text script and mn, and reads until MN, EOF or fbReplyTimeout.
func fbTextExchange(c net.Conn, script string) (raw []byte, closed, timedOut bool) {
	_ = c.SetDeadline(time.Now().Add(fbReplyTimeout))
	got := make(chan reply, 1)
	go func() { got <- readUntil(c, sentinelReply) }()
	_, _ = c.Write(append([]byte(script), sentinelCmd...))
	rep := <-got
	return bytes.TrimSuffix(rep.data, sentinelReply), rep.closed, rep.timedOut
}

// fbPositions turns per-mille cuts into sorted byte offsets within n.
func fbPositions(cuts []int, n int) []int {
	pos := make([]int, 0, len(cuts))
	for _, c := range cuts {
		pos = append(pos, c*n/1000)
	}
	sortInts(pos)
	return pos
}

// shrink drops batches, then single packets, while the sequence still diverges.
func (f *fbRunner) shrink(seq fbSeq) (fbSeq, int) {
	runs := 0
	diverges := func(s fbSeq) bool {
		runs++
		return f.run(s).diverged >= 0
	}
	cur := seq
	for i := 0; i < len(cur.batches) && runs < fbMaxShrinkRuns; {
		cand := fbSeq{seed: cur.seed, batches: append(append([]fbBatch(nil), cur.batches[:i]...), cur.batches[i+1:]...)}
		if len(cand.batches) > 0 && diverges(cand) {
			cur = cand
			continue
		}
		i++
	}
	for bi := 0; bi < len(cur.batches); bi++ {
		for pi := 0; pi < len(cur.batches[bi].reqs) && runs < fbMaxShrinkRuns; {
			b := cur.batches[bi]
			if len(b.reqs) == 1 {
				break
			}
			nb := fbBatch{reqs: append(append([]binReq(nil), b.reqs[:pi]...), b.reqs[pi+1:]...), cuts: b.cuts, closes: b.closes && pi != len(b.reqs)-1, hostile: b.hostile, text: b.text}
			cand := fbSeq{seed: cur.seed, batches: append([]fbBatch(nil), cur.batches...)}
			cand.batches[bi] = nb
			if diverges(cand) {
				cur = cand
				continue
			}
			pi++
		}
	}
	for bi := range cur.batches {
		if len(cur.batches[bi].cuts) == 0 || runs >= fbMaxShrinkRuns {
			continue
		}
		cand := fbSeq{seed: cur.seed, batches: append([]fbBatch(nil), cur.batches...)}
		cand.batches[bi].cuts = nil
		if diverges(cand) {
			cur = cand
		}
	}
	return cur, runs
}

// oracleSplitNote says whether memcached answers the sequence the same sent whole: if not, memcached
// itself depends on read boundaries there, and the generator should avoid it.
func (f *fbRunner) oracleSplitNote(seq fbSeq) string {
	p1, p2 := f.prefix(), f.prefix()
	a, err1 := fbRunOne(f.mc, seq, p1, false)
	b, err2 := fbRunOne(f.mc, seq, p2, true)
	if err1 != nil || err2 != nil || len(a) != len(b) {
		return " (memcached could not be rerun)"
	}
	for i := range a {
		if !fbSame(strings.ReplaceAll(a[i].norm, p1, ""), strings.ReplaceAll(b[i].norm, p2, "")) {
			return " (memcached answers differently when the batches are sent whole!)"
		}
	}
	return ""
}

// describeFb renders a run of a sequence for the report: each batch's bytes and cuts, both servers'
// normalised replies and raw replies in hex.
func describeFb(seq fbSeq, res fbResult) string {
	var b strings.Builder
	for i, bt := range seq.batches {
		fmt.Fprintf(&b, "batch %d (cuts ‰ %v, then the sentinel NOOP %x):\n", i+1, bt.cuts, binSentinelReq)
		if i < len(res.want) {
			fmt.Fprintf(&b, "  sent to memcached:   %s\n", hexTrunc(res.want[i].sent, 800))
		}
		if i < len(res.got) && (i >= len(res.want) || !bytes.Equal(res.got[i].sent, res.want[i].sent)) {
			fmt.Fprintf(&b, "  sent to leasecached: %s\n", hexTrunc(res.got[i].sent, 800))
		}
		mark := ""
		if i == res.diverged {
			mark = "  <== differs"
		}
		if i < len(res.want) {
			fmt.Fprintf(&b, "  memcached%s:\n%s  raw:\n%s", mark, indent(res.want[i].norm), indent(hexDump(res.want[i].raw)))
		}
		if i < len(res.got) {
			fmt.Fprintf(&b, "  leasecached%s:\n%s  raw:\n%s", mark, indent(res.got[i].norm), indent(hexDump(res.got[i].raw)))
		}
	}
	if res.diverged < 0 {
		b.WriteString("(this run did not diverge)\n")
	}
	return b.String()
}
