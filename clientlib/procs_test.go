package clientlib_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasecached/leasecached/internal/testdaemon"
	"github.com/stretchr/testify/require"
)

// Helpers that start real server processes on free loopback ports and kill them in cleanup: thin wrappers
// over internal/testdaemon, which the integration suite and the load tool's harness share.

const (
	startTimeout = 5 * time.Second // a server process must accept connections within this
	serverMemMB  = "64"
)

// freePort asks the kernel for a free loopback port (internal/testdaemon).
func freePort(t testing.TB) int {
	t.Helper()
	port, err := testdaemon.FreePort()
	require.NoError(t, err)
	return port
}

// proc is a running server process.
type proc struct {
	Addr string
	Port int
	d    *testdaemon.Daemon
}

// Kill stops the process at once (SIGKILL) and waits (bounded) for it to be reaped. Safe to call twice.
func (p *proc) Kill() { _ = p.d.Kill(startTimeout) }

// startProcess runs bin with args(port) on a free port and waits until it accepts connections there
// (internal/testdaemon: a port taken before the server binds it is retried on a new one). Its output goes
// to this test binary's stderr; cleanup kills it.
func startProcess(t testing.TB, bin string, args func(port int) []string) *proc {
	t.Helper()
	d, err := testdaemon.Start(context.Background(), testdaemon.Spec{Name: filepath.Base(bin), Path: bin,
		Args: args, Output: os.Stderr, StartTimeout: startTimeout})
	require.NoError(t, err)
	p := &proc{Addr: d.Addr, Port: d.Port, d: d}
	t.Cleanup(p.Kill)
	return p
}

// startNutcracker starts twemproxy in front of backends (ketama over md5, no ejection of its own) and
// returns the address it takes clients on.
func startNutcracker(t testing.TB, backends ...*proc) string {
	t.Helper()
	bin := requireBinary(t, "nutcracker")
	dir := t.TempDir()
	listen := "127.0.0.1:" + strconv.Itoa(freePort(t))
	conf := "pool:\n  listen: " + listen + "\n  hash: md5\n  distribution: ketama\n  auto_eject_hosts: false\n" +
		"  timeout: 2000\n  servers:\n"
	for _, b := range backends {
		conf += "   - " + b.Addr + ":1\n"
	}
	confPath := filepath.Join(dir, "nutcracker.yml")
	require.NoError(t, os.WriteFile(confPath, []byte(conf), 0o644))
	startProcess(t, bin, func(statsPort int) []string {
		return []string{"-c", confPath, "-o", filepath.Join(dir, "nutcracker.log"), "-a", "127.0.0.1",
			"-s", strconv.Itoa(statsPort), "-p", filepath.Join(dir, "nutcracker.pid")}
	})
	require.NoError(t, testdaemon.WaitAccepts(listen, startTimeout), "twemproxy not listening on %s", listen)
	return listen
}

func startMemcached(t testing.TB) *proc {
	t.Helper()
	bin := requireBinary(t, "memcached")
	return startProcess(t, bin, func(port int) []string {
		return []string{"-u", "nobody", "-l", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "0", "-m", serverMemMB}
	})
}

// Lease timing of the leasecached processes the tests start.
const (
	testLeaseWindow = "2s"
	testStaleWindow = "10s"
)

func startLeasecached(t testing.TB) *proc {
	t.Helper()
	bin := leasecachedBinary(t)
	return startProcess(t, bin, func(port int) []string {
		args := []string{"-p", strconv.Itoa(port), "-l", "127.0.0.1", "-m", serverMemMB, "-t", "2"}
		if leaseFlags {
			args = append(args, "--lease-window", testLeaseWindow, "--stale-window", testStaleWindow)
		}
		return args
	})
}

// requireBinary finds a Debian-packaged tool the tests need (make test-deps installs them). Missing
// it skips the test on a developer machine but fails it in CI, where a skip would hide a gap.
func requireBinary(t testing.TB, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	for _, dir := range []string{"/usr/sbin", "/usr/bin", "/usr/local/bin"} {
		if p := filepath.Join(dir, name); fileExists(p) {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is not installed (apt-get install %s; make test-deps should)", name, name)
	}
	t.Skipf("%s is not installed (apt-get install %s)", name, name)
	return ""
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

var (
	// leaseFlags: the built server's --help mentions --lease-window (a server without lease support
	// refuses the flag; the lease tests then fail on lease-get itself, which says more).
	leaseFlags bool
	buildOnce  sync.Once
	buildBin   string
	buildErr   error
	buildDir   string
)

// leasecachedBinary builds cmd/leasecached once per test binary run. A build failure fails the
// calling test with the compiler's output.
func leasecachedBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "clientlib-test-")
		if err != nil {
			buildErr = err
			return
		}
		buildDir = dir
		bin := filepath.Join(dir, "leasecached")
		out, err := exec.Command("go", "build", "-o", bin, "github.com/leasecached/leasecached/cmd/leasecached").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build ./cmd/leasecached: %v\n%s", err, out)
			return
		}
		buildBin = bin
		help, _ := exec.Command(bin, "--help").CombinedOutput()
		leaseFlags = strings.Contains(string(help), "lease-window")
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildBin
}

func cleanupBuild() {
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
}
