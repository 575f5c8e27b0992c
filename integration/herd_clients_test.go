package integration

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Unchanged real clients against grace and hold (doc/leases.md, "Grace and hold"): plain get/set readers
// of one hot key, through pymemcache (threads) and php-memcached (processes), each refilling on a miss
// (clients/*/herd.*). The key expires every 2 s; the run counts refills per expiry. memcached and
// leasecached without a mode let every reader that misses refill (a herd); with --grace or --hold one
// reader refills per expiry.
const (
	herdClientReaders = 12
	herdClientSeconds = 5
	// herdEpisodeSplit separates two expiries' refills: refills of one expiry start within a refill's
	// time (100 ms) of each other, and the key lives at least a second between expiries.
	herdEpisodeSplit = 500 * time.Millisecond
)

func TestHerdRealClients(t *testing.T) {
	py := clientScript{name: "pymemcache", interp: []string{"/usr/bin/python3", "python3"},
		probe: []string{"-c", "import pymemcache"}, dir: "python", script: "pymemcache_herd.py",
		pkg: "apt-get install python3-pymemcache"}
	php := clientScript{name: "php-memcached", interp: []string{"php"},
		probe: []string{"-r", `exit(class_exists("Memcached") ? 0 : 1);`}, dir: "php", script: "herd.php",
		pkg: "apt-get install php-cli php-memcached"}
	servers := []struct {
		name    string
		start   func(t *testing.T) *daemon
		perExp  func(t *testing.T, worst int, mean float64)
		counter string // a stat that must have moved
	}{
		{"memcached", func(t *testing.T) *daemon { return startMemcached(t) }, func(t *testing.T, worst int, _ float64) {
			assert.GreaterOrEqual(t, worst, 3, "memcached should show the herd this test is about")
		}, ""},
		{"leasecached --grace", func(t *testing.T) *daemon { return startLeasecached(t, "--grace", "10s") },
			func(t *testing.T, worst int, _ float64) { assert.LessOrEqual(t, worst, 2) }, "get_grace_hits"},
		{"leasecached --hold", func(t *testing.T) *daemon { return startLeasecached(t, "--hold", "2s") },
			func(t *testing.T, worst int, _ float64) { assert.LessOrEqual(t, worst, 2) }, "hold_filled"},
	}
	for _, cs := range []clientScript{py, php} {
		t.Run(cs.name, func(t *testing.T) {
			dir := filepath.Join(clientsDir, cs.dir)
			interp, err := cs.interpreter(dir)
			if err != nil {
				missing(t, "%s not usable (%s): %v", cs.name, cs.pkg, err)
			}
			for _, srv := range servers {
				t.Run(srv.name, func(t *testing.T) {
					parallelBusy(t) // each run has 5 s of readers and their refills, which keep its daemon busy
					d := srv.start(t)
					rc := dialRaw(t, d)
					require.Equal(t, "STORED\r\n", ask(t, rc, "set herd:hot 0 2 5\r\nfresh\r\n"))
					refills := runHerdClients(t, cs, dir, interp, d.addr)
					eps := herdEpisodes(refills)
					require.NotEmpty(t, eps, "the key never expired during the run")
					worst, sum := 0, 0
					for _, n := range eps {
						worst, sum = max(worst, n), sum+n
					}
					mean := float64(sum) / float64(len(eps))
					t.Logf("%d expiries, refills per expiry %v (mean %.1f)", len(eps), eps, mean)
					srv.perExp(t, worst, mean)
					if srv.counter != "" {
						assert.NotEqual(t, "0", statsOf(t, rc)[srv.counter])
					}
				})
			}
		})
	}
}

// runHerdClients runs the client's readers against addr and returns their refill times (unix ms).
func runHerdClients(t *testing.T, cs clientScript, dir, interp, addr string) []int64 {
	t.Helper()
	var runs []toolRun
	if cs.name == "pymemcache" { // one process, a thread per reader
		runs = []toolRun{runTool(dir, clientScriptTimeout, interp, cs.script, addr,
			strconv.Itoa(herdClientReaders), strconv.Itoa(herdClientSeconds))}
	} else { // a process per reader
		runs = make([]toolRun, herdClientReaders)
		var wg sync.WaitGroup
		for i := range runs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				runs[i] = runTool(dir, clientScriptTimeout, interp, cs.script, addr, strconv.Itoa(herdClientSeconds))
			}()
		}
		wg.Wait()
	}
	var refills []int64
	for _, r := range runs {
		out := string(r.stdout)
		require.True(t, r.exit == "exit 0" && strings.HasSuffix(out, "done\n"),
			"%s: %s\nstdout: %s\nstderr: %s", cs.script, r.exit, truncate(r.stdout, 500), truncate(r.stderr, 500))
		for _, line := range strings.Split(strings.TrimSuffix(out, "done\n"), "\n") {
			if line == "" {
				continue
			}
			var ms int64
			_, err := fmt.Sscanf(line, "refill %d", &ms)
			require.NoError(t, err, "line %q", line)
			refills = append(refills, ms)
		}
	}
	return refills
}

// herdEpisodes groups refill times into expiries (gaps over herdEpisodeSplit) and counts each one's.
func herdEpisodes(ms []int64) []int {
	slices.Sort(ms)
	var eps []int
	for i, m := range ms {
		if i == 0 || time.Duration(m-ms[i-1])*time.Millisecond > herdEpisodeSplit {
			eps = append(eps, 0)
		}
		eps[len(eps)-1]++
	}
	return eps
}
