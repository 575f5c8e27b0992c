package harness

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/leasecached/leasecached/internal/testdaemon"
	"github.com/leasecached/leasecached/tools/bench/load"
)

// Timeouts of the server processes the harness starts.
const (
	serverStartTimeout = 10 * time.Second
	serverStopTimeout  = 10 * time.Second
	// serverStartAttempts covers the race between picking a free port and the server binding it.
	serverStartAttempts = 3
)

// serverSpec says how to start one server. Command is run by sh -c "exec ...", so it may carry quoting;
// the placeholders {port}, {threads}, {mem} (MB) and {conns} are replaced first.
type serverSpec struct {
	Name    string
	Command string
	Env     []string // added to the environment
	// TLS, when enabled, is how clients reach the server: it listens with TLS only (-Z).
	TLS load.TLSOptions
}

// serverLimits are the resource flags every server of a comparison gets.
type serverLimits struct {
	Threads, MemMB, ConnLimit int
}

func memcachedSpec(bin string) serverSpec {
	cmd := bin + " -p {port} -l 127.0.0.1 -U 0 -t {threads} -m {mem} -c {conns}"
	if os.Geteuid() == 0 {
		cmd += " -u root" // memcached refuses to run as root without it
	}
	return serverSpec{Name: "memcached", Command: cmd}
}

func leasecachedSpec(bin string) serverSpec {
	return serverSpec{Name: "leasecached", Command: bin + " -p {port} -l 127.0.0.1 -t {threads} -m {mem} -c {conns}"}
}

// tlsFlags are memcached's switches for a TLS listener, which leasecached takes too (issue 26); {cert} and
// {key} are the files of tlsCert.
const tlsFlags = " -Z -o ssl_chain_cert={cert},ssl_key={key}"

// tlsCert is the certificate and key every TLS server of a run gets (load.WriteSelfSignedCert).
type tlsCert struct{ certFile, keyFile string }

// withTLS turns a spec into its TLS form: cmd (the spec's own command with tlsFlags when empty), {cert} and
// {key} replaced, clients verifying the server against the certificate.
func withTLS(sp serverSpec, cmd string, c tlsCert) serverSpec {
	if cmd == "" {
		cmd = sp.Command + tlsFlags
	}
	sp.Command = strings.NewReplacer("{cert}", shellQuote(c.certFile), "{key}", shellQuote(c.keyFile)).Replace(cmd)
	sp.TLS = load.TLSOptions{Enabled: true, CAFile: c.certFile}
	return sp
}

// runningServer is a started server process; stop it with stop.
type runningServer struct {
	name    string
	addr    string
	pid     int
	proc    *testdaemon.Daemon
	logPath string
	logFile *os.File
	tls     load.TLSOptions // how to connect (plaintext unless enabled)
}

func expandCommand(cmd string, port int, lim serverLimits) string {
	return strings.NewReplacer("{port}", strconv.Itoa(port), "{threads}", strconv.Itoa(lim.Threads),
		"{mem}", strconv.Itoa(lim.MemMB), "{conns}", strconv.Itoa(lim.ConnLimit)).Replace(cmd)
}

// startServer starts spec on a free loopback port (internal/testdaemon) and waits until it answers
// "version". Its stdout and stderr go to a log file in logDir (leasecached's gctrace is read from there).
func startServer(ctx context.Context, spec serverSpec, lim serverLimits, logDir string) (*runningServer, error) {
	logFile, err := os.CreateTemp(logDir, spec.Name+"-*.log")
	if err != nil {
		return nil, fmt.Errorf("server log: %w", err)
	}
	ready := load.Ping
	if spec.TLS.Enabled {
		ready = load.TLSPing(spec.TLS)
	}
	d, err := testdaemon.Start(ctx, testdaemon.Spec{
		Name: spec.Name, Path: "sh", Env: spec.Env, Output: logFile, Ready: ready,
		Args:         func(port int) []string { return []string{"-c", "exec " + expandCommand(spec.Command, port, lim)} },
		StartTimeout: serverStartTimeout, Attempts: serverStartAttempts,
		// Own process group, so that a Ctrl-C on the harness reaches the harness first, and it stops the
		// servers itself.
		OwnProcessGroup: true,
	})
	if err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", spec.Name, err)
	}
	return &runningServer{name: spec.Name, addr: d.Addr, pid: d.Cmd.Process.Pid, proc: d,
		logPath: logFile.Name(), logFile: logFile, tls: spec.TLS}, nil
}

// stop ends the server: SIGTERM, then SIGKILL when it has not exited in time.
func (s *runningServer) stop() error {
	defer s.logFile.Close()
	return s.proc.Stop(serverStopTimeout)
}

// alive reports whether the process is still running (a server the harness did not start, as tests make
// them, always is).
func (s *runningServer) alive() bool { return s.proc == nil || s.proc.Running() }

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// logSize is the current length of the server's log, to read what it writes during one phase.
func (s *runningServer) logSize() int64 {
	fi, err := os.Stat(s.logPath)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// logSince returns the log written from offset on.
func (s *runningServer) logSince(off int64) []byte {
	b, err := os.ReadFile(s.logPath)
	if err != nil || off > int64(len(b)) {
		return nil
	}
	return b[off:]
}

// makeLogDir returns dir (created if needed, kept afterwards) or, when dir is empty, a temporary directory
// that cleanup removes.
func makeLogDir(dir string) (string, func(), error) {
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", nil, fmt.Errorf("log dir: %w", err)
		}
		return dir, func() {}, nil
	}
	tmp, err := os.MkdirTemp("", "leasecached-bench-")
	if err != nil {
		return "", nil, fmt.Errorf("log dir: %w", err)
	}
	return tmp, func() { os.RemoveAll(tmp) }, nil
}
