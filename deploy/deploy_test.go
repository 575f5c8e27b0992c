// Package deploy holds the files operators deploy leasecached with (README.md, "Deploy"): the systemd unit
// and the container image definition. Its tests check them against the binary `make static` builds: the
// binary is static, the unit passes systemd-analyze verify, and the daemon started with the unit's or the
// image's flags serves (and, as systemd would see it, notifies READY=1).
package deploy

import (
	"bufio"
	"context"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leasecached/leasecached/internal/sdnotify"
	"github.com/leasecached/leasecached/internal/sdnotify/sdnotifytest"
	"github.com/leasecached/leasecached/internal/testdaemon"
)

const (
	unitFile      = "leasecached.service"
	containerfile = "Containerfile"
	// installedPath is where the unit expects the binary.
	installedPath = "/usr/local/bin/leasecached"
)

// memcachedFlags are the flags memcached users pass (Debian's /etc/memcached.conf, memcached's -c
// default), which the unit's ExecStart passes as they are.
var memcachedFlags = []string{"-p", "11211", "-l", "127.0.0.1", "-m", "64", "-c", "1024"}

var static struct {
	once sync.Once
	dir  string
	path string
	err  error
	out  []byte
}

// TestMain removes the binary the tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	if static.dir != "" {
		os.RemoveAll(static.dir)
	}
	os.Exit(code)
}

// staticBinary is the daemon as `make static` builds it, built once into a temporary directory.
func staticBinary(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed: `make static` builds the binary under test (apt-get install make)")
	}
	s := &static
	s.once.Do(func() {
		if s.dir, s.err = os.MkdirTemp("", "leasecached-static"); s.err != nil {
			return
		}
		s.path = filepath.Join(s.dir, "leasecached")
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "make", "-s", "-C", "..", "static", "STATIC_BIN="+s.path)
		// Not the flags of a make that runs these tests (make test): its jobserver is not ours.
		cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
			return strings.HasPrefix(kv, "MAKEFLAGS=") || strings.HasPrefix(kv, "MFLAGS=") || strings.HasPrefix(kv, "MAKELEVEL=")
		})
		s.out, s.err = cmd.CombinedOutput()
	})
	require.NoError(t, s.err, "make static:\n%s", s.out)
	return s.path
}

// The binary has no dynamic loader (no PT_INTERP) and needs no shared library, so FROM scratch can run it;
// it was built without cgo and with trimmed paths, and it runs.
func TestStaticBinary(t *testing.T) {
	bin := staticBinary(t)
	f, err := elf.Open(bin)
	require.NoError(t, err)
	defer f.Close()
	for _, p := range f.Progs {
		assert.NotEqual(t, elf.PT_INTERP, p.Type, "a program interpreter (dynamic loader) is named")
		assert.NotEqual(t, elf.PT_DYNAMIC, p.Type, "dynamically linked")
	}
	libs, err := f.ImportedLibraries()
	require.NoError(t, err)
	assert.Empty(t, libs, "shared libraries needed")

	info, err := buildinfo.ReadFile(bin)
	require.NoError(t, err)
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	assert.Equal(t, "0", settings["CGO_ENABLED"])
	assert.Equal(t, "true", settings["-trimpath"])

	out, err := exec.Command(bin, "--version").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.True(t, strings.HasPrefix(string(out), "leasecached "), "%q", out)
}

// unitDirectives is the unit's Key=value lines, in order, keyed by section and key.
func unitDirectives(t *testing.T, text string) map[string][]string {
	t.Helper()
	d := map[string][]string{}
	section := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[':
			section = strings.Trim(line, "[]")
		default:
			k, v, ok := strings.Cut(line, "=")
			require.True(t, ok, "not a directive: %q", line)
			d[section+"."+k] = append(d[section+"."+k], v)
		}
	}
	return d
}

// The unit is what systemd-analyze verify accepts without a word, with the binary where ExecStart says;
// Type=notify, started with memcached's flags, hardened as Debian's memcached.service is.
func TestSystemdUnit(t *testing.T) {
	text, err := os.ReadFile(unitFile)
	require.NoError(t, err)
	d := unitDirectives(t, string(text))
	assert.Equal(t, []string{"notify"}, d["Service.Type"], "the daemon notifies readiness")
	require.Len(t, d["Service.ExecStart"], 1)
	argv := strings.Fields(d["Service.ExecStart"][0])
	assert.Equal(t, installedPath, argv[0])
	assert.Equal(t, memcachedFlags, argv[1:], "memcached's flags")
	assert.Equal(t, []string{"/bin/kill -HUP $MAINPID"}, d["Service.ExecReload"], "SIGHUP reloads")
	assert.Equal(t, []string{"on-failure"}, d["Service.Restart"])
	for _, k := range []string{"DynamicUser", "PrivateTmp", "NoNewPrivileges", "PrivateDevices", "ProtectHome"} {
		assert.Equal(t, []string{"yes"}, boolWord(d["Service."+k]), k)
	}
	assert.Equal(t, []string{"strict"}, d["Service.ProtectSystem"])
	assert.NotEmpty(t, d["Service.LimitNOFILE"])

	verify, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed, so the unit is not verified: it is in Debian's systemd " +
			"package, which make test-deps installs")
	}
	// verify checks that ExecStart's binary exists: the one just built, in a copy of the unit.
	bin := staticBinary(t)
	dir := t.TempDir()
	copyPath := filepath.Join(dir, unitFile)
	require.NoError(t, os.WriteFile(copyPath, []byte(strings.ReplaceAll(string(text), installedPath, bin)), 0o644))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, verify, "verify", "--man=no", copyPath)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "systemd-analyze verify:\n%s", out)
	// verify exits 0 even for a directive it ignores ("Failed to parse ..., ignoring"): clean is silent
	// about this unit. Lines about other units on this machine are not this unit's problem.
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.Contains(line, unitFile) || strings.Contains(line, bin) {
			t.Errorf("systemd-analyze verify: %s", line)
		} else if line != "" {
			t.Logf("systemd-analyze verify (another unit): %s", line)
		}
	}
}

// boolWord maps systemd's spellings of true to "yes".
func boolWord(vs []string) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		switch strings.ToLower(v) {
		case "yes", "true", "on", "1":
			out[i] = "yes"
		default:
			out[i] = v
		}
	}
	return out
}

// The daemon started as the unit starts it (its port swapped for a free one) tells the notify socket
// READY=1 when the port accepts, RELOADING=1 and READY=1 for ExecReload's SIGHUP, STOPPING=1 for
// systemctl stop's SIGTERM, and exits 0.
func TestUnitStartsAndNotifies(t *testing.T) {
	text, err := os.ReadFile(unitFile)
	require.NoError(t, err)
	argv := strings.Fields(unitDirectives(t, string(text))["Service.ExecStart"][0])
	bin := staticBinary(t)
	notes := sdnotifytest.Listen(t)
	d, err := testdaemon.Start(context.Background(), testdaemon.Spec{
		Name: "leasecached", Path: bin,
		Args: func(port int) []string { return withPort(t, argv[1:], port) },
		Env:  []string{sdnotify.EnvSocket + "=" + notes.Name},
		Ready: func(addr string) error {
			msg, ok := notes.Next(20 * time.Millisecond)
			if !ok {
				return os.ErrDeadlineExceeded
			}
			assert.Equal(t, sdnotify.Ready, msg)
			return dial(addr)
		},
	})
	require.NoError(t, err)
	defer d.Kill(5 * time.Second)

	require.NoError(t, d.Cmd.Process.Signal(syscall.SIGHUP))
	msg, _ := notes.Next(5 * time.Second)
	assert.True(t, strings.HasPrefix(msg, "RELOADING=1\nMONOTONIC_USEC="), "%q", msg)
	msg, _ = notes.Next(5 * time.Second)
	assert.Equal(t, sdnotify.Ready, msg)

	exited, err := d.Terminate(10 * time.Second)
	require.True(t, exited)
	assert.NoError(t, err, "output:\n%s", d.Out.String())
	msg, _ = notes.Next(5 * time.Second)
	assert.Equal(t, sdnotify.Stopping, msg)
}

// withPort is args with -p's value replaced by port.
func withPort(t *testing.T, args []string, port int) []string {
	out := slices.Clone(args)
	i := slices.Index(out, "-p")
	require.True(t, i >= 0 && i+1 < len(out), "no -p in %q", args)
	out[i+1] = strconv.Itoa(port)
	return out
}

// containerfileInstructions is the Containerfile's instructions, keyed by name, each with its arguments.
func containerfileInstructions(t *testing.T) map[string][]string {
	t.Helper()
	text, err := os.ReadFile(containerfile)
	require.NoError(t, err)
	in := map[string][]string{}
	for _, line := range strings.Split(string(text), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		name, args, _ := strings.Cut(line, " ")
		require.False(t, strings.HasSuffix(line, "\\"), "continued lines are not parsed here: %q", line)
		in[strings.ToUpper(name)] = append(in[strings.ToUpper(name)], strings.TrimSpace(args))
	}
	return in
}

// The image is the static binary alone, run by an unprivileged numeric user, listening on every interface
// of its network namespace on memcached's port; memcached's flags after the image name are accepted.
func TestContainerfile(t *testing.T) {
	in := containerfileInstructions(t)
	assert.Equal(t, []string{"scratch"}, in["FROM"], "one stage, from nothing")
	require.Len(t, in["COPY"], 1, "the binary, and nothing else")
	copyArgs := strings.Fields(in["COPY"][0])
	require.Len(t, copyArgs, 2)
	assert.Equal(t, "leasecached", copyArgs[0], "make static's binary, from its directory (make image)")
	require.Len(t, in["USER"], 1)
	uid, gid, _ := strings.Cut(in["USER"][0], ":")
	for _, id := range []string{uid, gid} {
		n, err := strconv.Atoi(id)
		require.NoError(t, err, "a numeric user: scratch has no /etc/passwd (%q)", in["USER"][0])
		assert.NotZero(t, n, "not root")
	}
	assert.Equal(t, []string{"11211"}, in["EXPOSE"])
	require.Len(t, in["ENTRYPOINT"], 1)
	var entry []string
	require.NoError(t, json.Unmarshal([]byte(in["ENTRYPOINT"][0]), &entry),
		"the exec form, so the daemon is PID 1 and gets SIGTERM itself")
	require.NotEmpty(t, entry)
	assert.Equal(t, copyArgs[1], entry[0], "runs the copied binary")
	assert.Equal(t, []string{"-l", "0.0.0.0"}, entry[1:], "reachable from outside the container")

	// The binary runs with the entrypoint's flags and memcached's after them, as `podman run IMAGE
	// FLAGS` runs it. Tests listen on loopback only: 127.0.0.1 stands for 0.0.0.0 here.
	bin := staticBinary(t)
	args := slices.Clone(entry[1:])
	args[slices.Index(args, "0.0.0.0")] = "127.0.0.1"
	d, err := testdaemon.Start(context.Background(), testdaemon.Spec{
		Name: "leasecached", Path: bin,
		Args: func(port int) []string {
			return append(slices.Clone(args), withPort(t, memcachedFlags[:2:2], port)...)
		},
		Ready: func(addr string) error { return versionReply(addr) },
	})
	require.NoError(t, err)
	exited, err := d.Terminate(10 * time.Second)
	require.True(t, exited)
	assert.NoError(t, err, "output:\n%s", d.Out.String())
}

// versionReply asks addr for its version: nil when it answers as memcached does.
func versionReply(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
		return err
	}
	if _, err := c.Write([]byte("version\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "VERSION ") {
		return &net.AddrError{Err: "unexpected reply " + strconv.Quote(line), Addr: addr}
	}
	return nil
}

func dial(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}
