package integration

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// binCase is one named script of the binary differential tests: steps of request packets sent in
// order on one connection, each step followed by the sentinel NOOP (binSentinelReq). More than one
// step is needed when a later request carries a CAS from an earlier reply (casLast), or to keep
// requests apart in time (sleepBefore).
type binCase struct {
	name  string
	steps [][]binReq
	// chunk > 0 sends non-whole modes in pieces of this size (megabyte values).
	chunk int
	// noSentinel reads each step's replies until EOF or timeout instead of the sentinel's reply.
	noSentinel bool
	// wholeOnly: memcached's own answer depends on how the bytes are cut into reads (or on time),
	// so only the single-write mode is compared.
	wholeOnly bool
	// timeout per step; 0 means defaultReplyTimeout.
	timeout time.Duration
	// sleepBefore[i] pauses before step i.
	sleepBefore map[int]time.Duration
}

// binTranscript is what one server answered to one run of a case.
type binTranscript struct {
	sent  [][]byte // each step as sent (the sentinel left out)
	raw   []byte   // every reply byte, the sentinel's replies removed
	mark  string   // markClosed, markTimeout or ""
	norm  string   // raw normalised (binNormalizer), then mark
	steps int      // steps sent
}

// runBinScript sends a case's steps on one new connection to d in the given mode and returns the
// transcript. It never fails the test, so that both daemons can be driven concurrently.
func runBinScript(d *daemon, c binCase, mode sendMode, prefix string) binTranscript {
	var tr binTranscript
	rc, err := dialRawErr(d)
	if err != nil {
		tr.mark = "<" + err.Error() + ">"
		tr.norm = tr.mark
		return tr
	}
	defer rc.c.Close()
	rc.fixedChunk = c.chunk
	timeout := c.timeout
	if timeout == 0 {
		timeout = defaultReplyTimeout
	}
	var lastCAS uint64
	opaque := uint32(binAutoOpaque)
	for i, step := range c.steps {
		if pause := c.sleepBefore[i]; pause > 0 {
			time.Sleep(pause)
		}
		var script []byte
		for _, r := range step {
			opaque++
			script = append(script, r.encode(prefix, opaque, lastCAS)...)
		}
		tr.sent = append(tr.sent, script)
		tr.steps++
		var sentinel []byte
		if !c.noSentinel {
			sentinel = binSentinelReply
			script = append(script[:len(script):len(script)], binSentinelReq...)
		}
		rep := rc.exchange(script, mode, sentinel, timeout)
		data := rep.data
		if sentinel != nil && endsWithBinSentinel(data) {
			data = data[:len(data)-len(binSentinelReply)]
		}
		tr.raw = append(tr.raw, data...)
		if cas := lastBinCAS(data); cas != 0 {
			lastCAS = cas
		}
		if rep.closed {
			tr.mark = markClosed
			break
		}
		if rep.timedOut {
			tr.mark = markTimeout
			break
		}
	}
	tr.norm = newBinNormalizer(prefix).render(tr.raw) + tr.mark
	return tr
}

// runBinBoth runs a case on both daemons concurrently.
func runBinBoth(mc, lc *daemon, c binCase, mode sendMode, prefix string) (want, got binTranscript) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		want = runBinScript(mc, c, mode, prefix)
	}()
	got = runBinScript(lc, c, mode, prefix)
	wg.Wait()
	return want, got
}

// runBinDifferential runs every case against both daemons in every send mode and requires
// identical normalised replies; it also checks that memcached answers the same in every mode.
func runBinDifferential(t *testing.T, mc, lc *daemon, cases []binCase) {
	t.Helper()
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			parallelBusy(t)
			runBinCase(t, mc, lc, i, c)
		})
	}
}

// runBinCase runs one case in every mode it allows.
func runBinCase(t *testing.T, mc, lc *daemon, idx int, c binCase) {
	t.Helper()
	modes := allModes
	if c.wholeOnly {
		modes = []sendMode{wholeWrite}
	}
	var oracleWhole string
	for _, mode := range modes {
		prefix := runPrefix(idx, mode)
		want, got := runBinBoth(mc, lc, c, mode, prefix)
		if mode == wholeWrite {
			if os.Getenv(dumpEnv) != "" {
				t.Logf("memcached transcript:\n%s", truncate([]byte(want.norm), 6000))
			}
			oracleWhole = want.norm
		} else if want.norm != oracleWhole {
			t.Errorf("test bug: memcached answers differently when the script is sent %s; mark the case wholeOnly\n%s",
				mode, describeDiff(oracleWhole, want.norm))
		}
		if want.norm != got.norm {
			t.Errorf("sent %s: leasecached differs from memcached\n%s", mode, describeBinDiff(want, got))
		}
	}
}

// describeBinDiff renders a divergence: the first differing packet line, both normalised
// transcripts, and the bytes sent and received (hex), for a report that can be replayed.
func describeBinDiff(want, got binTranscript) string {
	var b strings.Builder
	b.WriteString(describeDiff(want.norm, got.norm))
	b.WriteString("\nsent (hex, per step, sentinel NOOP " + fmt.Sprintf("%x", binSentinelReq) + " after each):\n")
	for i, s := range want.sent {
		fmt.Fprintf(&b, "  step %d: %s\n", i+1, hexTrunc(s, 600))
	}
	if len(got.sent) != len(want.sent) {
		fmt.Fprintf(&b, "  (leasecached was sent %d step(s))\n", len(got.sent))
	}
	fmt.Fprintf(&b, "memcached replied (hex)%s:\n%s", want.mark, indent(hexDump(want.raw)))
	fmt.Fprintf(&b, "leasecached replied (hex)%s:\n%s", got.mark, indent(hexDump(got.raw)))
	return b.String()
}

func indent(s string) string {
	if s == "" {
		return "  <nothing>\n"
	}
	return "  " + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n  ") + "\n"
}
