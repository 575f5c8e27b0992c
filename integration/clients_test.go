package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The other languages' memcached clients (clients/<language>/): each script
// runs one fixed scenario through its client's API and prints one line per
// operation. The test runs it against memcached and against leasecached and
// requires the same output, byte for byte, once CAS values are normalized.
// Every client here speaks the text protocol (php-memcached's binary option
// is set off explicitly); the binary-protocol clients are clients_binary_test.go's.

// Limits of the client tests.
const (
	// clientScriptTimeout bounds one script run; the scenario itself takes
	// about 4 s (3.1 s of it waiting for an item to expire).
	clientScriptTimeout = 40 * time.Second
	// clientProbeTimeout bounds the check that a client library is installed.
	clientProbeTimeout = 10 * time.Second
	// clientWaitDelay bounds the wait for a killed script's output pipes.
	clientWaitDelay = 2 * time.Second
	// clientDiffContext is how many equal lines a diff shows around a change.
	clientDiffContext = 2
	// clientsDir holds the scripts, relative to this package.
	clientsDir = "clients"
	// ciEnv, when set, turns a missing client or tool into a failure: in CI a
	// skip would hide a gap.
	ciEnv = "CI"
)

// casValue matches how the scripts print a CAS unique ("cas=<n>"): the one
// thing that legitimately differs between the two servers' runs.
var casValue = regexp.MustCompile(`cas=\d+`)

// extensionStat matches a "has <name>" line (scripts and memstat print one
// per stat name) naming one of leasecached's own stats: the lease counters
// that doc/leases.md (rules 6 and 11) requires in `stats` (lease, grace and
// hold), its version, the item memory on huge pages, and its lease and stale
// windows, grace, hold and hot_keys in `stats settings`. memcached has none of them, so
// they are no compatibility gap; every memcached stat name is still compared,
// and any other extra name still fails.
var extensionStat = regexp.MustCompile(`^(stats )?has (lease_[a-z_]+|leasecached_version|huge_page_bytes|stale_window|get_grace_hits|grace_[a-z_]+|grace|hold_[a-z_]+|hold|hot_keys)$`)

// dropExtensionStats removes extensionStat lines.
func dropExtensionStats(lines []string) []string {
	out := lines[:0]
	for _, l := range lines {
		if !extensionStat.MatchString(l) {
			out = append(out, l)
		}
	}
	return out
}

// clientScript is one client library's scenario.
type clientScript struct {
	name   string   // subtest name: the client library
	interp []string // interpreter candidates, first usable wins
	probe  []string // interpreter arguments that exit 0 when the library is installed
	dir    string   // directory under clients/ the script runs in
	script string   // script file in dir
	pkg    string   // what provides the library, for the skip message
}

func clientScripts() []clientScript {
	// Debian's python3-* packages install into the system interpreter, which
	// a pyenv or venv python3 earlier on PATH does not see.
	py := []string{"/usr/bin/python3", "python3"}
	return []clientScript{
		{"pymemcache", py, []string{"-c", "import pymemcache"},
			"python", "pymemcache_scenario.py", "apt-get install python3-pymemcache"},
		{"python-memcache", py, []string{"-c", "import memcache"},
			"python", "python_memcache_scenario.py", "apt-get install python3-memcache"},
		{"Cache::Memcached", []string{"perl"}, []string{"-MCache::Memcached", "-e", "1"},
			"perl", "cache_memcached.pl", "apt-get install libcache-memcached-perl"},
		{"Cache::Memcached::Fast", []string{"perl"}, []string{"-MCache::Memcached::Fast", "-e", "1"},
			"perl", "cache_memcached_fast.pl", "apt-get install libcache-memcached-fast-perl"},
		{"php-memcached", []string{"php"}, []string{"-r", `exit(class_exists("Memcached") ? 0 : 1);`},
			"php", "scenario.php", "apt-get install php-cli php-memcached"},
		{"node-memcached", []string{"node"}, []string{"-e", `require("memcached")`},
			"node", "scenario.js", "cd integration/clients/node && npm ci (make test-deps does)"},
	}
}

// missing skips the test on a developer machine and fails it in CI.
func missing(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv(ciEnv) != "" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// interpreter returns the first candidate that runs probe successfully in dir.
func (cs clientScript) interpreter(dir string) (string, error) {
	var errs []string
	for _, cand := range cs.interp {
		path, err := exec.LookPath(cand)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), clientProbeTimeout)
		cmd := exec.CommandContext(ctx, path, cs.probe...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		cancel()
		if err == nil {
			return path, nil
		}
		errs = append(errs, fmt.Sprintf("%s %s: %v: %s", path, strings.Join(cs.probe, " "), err, truncate(out, 300)))
	}
	return "", fmt.Errorf("%s", strings.Join(errs, "; "))
}

// toolRun is what one run of a script or tool produced.
type toolRun struct {
	stdout, stderr []byte
	exit           string // "exit 0", "exit 1", "killed: ..."
}

// runTool runs path with args in dir, bounded by timeout.
func runTool(dir string, timeout time.Duration, path string, args ...string) toolRun {
	return runToolInput(dir, timeout, nil, path, args...)
}

// runToolInput is runTool with stdin as the tool's standard input (nil: none).
func runToolInput(dir string, timeout time.Duration, stdin []byte, path string, args ...string) toolRun {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = dir
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	cmd.WaitDelay = clientWaitDelay
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	err := cmd.Run()
	r := toolRun{stdout: stdout.Bytes(), stderr: stderr.Bytes(), exit: "exit 0"}
	switch {
	case ctx.Err() != nil:
		r.exit = fmt.Sprintf("killed after %v", timeout)
	case err != nil:
		if ee, ok := err.(*exec.ExitError); ok {
			r.exit = "exit " + strconv.Itoa(ee.ExitCode())
		} else {
			r.exit = "error " + err.Error()
		}
	}
	return r
}

// TestClientLibraries runs every client script against memcached and
// leasecached (a fresh pair per client, in parallel) and diffs the outputs.
func TestClientLibraries(t *testing.T) {
	requireMemcached(t)
	requireLeasecached(t)
	for _, cs := range clientScripts() {
		t.Run(cs.name, func(t *testing.T) {
			parallelBusy(t)
			dir, err := filepath.Abs(filepath.Join(clientsDir, cs.dir))
			if err != nil {
				t.Fatalf("locate %s: %v", cs.dir, err)
			}
			interp, err := cs.interpreter(dir)
			if err != nil {
				missing(t, "%s is not usable (%s): %v", cs.name, cs.pkg, err)
			}
			mc, lc := startPair(t)
			var runs [2]toolRun
			var wg sync.WaitGroup
			for i, d := range []*daemon{mc, lc} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					runs[i] = runTool(dir, clientScriptTimeout, interp, cs.script, d.addr)
				}()
			}
			wg.Wait()
			if os.Getenv(dumpEnv) != "" {
				t.Logf("memcached run (%s):\n%s%s", runs[0].exit, runs[0].stdout, runs[0].stderr)
			}
			if runs[0].exit != "exit 0" {
				t.Fatalf("%s against memcached (the oracle) did not finish cleanly (%s): the script is broken\nstdout:\n%s\nstderr:\n%s",
					cs.script, runs[0].exit, runs[0].stdout, runs[0].stderr)
			}
			compareRuns(t, cs.script, runs[0], runs[1])
		})
	}
}

// compareRuns reports every difference between the memcached run (want) and
// the leasecached run (got) of one script, as a line diff.
func compareRuns(t *testing.T, what string, want, got toolRun) {
	t.Helper()
	norm := func(b []byte) []string {
		s := casValue.ReplaceAllString(string(b), "cas=<n>")
		return dropExtensionStats(strings.Split(strings.TrimSuffix(s, "\n"), "\n"))
	}
	if d := lineDiff(norm(want.stdout), norm(got.stdout)); d != "" {
		t.Errorf("%s: stdout differs (- memcached, + leasecached):\n%s", what, d)
	}
	if d := lineDiff(norm(want.stderr), norm(got.stderr)); d != "" {
		t.Errorf("%s: stderr differs (- memcached, + leasecached):\n%s", what, d)
	}
	if want.exit != got.exit {
		t.Errorf("%s: memcached run: %s, leasecached run: %s", what, want.exit, got.exit)
	}
}

// lineDiff returns a unified-style diff of a and b ("" when equal): the
// longest common subsequence of lines, changes with clientDiffContext lines
// around them. Outputs are a few hundred lines, so O(len(a)*len(b)) is fine.
func lineDiff(a, b []string) string {
	n, m := len(a), len(b)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	type line struct {
		tag  byte
		text string
	}
	var all []line
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			all = append(all, line{' ', a[i]})
			i++
			j++
		case j < m && (i == n || lcs[i][j+1] >= lcs[i+1][j]):
			all = append(all, line{'+', b[j]})
			j++
		default:
			all = append(all, line{'-', a[i]})
			i++
		}
	}
	show := make([]bool, len(all))
	changed := false
	for k, l := range all {
		if l.tag == ' ' {
			continue
		}
		changed = true
		for c := max(0, k-clientDiffContext); c <= min(len(all)-1, k+clientDiffContext); c++ {
			show[c] = true
		}
	}
	if !changed {
		return ""
	}
	var sb strings.Builder
	for k, l := range all {
		switch {
		case show[k]:
			fmt.Fprintf(&sb, "%c %s\n", l.tag, l.text)
		case k == 0 || show[k-1]:
			sb.WriteString("  ...\n") // the start of a run of equal lines not shown
		}
	}
	return sb.String()
}

// TestLineDiff checks the diff the client tests report with.
func TestLineDiff(t *testing.T) {
	split := func(s string) []string {
		if s == "" {
			return nil
		}
		return strings.Split(s, "\n")
	}
	cases := []struct {
		name, a, b, want string
	}{
		{"equal", "x\ny", "x\ny", ""},
		{"both empty", "", "", ""},
		{"changed line", "a\nb\nc", "a\nB\nc", "  a\n+ B\n- b\n  c\n"},
		{"added at end", "a", "a\nb", "  a\n+ b\n"},
		{"removed at start", "a\nb", "b", "- a\n  b\n"},
		{"context elided", "1\n2\n3\n4\n5\n6\n7\n8", "1\n2\n3\n4\n5\n6\n7\nX",
			"  ...\n  6\n  7\n+ X\n- 8\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := lineDiff(split(tc.a), split(tc.b)); got != tc.want {
				t.Errorf("lineDiff(%q, %q) =\n%q\nwant\n%q", tc.a, tc.b, got, tc.want)
			}
		})
	}
}
