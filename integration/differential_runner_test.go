package integration

import (
	"os"
	"testing"
	"time"
)

// dumpEnv, when set, logs memcached's transcript of every case: handy when
// writing a case, to see what the oracle actually says.
const dumpEnv = "LEASECACHED_INTEGRATION_DUMP"

// diffCase is one named script of a differential test.
type diffCase struct {
	name string
	// steps are script templates (see expand) sent in order on one
	// connection, each followed by the sentinel; more than one step is only
	// needed when a later step uses $cas from an earlier reply.
	steps []string
	// chunk > 0 sends non-whole modes in pieces of this size: scripts of
	// megabytes would take too long byte by byte.
	chunk int
	// noSentinel reads each step's reply until EOF or timeout instead of
	// the sentinel: for input after which the sentinel would be read as
	// part of a bad line.
	noSentinel bool
	// halfClose sends FIN after the (single) step and reads to EOF.
	halfClose bool
	// timeout per step; 0 means defaultReplyTimeout.
	timeout time.Duration
	// wholeOnly: memcached's own answer depends on how the bytes are cut
	// into reads, so only the single-write mode is comparable.
	wholeOnly bool
	// clockEdge: the script asks about a TTL at a boundary that one of the servers' clock ticks can move
	// (runMetaDifferential runs it again when its replies differ).
	clockEdge bool
}

// one is a single-step script.
func one(script string) []string { return []string{script} }

// runDifferential runs every case against both daemons in every send mode
// and requires byte-identical normalized transcripts. It also checks that
// memcached answers the same in every mode: if not, the case itself depends
// on read boundaries and must be marked wholeOnly.
func runDifferential(t *testing.T, mc, lc *daemon, cases []diffCase) {
	t.Helper()
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			parallelBusy(t)
			modes := allModes
			if c.wholeOnly {
				modes = []sendMode{wholeWrite}
			}
			var oracleWhole string
			for _, mode := range modes {
				prefix := runPrefix(i, mode)
				sr := scriptRun{steps: c.steps, mode: mode, prefix: prefix,
					chunk: c.chunk, noSentinel: c.noSentinel, halfClose: c.halfClose, timeout: c.timeout}
				want, got := runBoth(mc, lc, sr)
				if mode == wholeWrite {
					if os.Getenv(dumpEnv) != "" {
						t.Logf("memcached transcript: %q", truncate([]byte(want), 3000))
					}
					oracleWhole = want
				} else if want != oracleWhole {
					t.Errorf("test bug: memcached answers differently when the script is sent %s; mark the case wholeOnly\n%s",
						mode, describeDiff(oracleWhole, want))
				}
				if want != got {
					t.Errorf("sent %s: leasecached differs from memcached\n%s", mode, describeDiff(want, got))
				}
			}
		})
	}
}
