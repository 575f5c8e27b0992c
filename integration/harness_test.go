package integration

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasecached/leasecached/internal/testdaemon"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Limits of the process harness. Each is a bound on how long a test may wait
// for a daemon, so that a wedged server fails the test instead of hanging it.
// Starting and stopping is internal/testdaemon's; these are the suite's bounds.
const (
	// startTimeout bounds how long a freshly started daemon may take to
	// accept its first TCP connection.
	startTimeout = 5 * time.Second
	// stopTimeout bounds how long a daemon may take to exit after SIGKILL
	// (or SIGTERM in the tests that check graceful shutdown).
	stopTimeout = 5 * time.Second
	// startAttempts is how often we retry when the port we picked was taken
	// by someone else between picking and binding.
	startAttempts = 3
	// buildTimeout bounds `go build` of the daemon in TestMain.
	buildTimeout = 3 * time.Minute
	// waitingParallel is -test.parallel here unless the command line sets it: most of this package's
	// parallel tests wait (for silence ending a reply, an exptime, an idle timeout), each on daemons of
	// its own, so more of them run at once than there are CPUs; the ones that keep CPUs busy are held
	// to one a CPU (parallelBusy). Every parallel test says which it is (TestParallelKinds).
	waitingParallel = 8
)

// busySlots holds a token for each parallel test that keeps CPUs busy or times its replies
// (parallelBusy): at most one a CPU, as -test.parallel's default would allow.
var busySlots = make(chan struct{}, runtime.NumCPU())

// parallelWaiting is t.Parallel for a test that mostly waits, on daemons of its own: up to
// waitingParallel of them run at once.
func parallelWaiting(t *testing.T) { t.Parallel() }

// parallelBusy is t.Parallel for a test whose daemons or clients keep CPUs busy for most of its run, or
// whose replies must come within a timeout: it also waits for a busySlot, held until it and its subtests
// end. Its own parallel subtests are parallelWaiting ones: a busy test under another would wait for a
// slot that its parent may hold.
func parallelBusy(t *testing.T) {
	t.Parallel()
	busySlots <- struct{}{}
	t.Cleanup(func() { <-busySlots })
}

// TestParallelKinds: every parallel test of the package says whether it mostly waits or keeps CPUs busy
// (parallelWaiting, parallelBusy), so that waitingParallel does not run busy ones beyond one a CPU.
func TestParallelKinds(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", nil, 0)
	require.NoError(t, err)
	require.NotEmpty(t, pkgs)
	for _, pkg := range pkgs {
		for _, file := range pkg.Files {
			for _, d := range file.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok || fn.Body == nil || fn.Name.Name == "parallelWaiting" || fn.Name.Name == "parallelBusy" {
					continue
				}
				ast.Inspect(fn.Body, func(n ast.Node) bool {
					if call, ok := n.(*ast.CallExpr); ok {
						if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Parallel" && len(call.Args) == 0 {
							assert.Fail(t, "t.Parallel outside parallelWaiting and parallelBusy", "%s", fset.Position(call.Pos()))
						}
					}
					return true
				})
			}
		}
	}
}

// Default resource flags given to BOTH daemons so that they are compared
// under the same limits (memcached's own names and units).
const (
	defaultMemoryMB = "64"
	defaultThreads  = "2"
)

const memcachedBinary = "memcached"

// raceReport is what a -race binary prints when it detects a data race.
const raceReport = "WARNING: DATA RACE"

// selfTestEnv, when set, makes startLeasecached start a second memcached:
// it validates the harness and the scripts (everything must pass then) while
// the daemon under test does not build or to tell a harness bug from a
// leasecached bug.
const selfTestEnv = "LEASECACHED_INTEGRATION_SELFTEST"

// daemonEnv names a daemon binary to test instead of building one (a build without -race only): where
// no Go toolchain is, such as make vm-tests' guest (doc/design/deploy.md, "The virtual machine").
const daemonEnv = "LEASECACHED_DAEMON"

var (
	// leasecachedPath is the binary built by TestMain, with the race detector
	// when the tests have it; leasecachedPlainPath is the same code without it.
	leasecachedPath, leasecachedPlainPath string
	// buildErr is non-nil when the daemon did not build; every test that
	// needs it fails with this error (memcached-only tests still run).
	buildErr error
	// memcachedPath is the oracle's path, or "" when it is not installed.
	memcachedPath string
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

// runMain exists so that deferred clean-up runs before os.Exit.
func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "leasecached-integration-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "integration: create temp dir: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)

	if buildErr = daemons(dir); buildErr != nil {
		fmt.Fprintf(os.Stderr, "integration: %v\n", buildErr)
	}
	if p, err := exec.LookPath(memcachedBinary); err == nil {
		memcachedPath = p
	}
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", strconv.Itoa(waitingParallel))
	}
	return m.Run()
}

// daemons sets leasecachedPath and leasecachedPlainPath: built into dir, or the binary daemonEnv names.
func daemons(dir string) error {
	if bin := os.Getenv(daemonEnv); bin != "" && !raceEnabled {
		leasecachedPath, leasecachedPlainPath = bin, bin
		_, err := os.Stat(bin)
		return err
	}
	leasecachedPath = filepath.Join(dir, "leasecached")
	leasecachedPlainPath = leasecachedPath
	plainErr := make(chan error, 1)
	if raceEnabled {
		// Built alongside the race build: the tests that measure the daemon's memory or hold it to a
		// latency bound need it as users run it (the race detector multiplies both).
		leasecachedPlainPath = filepath.Join(dir, "leasecached-plain")
		go func() { plainErr <- buildDaemon(leasecachedPlainPath, false) }()
	} else {
		plainErr <- nil
	}
	err := buildDaemon(leasecachedPath, raceEnabled)
	if perr := <-plainErr; err == nil {
		err = perr
	}
	return err
}

// buildDaemon compiles ./cmd/leasecached from the module root (the parent of
// this package's directory, where `go test` runs us), with the race detector
// when race is set.
func buildDaemon(out string, race bool) error {
	root, err := filepath.Abs("..")
	if err != nil {
		return fmt.Errorf("locate module root: %w", err)
	}
	args := []string{"build", "-o", out}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "./cmd/leasecached")...)
	cmd.Dir = root
	var output bytes.Buffer
	cmd.Stdout = &output
	cmd.Stderr = &output
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start go build: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(buildTimeout):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("go build ./cmd/leasecached: timed out after %v", buildTimeout)
	}
	if err != nil {
		return fmt.Errorf("go build ./cmd/leasecached in %s: %w\n%s", root, err, output.String())
	}
	return nil
}

// daemon is one running server process under test: a testdaemon.Daemon
// under the names the suite's tests use.
type daemon struct {
	name string             // "memcached" or "leasecached", for messages
	addr string             // host:port to dial
	cmd  *exec.Cmd          // the process (cmd.Process.Pid, cmd.Process.Signal)
	out  *testdaemon.Output // combined stdout+stderr, shown when a test fails
	proc *testdaemon.Daemon // what started it

	// exited is closed once the process has exited; waitErr is its exit
	// status then (nil for status 0).
	exited  chan struct{}
	waitErr error
}

// requireMemcached fails (never skips) the test when the oracle is missing.
func requireMemcached(t testing.TB) {
	t.Helper()
	if memcachedPath == "" {
		t.Fatalf("memcached is not on PATH: it is the oracle of these tests; run `make test` (which installs it)")
	}
}

// requireLeasecached fails the test when the daemon did not build.
func requireLeasecached(t testing.TB) {
	t.Helper()
	if buildErr != nil {
		t.Fatalf("leasecached binary unavailable: %v", buildErr)
	}
}

// startMemcached starts the oracle on a free loopback port with the shared
// defaults (-m 64 -t 2, UDP off); extra args are appended and, being parsed
// later, override the defaults (e.g. "-I", "2m").
func startMemcached(t testing.TB, args ...string) *daemon {
	t.Helper()
	requireMemcached(t)
	return startDaemon(t, "memcached", memcachedPath, memcachedArgs(args))
}

// noLRUThreads are memcached's args that turn off its LRU maintainer and crawler threads, for tests
// whose expected replies or counters must not depend on when those threads wake up: they reap expired
// items (an item read a moment later is then a plain miss, not get_expired) and hold references that
// change how incr rewrites an item (see fuzzdiff_test.go).
var noLRUThreads = []string{"-o", "no_lru_maintainer,no_lru_crawler"}

// memcachedArgs is memcached's command line for a port: the shared defaults, then args.
func memcachedArgs(args []string) func(port int) []string {
	return func(port int) []string {
		base := []string{"-l", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "0",
			"-m", defaultMemoryMB, "-t", defaultThreads}
		if os.Geteuid() == 0 {
			// memcached refuses to run as root without naming a user.
			base = append(base, "-u", "root")
		}
		return append(base, args...)
	}
}

// startLeasecached starts the built daemon on a free loopback port with the
// same defaults as startMemcached; extra args are appended.
func startLeasecached(t testing.TB, args ...string) *daemon {
	t.Helper()
	if os.Getenv(selfTestEnv) != "" {
		d := startMemcached(t, args...)
		d.name = "memcached-as-leasecached"
		return d
	}
	requireLeasecached(t)
	return startDaemon(t, "leasecached", leasecachedPath, leasecachedArgs(args))
}

// leasecachedArgs is leasecached's command line for a port: the shared defaults, then args.
func leasecachedArgs(args []string) func(port int) []string {
	return func(port int) []string {
		base := []string{"-l", "127.0.0.1", "-p", strconv.Itoa(port),
			"-m", defaultMemoryMB, "-t", defaultThreads}
		return append(base, args...)
	}
}

// startLeasecachedPlain is startLeasecached with the daemon built without the
// race detector, for tests that measure its memory or its latency.
func startLeasecachedPlain(t testing.TB, args ...string) *daemon {
	t.Helper()
	requireLeasecached(t)
	return startDaemon(t, "leasecached", leasecachedPlainPath, leasecachedArgs(args))
}

// startPair starts memcached and leasecached with the same extra args.
func startPair(t testing.TB, args ...string) (mc, lc *daemon) {
	t.Helper()
	mc = startMemcached(t, args...)
	lc = startLeasecached(t, args...)
	return mc, lc
}

// startDaemon picks a free port, starts the binary and waits until it
// accepts connections (internal/testdaemon: a port stolen between picking
// and binding is retried on a new one). Cleanup kills it.
func startDaemon(t testing.TB, name, path string, argv func(port int) []string) *daemon {
	t.Helper()
	return startDaemonSpec(t, testdaemon.Spec{Name: name, Path: path, Args: argv})
}

// startDaemonSpec is startDaemon for a spec of the caller's (its Ready: a daemon that serves only a Unix
// socket), with the suite's start timeout, and its attempts unless the spec sets them.
func startDaemonSpec(t testing.TB, spec testdaemon.Spec) *daemon {
	t.Helper()
	d, err := launchDaemon(spec)
	require.NoError(t, err)
	t.Cleanup(func() { d.kill(t) })
	return d
}

// launchDaemon is startDaemonSpec for any goroutine: the caller registers d.kill as a cleanup.
func launchDaemon(spec testdaemon.Spec) (*daemon, error) {
	spec.StartTimeout = startTimeout
	if spec.Attempts == 0 {
		spec.Attempts = startAttempts
	}
	p, err := testdaemon.Start(context.Background(), spec)
	if err != nil {
		return nil, err
	}
	d := &daemon{name: spec.Name, addr: p.Addr, cmd: p.Cmd, out: p.Out, proc: p, exited: make(chan struct{})}
	go func() {
		<-p.Exited()
		d.waitErr = p.Err()
		close(d.exited)
	}()
	return d, nil
}

// kill stops the daemon (SIGKILL) and reaps it; used by t.Cleanup. When the
// test failed, the daemon's output is logged to help diagnose it.
func (d *daemon) kill(t testing.TB) {
	d.forceStop()
	if strings.Contains(d.out.String(), raceReport) {
		t.Errorf("%s reported a data race during this test", d.name)
	}
	if t.Failed() {
		if out := d.out.String(); out != "" {
			t.Logf("%s output:\n%s", d.name, truncate([]byte(out), 4000))
		}
	}
}

// forceStop sends SIGKILL and waits (bounded) until exited is closed.
func (d *daemon) forceStop() {
	if d.proc.Kill(stopTimeout) == nil {
		<-d.exited
	}
}

// terminate sends SIGTERM and waits (bounded) for the exit. exited reports
// whether the process ended in time; err is its exit error (nil for status 0).
func (d *daemon) terminate(timeout time.Duration) (exited bool, err error) {
	exited, err = d.proc.Terminate(timeout)
	if exited {
		<-d.exited
	}
	return exited, err
}

// freePort asks the kernel for an unused loopback TCP port (the listener is
// closed before anyone binds it).
func freePort() (int, error) { return testdaemon.FreePort() }

// truncate shortens b for log messages.
func truncate(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return fmt.Sprintf("%s... (%d more bytes)", b[:n], len(b)-n)
}
