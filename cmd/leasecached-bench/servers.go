package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Timeouts of the server processes the harness starts.
const (
	serverStartTimeout = 10 * time.Second
	serverPollInterval = 20 * time.Millisecond
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

// runningServer is a started server process; stop it with stop.
type runningServer struct {
	name    string
	addr    string
	pid     int
	cmd     *exec.Cmd
	logPath string
	logFile *os.File
	exited  chan struct{}
	waitErr error
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func expandCommand(cmd string, port int, lim serverLimits) string {
	return strings.NewReplacer("{port}", strconv.Itoa(port), "{threads}", strconv.Itoa(lim.Threads),
		"{mem}", strconv.Itoa(lim.MemMB), "{conns}", strconv.Itoa(lim.ConnLimit)).Replace(cmd)
}

// startServer starts spec on a free loopback port and waits until it answers "version". Its stdout and
// stderr go to a log file in logDir (leasecached's gctrace is read from there).
func startServer(ctx context.Context, spec serverSpec, lim serverLimits, logDir string) (*runningServer, error) {
	var lastErr error
	for attempt := 0; attempt < serverStartAttempts; attempt++ {
		s, err := startOnce(ctx, spec, lim, logDir, attempt)
		if err == nil {
			return s, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("start %s: %w", spec.Name, lastErr)
}

func startOnce(ctx context.Context, spec serverSpec, lim serverLimits, logDir string, attempt int) (*runningServer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	command := expandCommand(spec.Command, port, lim)
	logPath := filepath.Join(logDir, fmt.Sprintf("%s-%d-%d.log", spec.Name, port, attempt))
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("server log: %w", err)
	}
	cmd := exec.Command("sh", "-c", "exec "+command)
	cmd.Env = append(os.Environ(), spec.Env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Own process group, so that a Ctrl-C on the harness reaches the harness first, and it stops the
	// servers itself.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("run %q: %w", command, err)
	}
	s := &runningServer{name: spec.Name, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		pid: cmd.Process.Pid, cmd: cmd, logPath: logPath, logFile: logFile, exited: make(chan struct{})}
	go func() {
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()
	deadline := time.Now().Add(serverStartTimeout)
	for {
		if err := pingServer(s.addr); err == nil {
			return s, nil
		}
		select {
		case <-s.exited:
			s.logFile.Close()
			tail, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("%q exited (%v): %s", command, s.waitErr, lastLines(tail, 5))
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-time.After(serverPollInterval):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("%q not answering on %s after %v", command, s.addr, serverStartTimeout)
		}
	}
}

// pingServer checks that a server answers "version".
func pingServer(addr string) error {
	c, err := net.DialTimeout("tcp", addr, serverPollInterval*5)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(time.Second)); err != nil {
		return err
	}
	if _, err := c.Write([]byte("version\r\n")); err != nil {
		return err
	}
	l, err := newReplyReader(c).line()
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(l, []byte("VERSION ")) {
		return fmt.Errorf("version reply %q", l)
	}
	return nil
}

// stop ends the server: SIGTERM, then SIGKILL when it has not exited in time.
func (s *runningServer) stop() error {
	defer s.logFile.Close()
	select {
	case <-s.exited:
		return nil
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
		return nil
	case <-time.After(serverStopTimeout):
	}
	_ = s.cmd.Process.Kill()
	select {
	case <-s.exited:
		return errors.New(s.name + ": killed after not stopping on SIGTERM")
	case <-time.After(serverStopTimeout):
		return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", s.name, s.pid)
	}
}

// alive reports whether the process is still running.
func (s *runningServer) alive() bool {
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

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
