package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The tests of the code that meets the kernel, run on Debian 12's kernel (6.1) in the virtual machine of
// vm_test.go: `make vm-tests`. Kernels differ where the warm restart lives (tmpfs's fallocate was
// interrupted by any signal on 6.1 and on no later kernel, doc/design/deploy.md), so these tests are
// run there as they are here, from static test binaries in the image.

// vmStaticEnv names the static daemon the image carries (make static): TestVMSuites builds the image.
const vmStaticEnv = "LEASECACHED_VM_STATIC"

const (
	vmSuitesDir     = "/opt/leasecached-tests" // where the image has the test binaries (image.sh's TESTS)
	vmSuitesMemMB   = 3072                     // the guest's memory: /dev/shm is half of it (a test needs 1 GiB free there)
	vmSuitesTimeout = 90 * time.Minute         // one suite, emulated
)

// vmSuites are the test binaries run in the guest, each from a copy of its package's directory (its
// testdata): the packages that keep the cache in files, and the daemon's warm-restart tests, against the
// image's /usr/local/bin/leasecached (daemonEnv).
var vmSuites = []vmSuite{
	{name: "integration", pkg: "integration", run: "^(TestRestart|TestDataDir)"},
	{name: "shard-crashsteps", pkg: "shard", tags: "crashsteps", run: "Step"},
	{name: "slab", pkg: "slab"},
	{name: "shard", pkg: "shard"},
}

// vmSuite is a test binary: the package, its build tags, its -test.run pattern.
type vmSuite struct{ name, pkg, tags, run string }

// vmRunEnv, set to SUITE=REGEXP, builds and runs only that suite of vmSuites, with -test.run REGEXP: one
// test in the guest without the others' half hour.
const vmRunEnv = "LEASECACHED_VM_RUN"

// vmSuitesToRun are vmSuites, or the one vmRunEnv names with its pattern.
func vmSuitesToRun(t *testing.T) []vmSuite {
	t.Helper()
	only := os.Getenv(vmRunEnv)
	if only == "" {
		return vmSuites
	}
	name, run, ok := strings.Cut(only, "=")
	require.True(t, ok, "%s=%q: want SUITE=REGEXP", vmRunEnv, only)
	for _, s := range vmSuites {
		if s.name == name {
			s.run = run
			return []vmSuite{s}
		}
	}
	require.FailNow(t, "no such suite", "%s=%q: the suites are integration, shard-crashsteps, slab, shard", vmRunEnv, only)
	return nil
}

// vmTestsThat is an awk program (quoted for the guest's shell) that prints, from a -test.v log, the lines
// logged by each test whose result is the variable what (FAIL, SKIP): a line belongs to the test the last
// "=== RUN", "=== CONT" or "=== NAME" line named (parallel tests interleave).
const vmTestsThat = `'/^=== (RUN|CONT|PAUSE|NAME) / { cur = $3; next }
$0 ~ "^ *--- " what ": " { that[$3] = 1 }
cur != "" && !/^ *--- (PASS|SKIP|FAIL): / { lines[cur] = lines[cur] $0 "\n" }
END { for (t in that) printf "### %s %s\n%s", what, t, lines[t] }'`

// TestVMSuites builds vmSuites' binaries, the image with them, boots it and runs each suite in the guest.
func TestVMSuites(t *testing.T) {
	vmDir, static := os.Getenv(vmDirEnv), os.Getenv(vmStaticEnv)
	if vmDir == "" || static == "" {
		t.Skipf("%s and %s are not set: `make vm-tests` sets them", vmDirEnv, vmStaticEnv)
	}
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	tests := filepath.Join(t.TempDir(), "tests")
	suites := vmSuitesToRun(t)
	for _, s := range suites {
		dir := filepath.Join(tests, s.name)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		args := []string{"test", "-c", "-o", filepath.Join(dir, s.name+".test")}
		if s.tags != "" {
			args = append(args, "-tags", s.tags)
		}
		cmd := exec.Command("go", append(args, "./"+s.pkg)...)
		cmd.Dir, cmd.Env = root, append(os.Environ(), "CGO_ENABLED=0") // static: the guest has none of our libraries
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go %s: %s", strings.Join(args, " "), out)
		if _, err := os.Stat(filepath.Join(root, s.pkg, "testdata")); err == nil {
			mustRun(t, "cp", "-a", filepath.Join(root, s.pkg, "testdata"), dir)
		}
	}
	mustRun(t, "sh", filepath.Join(root, "deploy/vm/image.sh"), vmDir, static, tests)

	m := startVM(t, vmDir, vmSuitesMemMB)
	m.waitServing("")
	// The tests start daemons of their own: the unit's would only take memory and /dev/shm.
	m.must("systemctl stop " + vmUnit + " && rm -rf /dev/shm/leasecached-*")
	t.Logf("the guest: %s", m.must("uname -r; nproc; free -m | head -2; df -h /dev/shm /tmp | tail -n +2"))

	for _, s := range suites {
		t.Run(s.name, func(t *testing.T) {
			m.t = t
			log := "/root/" + s.name + ".log"
			run := ""
			if s.run != "" {
				run = fmt.Sprintf(" -test.run '%s'", s.run)
			}
			start := time.Now()
			_, status := m.runWithin(fmt.Sprintf("cd %s/%s && %s=/usr/local/bin/leasecached ./%s.test -test.v -test.count=1 "+
				"-test.timeout %s%s > %s 2>&1", vmSuitesDir, s.name, daemonEnv, s.name, vmSuitesTimeout, run, log),
				vmSuitesTimeout+time.Minute)
			// How many passed, why each skipped and what each failed logged; the whole log stays in the guest.
			summary, _ := m.run(fmt.Sprintf("echo $(grep -c '^ *--- PASS' %s) passed; awk -v what=SKIP %s %s",
				log, vmTestsThat, log))
			t.Logf("%s in the guest, %s, exit status %d: %s", s.name, time.Since(start).Round(time.Second), status, summary)
			if os.Getenv(vmRunEnv) != "" { // one test: its whole log
				out, _ := m.run("head -n 3000 " + log)
				t.Logf("%s:\n%s", log, out)
			}
			if status != 0 {
				out, _ := m.run(fmt.Sprintf("awk -v what=FAIL %s %s | head -n 600; echo ...; tail -n 20 %s",
					vmTestsThat, log, log))
				assert.Zero(t, status, "%s exited %d in the guest:\n%s", s.name, status, out)
			}
		})
	}
}
