package integration

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// libmemcached's command-line tools (memcp, memcat, memrm, memflush, memstat,
// memping, memexist, memtouch, memdump, memslap, memaslap, memcapable) against
// memcached and leasecached. Each step runs once against each server, in the
// same order, and what the tool printed and its exit status must agree once
// the server's address is replaced by a placeholder. They use libmemcached's
// text protocol unless told --binary, which no step here does (clients_tools_binary_test.go's do).

// Limits of the tool steps.
const (
	// toolTimeout bounds one tool run; the slowest (memaslap, memcapable)
	// take well under a second on loopback.
	toolTimeout = 20 * time.Second
	// toolShowMax is the longest output shown verbatim in a comparison;
	// longer output is shown as its length and digest.
	toolShowMax = 2048
	// toolBigFile is the size of the large file memcp stores (under -I 1m).
	toolBigFile = 500 * 1024
	// lruSettle lets memcached's LRU maintainer finish moving items between
	// its segments (it sleeps up to a second between runs). memdump lists
	// only the COLD segment, so right after the previous steps read and
	// touched the files, memcached itself sometimes lists all three and
	// sometimes omits one: a timing difference between two memcacheds, not
	// behaviour. Once settled, each file is alone in its class and listed.
	lruSettle = 1500 * time.Millisecond
)

// Debian ships libmemcached-tools as memc<tool> (memccat...) because mem* names
// clash with other packages; upstream names them mem<tool>.
var toolPrefixes = []string{"memc", "mem"}

// toolEnv is what a step's arguments may refer to.
type toolEnv struct {
	addr, host, port string
	dir              string // holds the files memcp copies
}

// toolStep is one tool invocation and the view of its result we compare.
type toolStep struct {
	name string
	tool string // "cat" for memccat / memcat
	args func(e toolEnv) []string
	// view renders the normalized result; nil means exit status + stdout + stderr.
	view func(r toolRun) string
}

// toolSettle is how long to wait before running a step (by name) against
// each server.
var toolSettle = map[string]time.Duration{"dump": lruSettle}

var (
	// slapSeconds is the timing in memslap's report lines.
	slapSeconds = regexp.MustCompile(`\d+\.\d+ seconds`)
	// analyzeItemSize is memstat --analyze's average item size: computed from
	// stat `bytes`, which counts each server's own item header (a stats value
	// that legitimately differs, see README.md).
	analyzeItemSize = regexp.MustCompile(`(Average Item Size \(incl/overhead\)\s*:) \d+ bytes`)
)

func toolSteps() []toolStep {
	servers := func(e toolEnv) string { return "--servers=" + e.addr }
	with := func(extra ...string) func(e toolEnv) []string {
		return func(e toolEnv) []string { return append([]string{servers(e)}, extra...) }
	}
	file := func(name string, extra ...string) func(e toolEnv) []string {
		return func(e toolEnv) []string {
			return append(append([]string{servers(e)}, extra...), filepath.Join(e.dir, name))
		}
	}
	return []toolStep{
		{"ping", "ping", with(), nil},
		{"cp small", "cp", file("small.txt"), nil},
		{"cp --add existing", "cp", file("small.txt", "--add"), nil},
		{"cp --replace --flags --expire", "cp", file("small.txt", "--replace", "--flags=9", "--expire=100"), nil},
		{"cat --flags small", "cat", with("--flags", "small.txt"), nil},
		{"cp large", "cp", file("large.bin"), nil},
		{"cat large", "cat", with("large.bin"), nil},
		{"cp binary", "cp", file("binary.bin"), nil},
		{"cat binary", "cat", with("binary.bin"), nil},
		{"cat missing", "cat", with("missing"), nil},
		{"cat one present one missing", "cat", with("small.txt", "missing", "binary.bin"), nil},
		{"exist small", "exist", with("small.txt"), nil},
		{"exist missing", "exist", with("missing"), nil},
		{"touch small", "touch", with("--expire=100", "small.txt"), nil},
		{"touch missing", "touch", with("--expire=100", "missing"), nil},
		{"dump", "dump", with(), sortedLinesView},
		{"stat", "stat", with(), statKeysView},
		{"stat settings", "stat", with("settings"), statKeysView},
		{"stat --server-version", "stat", with("--server-version"), nil},
		{"stat --analyze", "stat", with("--analyze"), func(r toolRun) string {
			return defaultView(toolRun{exit: r.exit, stderr: r.stderr,
				stdout: analyzeItemSize.ReplaceAll(r.stdout, []byte("$1 <n> bytes"))})
		}},
		{"rm small", "rm", with("small.txt"), nil},
		{"rm small again", "rm", with("small.txt"), nil},
		{"flush", "flush", with(), nil},
		{"cat large after flush", "cat", with("large.bin"), nil},
		{"slap set", "slap", with("--concurrency=2", "--execute-number=200", "--test=set"), slapView},
		{"slap get", "slap", with("--concurrency=2", "--execute-number=200", "--test=get"), slapView},
		{"slap mget", "slap", with("--concurrency=2", "--execute-number=200", "--test=mget"), slapView},
		{"slap set --noreply", "slap", with("--concurrency=2", "--execute-number=200", "--test=set", "--noreply"), slapView},
		{"aslap with verification", "aslap", func(e toolEnv) []string {
			return []string{"-s", e.addr, "-x", "2000", "-c", "4", "-T", "1", "--verify=0.5", "--exp_verify=0.1", "-d", "5"}
		}, func(r toolRun) string {
			// The run time and the throughput it implies are not behaviour.
			var keep [][]byte
			for _, l := range bytes.Split(r.stdout, []byte("\n")) {
				if !bytes.HasPrefix(l, []byte("Run time:")) {
					keep = append(keep, l)
				}
			}
			return defaultView(toolRun{exit: r.exit, stderr: r.stderr, stdout: bytes.Join(keep, []byte("\n"))})
		}},
		// memcapable is libmemcached's protocol conformance suite; -a: ASCII only.
		{"capable -a", "capable", func(e toolEnv) []string {
			return []string{"-a", "-h", e.host, "-p", e.port, "-t", "5"}
		}, nil},
	}
}

// showBytes renders b verbatim when short, else as length and digest.
func showBytes(b []byte) string {
	if len(b) <= toolShowMax {
		return strconv.Quote(string(b))
	}
	return fmt.Sprintf("<%d bytes, sha1 %x>", len(b), sha1.Sum(b))
}

func defaultView(r toolRun) string {
	return fmt.Sprintf("%s\nstdout: %s\nstderr: %s", r.exit, showBytes(r.stdout), showBytes(r.stderr))
}

// sortedLinesView: memdump lists keys in the server's LRU order, which is
// not part of the protocol; the set of keys is.
func sortedLinesView(r toolRun) string {
	lines := strings.Split(strings.TrimSpace(string(r.stdout)), "\n")
	slices.Sort(lines)
	return defaultView(toolRun{exit: r.exit, stderr: r.stderr, stdout: []byte(strings.Join(lines, "\n"))})
}

// statKeysView keeps the stat names memstat printed and the version: the
// other values (pid, uptime, byte counts) are not comparable.
func statKeysView(r toolRun) string {
	var keys []string
	version := ""
	for _, l := range strings.Split(string(r.stdout), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(l), ": ")
		if !ok || strings.HasPrefix(l, "Server:") {
			continue
		}
		keys = append(keys, k)
		if k == "version" {
			version = v
		}
	}
	slices.Sort(keys)
	// One line per stat name, so that the diff names each missing or extra stat.
	return fmt.Sprintf("%s\nversion: %s\nstderr: %s\nhas %s", r.exit, version, showBytes(r.stderr), strings.Join(keys, "\nhas "))
}

// slapView drops the timings from memslap's report.
func slapView(r toolRun) string {
	return defaultView(toolRun{exit: r.exit, stderr: r.stderr, stdout: slapSeconds.ReplaceAll(r.stdout, []byte("<t> seconds"))})
}

// findTool returns the installed binary of a libmemcached tool, or "".
func findTool(name string) string {
	for _, prefix := range toolPrefixes {
		if p, err := exec.LookPath(prefix + name); err == nil {
			return p
		}
	}
	return ""
}

// writeToolFiles creates the files memcp stores: a small text file, a large
// value and one holding every byte value and the protocol's own delimiters.
func writeToolFiles(t *testing.T, dir string) {
	t.Helper()
	large := make([]byte, 0, toolBigFile+sha256.Size)
	for i := 0; len(large) < toolBigFile; i++ {
		sum := sha256.Sum256([]byte(strconv.Itoa(i)))
		large = append(large, sum[:]...)
	}
	binary := make([]byte, 0, 600)
	for i := 0; i < 256; i++ {
		binary = append(binary, byte(i))
	}
	binary = append(binary, "\r\nEND\r\nVALUE x 0 1\r\n"...)
	for i := 255; i >= 0; i-- {
		binary = append(binary, byte(i))
	}
	files := map[string][]byte{
		"small.txt":  []byte("hello from memcp\n"),
		"large.bin":  large[:toolBigFile],
		"binary.bin": binary,
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatalf("write %s: %v", name, err)
		}
	}
}

// normalizeAddr replaces the server's address and port in a tool's output.
func normalizeAddr(b []byte, e toolEnv) []byte {
	b = bytes.ReplaceAll(b, []byte(e.addr), []byte("<addr>"))
	return regexp.MustCompile(`\b`+regexp.QuoteMeta(e.port)+`\b`).ReplaceAll(b, []byte("<port>"))
}

// TestLibmemcachedTools runs toolSteps against a fresh memcached and a fresh
// leasecached and reports every step whose view differs.
func TestLibmemcachedTools(t *testing.T) {
	parallelWaiting(t)
	if findTool("cat") == "" {
		missing(t, "libmemcached-tools is not installed (apt-get install libmemcached-tools; make test-deps does)")
	}
	mc, lc := startPair(t)
	runToolSteps(t, mc, lc, toolSteps())
}

// runToolSteps runs each step against mc, then lc, in order, and reports every step whose views differ.
func runToolSteps(t *testing.T, mc, lc *daemon, steps []toolStep) {
	t.Helper()
	dir := t.TempDir()
	writeToolFiles(t, dir)
	envs := make([]toolEnv, 2)
	for i, d := range []*daemon{mc, lc} {
		host, port, _ := strings.Cut(d.addr, ":")
		envs[i] = toolEnv{addr: d.addr, host: host, port: port, dir: dir}
	}
	for _, st := range steps {
		path := findTool(st.tool)
		if path == "" {
			if os.Getenv(ciEnv) != "" {
				t.Errorf("%s: mem%s / memc%s is not installed", st.name, st.tool, st.tool)
			} else {
				t.Logf("%s: skipped: mem%s / memc%s is not installed", st.name, st.tool, st.tool)
			}
			continue
		}
		view := st.view
		if view == nil {
			view = defaultView
		}
		var got [2]string
		for i, e := range envs {
			settle := toolSettle[st.name]
			// A step that waits for memcached to settle runs until two runs a settle apart agree (at most
			// five): one wait was not always enough on a loaded machine.
			prev := ""
			for try := 0; try < 5; try++ {
				time.Sleep(settle)
				r := runTool(dir, toolTimeout, path, st.args(e)...)
				r.stdout, r.stderr = normalizeAddr(r.stdout, e), normalizeAddr(r.stderr, e)
				got[i] = view(r)
				if settle == 0 || got[i] == prev {
					break
				}
				prev = got[i]
			}
		}
		if os.Getenv(dumpEnv) != "" {
			t.Logf("%s (%s %s) memcached:\n%s", st.name, filepath.Base(path), strings.Join(st.args(envs[0]), " "), got[0])
		}
		if d := lineDiff(dropExtensionStats(strings.Split(got[0], "\n")), dropExtensionStats(strings.Split(got[1], "\n"))); d != "" {
			t.Errorf("%s: %s %s differs (- memcached, + leasecached):\n%s",
				st.name, filepath.Base(path), strings.Join(st.args(envs[1]), " "), d)
		}
	}
}
