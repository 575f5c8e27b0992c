package integration

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// flagRunTimeout bounds a daemon run that is expected to exit by itself
// (--version, bad flags).
const flagRunTimeout = 5 * time.Second

// sigtermTimeout bounds a graceful shutdown.
const sigtermTimeout = 5 * time.Second

// runDaemonOnce runs the daemon with args and waits for it to exit.
func runDaemonOnce(t *testing.T, args ...string) (stdout, stderr string, exitCode int) {
	t.Helper()
	return runOnce(t, leasecachedPath, args...)
}

// runOnce runs the binary at path with args and waits (bounded) for it to exit.
func runOnce(t *testing.T, path string, args ...string) (stdout, stderr string, exitCode int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), flagRunTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %v did not exit within %v (stdout %q, stderr %q)", path, args, flagRunTimeout, out.String(), errOut.String())
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), errOut.String(), 0
	case errors.As(err, &ee):
		return out.String(), errOut.String(), ee.ExitCode()
	}
	t.Fatalf("run %s %v: %v", path, args, err)
	return "", "", -1
}

var versionRE = regexp.MustCompile(`\d+\.\d+`)

func TestFlagVersion(t *testing.T) {
	requireLeasecached(t)
	stdout, stderr, code := runDaemonOnce(t, "--version")
	if code != 0 {
		t.Fatalf("--version exited %d, want 0 (stdout %q, stderr %q)", code, stdout, stderr)
	}
	line := strings.TrimSpace(stdout)
	if !versionRE.MatchString(line) || strings.Contains(line, "\n") {
		t.Errorf("--version printed %q on stdout, want one line with a version number", stdout)
	}
}

// TestFlagErrors: every bad flag or value must make the daemon exit non-zero
// at once with exactly one line on stderr saying why (no usage dump).
func TestFlagErrors(t *testing.T) {
	requireLeasecached(t)
	cases := []struct {
		name string
		args []string
	}{
		{"memory not a number", []string{"-m", "abc"}},
		{"memory negative", []string{"-m", "-5"}},
		{"port out of range", []string{"-p", "70000"}},
		{"port negative", []string{"-p", "-1"}},
		{"port not a number", []string{"--port", "http"}},
		{"item size bad suffix", []string{"-I", "2x"}},
		{"item size not a number", []string{"--max-item-size", "big"}},
		{"conn limit not a number", []string{"-c", "many"}},
		{"threads not a number", []string{"-t", "two"}},
		{"unknown flag", []string{"--no-such-flag"}},
		{"missing value", []string{"-p"}},
		{"listen address unresolvable", []string{"-p", "0", "-l", "no.such.host.invalid"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			parallelBusy(t)
			stdout, stderr, code := runDaemonOnce(t, c.args...)
			if code == 0 {
				t.Errorf("leasecached %v exited 0, want non-zero (stdout %q, stderr %q)", c.args, stdout, stderr)
			}
			reason := strings.TrimRight(stderr, "\n")
			if reason == "" || strings.Contains(reason, "\n") {
				t.Errorf("leasecached %v: stderr is %q, want exactly one line giving the reason", c.args, stderr)
			}
		})
	}
}

// TestSIGTERM: the daemon, with an idle client connected and one item
// stored, exits with status 0 promptly after SIGTERM.
func TestSIGTERM(t *testing.T) {
	lc := startLeasecached(t)
	rc := dialRaw(t, lc)
	rep := rc.exchange([]byte("set k 0 0 1\r\nx\r\nmn\r\n"), wholeWrite, sentinelReply, defaultReplyTimeout)
	if string(rep.data) != "STORED\r\nMN\r\n" {
		t.Errorf("set before SIGTERM: got %q", rep.data)
	}
	start := time.Now()
	exited, err := lc.terminate(sigtermTimeout)
	if !exited {
		t.Fatalf("leasecached did not exit within %v of SIGTERM (%v)", sigtermTimeout, err)
	}
	if err != nil {
		t.Errorf("leasecached exited with %v after SIGTERM, want status 0 (output: %s)", err, lc.out.String())
	}
	t.Logf("exited %v after SIGTERM", time.Since(start).Round(time.Millisecond))
}
