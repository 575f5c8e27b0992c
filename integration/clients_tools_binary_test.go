package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// libmemcached's tools over the binary protocol (issue 25): memcapable -b, its binary conformance suite
// (every binary test it has), and short memslap --binary runs, each against a fresh memcached and a fresh
// leasecached. A step's view must agree: the tool's exit status and output (memslap's timings dropped),
// and after each memslap run the server's request counters, which show that every request was answered
// as memcached answers it (memslap itself reports no errors).

// bcSlapCounters are the stats a memslap run moves deterministically: its keys are random but distinct.
var bcSlapCounters = []string{"cmd_get", "get_hits", "get_misses", "cmd_set", "curr_items", "total_items"}

// Bounds of the wait for a server to finish what memslap sent.
const (
	bcSlapSettle      = 100 * time.Millisecond
	bcSlapSettleReads = 20
)

// bcTextStats reads d's stats over the text protocol (a fresh connection: the servers negotiate per connection).
func bcTextStats(t *testing.T, d *daemon) map[string]string {
	t.Helper()
	rep := roundTrip(t, d, "stats\r\n", wholeWrite)
	require.False(t, rep.timedOut || rep.closed, "%s: stats: %q", d.name, rep.data)
	st := map[string]string{}
	for _, l := range strings.Split(string(rep.data), "\r\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "STAT" {
			st[f[1]] = f[2]
		}
	}
	return st
}

// bcSettledCounters reads d's bcSlapCounters until two reads bcSlapSettle apart agree (at most bcSlapSettleReads
// reads): with --noreply memslap may exit before the server has read all it sent.
func bcSettledCounters(t *testing.T, d *daemon) string {
	t.Helper()
	view := func() string {
		st := bcTextStats(t, d)
		var counters []string
		for _, k := range bcSlapCounters {
			counters = append(counters, fmt.Sprintf("%s=%s", k, st[k]))
		}
		return strings.Join(counters, " ")
	}
	last := view()
	for range bcSlapSettleReads {
		time.Sleep(bcSlapSettle)
		now := view()
		if now == last {
			break
		}
		last = now
	}
	return last
}

// bcToolSteps are clients_tools_test.go's toolSteps told to use the binary protocol: --binary for
// the tools that have it, -B for memaslap. memping and memdump have no such option and memcapable's
// binary suite is TestBinaryLibmemcachedTools's own step: those are left out.
func bcToolSteps() []toolStep {
	var steps []toolStep
	for _, st := range toolSteps() {
		var flag string
		switch st.tool {
		case "ping", "dump", "capable":
			continue
		case "aslap":
			flag = "-B"
		default:
			flag = "--binary"
		}
		args := st.args
		st.args = func(e toolEnv) []string { return append(args(e), flag) }
		st.name += " " + flag
		steps = append(steps, st)
	}
	return steps
}

// TestBinaryLibmemcachedTools runs memcapable -b, memslap --binary, and bcToolSteps against both
// servers; the tool steps once with the protocol negotiated and once with both servers binary-only (-B
// binary), which shows that every step does speak binary.
func TestBinaryLibmemcachedTools(t *testing.T) {
	parallelBusy(t) // with the other binary-protocol tests, after the package\'s serial ones
	capable, slap := findTool("capable"), findTool("slap")
	if capable == "" || slap == "" {
		missing(t, "libmemcached-tools is not installed (apt-get install libmemcached-tools; make test-deps does)")
	}
	for _, proto := range []struct {
		name string
		args []string
	}{{"auto", nil}, {"binary", []string{"-B", "binary"}}} {
		t.Run("tools/"+proto.name, func(t *testing.T) {
			parallelWaiting(t)
			mc, lc := startPair(t, proto.args...)
			runToolSteps(t, mc, lc, bcToolSteps())
		})
	}
	mc, lc := startPair(t)
	daemons := []*daemon{mc, lc}

	t.Run("capable -b", func(t *testing.T) {
		var views [2]string
		for i, d := range daemons {
			host, port, _ := strings.Cut(d.addr, ":")
			views[i] = defaultView(runTool(t.TempDir(), toolTimeout, capable, "-b", "-h", host, "-p", port, "-t", "5"))
		}
		require.Contains(t, views[0], "All tests passed", "memcapable -b against memcached (the oracle)")
		assert.Equal(t, views[0], views[1], "memcapable -b (memcached, leasecached)")
	})

	for _, test := range []string{"--test=set", "--test=get", "--test=mget", "--test=set --noreply",
		"--test=get --concurrency=8 --execute-number=1000"} {
		t.Run("slap --binary "+test, func(t *testing.T) {
			// Each run on a fresh pair, so that counters are the run's own. A run whose views differ is made
			// once more on another pair: on a loaded machine memslap's own run can go otherwise (it failed
			// once in many loaded runs, and not again in 3 runs under -race); a real divergence differs twice.
			var views [2]string
			for attempt := range 2 {
				if attempt > 0 {
					t.Logf("first run differed, run again on a fresh pair:\nmemcached:\n%s\nleasecached:\n%s", views[0], views[1])
				}
				mc, lc := startPair(t)
				for i, d := range []*daemon{mc, lc} {
					// Later flags win: a test's own --concurrency and --execute-number override these.
					args := append([]string{"--servers=" + d.addr, "--binary", "--concurrency=2", "--execute-number=200"},
						strings.Fields(test)...)
					r := runTool(t.TempDir(), toolTimeout, slap, args...)
					views[i] = slapView(r) + "\n" + bcSettledCounters(t, d)
				}
				if views[0] == views[1] {
					break
				}
			}
			require.Contains(t, views[0], "exit 0", "memslap against memcached (the oracle)")
			assert.Equal(t, views[0], views[1], "memslap --binary and the counters after it (memcached, leasecached)")
		})
	}
}
