// Package testdaemon starts a server binary on a free loopback port, waits until it serves, and stops it.
// It is the one copy of that logic: the integration suite (integration/harness_test.go), clientlib's tests
// (clientlib/procs_test.go), the parser's oracle test (protocol/oracle_test.go) and the load tool
// (tools/bench: the benchmark harness and its end-to-end test) are thin wrappers over it.
//
// The contract:
//   - Start returns a daemon only once it is ready: it accepts a TCP connection on Addr (or passes
//     Spec.Ready), within Spec.StartTimeout.
//   - A daemon that exits during start-up, or never becomes ready, is stopped and tried again on a new port,
//     Spec.Attempts times in all: the port FreePort picked may be taken by someone else before the daemon
//     binds it. Where /proc tells (Linux), a port that answers is ready only when the daemon (or a child
//     of it) is the one listening on it. The error names the binary, its arguments and the end of its
//     output.
//   - Every wait is bounded: start-up by Spec.StartTimeout and the context, Stop and Kill by the timeout
//     they are given. Nothing here waits forever on a wedged process.
//   - The process is reaped by a goroutine of its own; Exited is closed when it has been, and Err then
//     holds its exit status.
package testdaemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Defaults of a Spec's zero fields.
const (
	// DefaultStartTimeout bounds how long a started daemon may take to become ready.
	DefaultStartTimeout = 5 * time.Second
	// DefaultAttempts is how many ports a start tries: the race between picking a free port and the
	// daemon binding it is rare, and two losses in a row rarer still.
	DefaultAttempts = 3
	// pollInterval is the pause between two readiness checks.
	pollInterval = 10 * time.Millisecond
	// dialTimeout bounds one connection attempt of the default readiness check.
	dialTimeout = 100 * time.Millisecond
	// tailLimit is how much of the output Out keeps when it is also written to Spec.Output.
	tailLimit = 8 << 10
	// errorTail is how much of the output an error message quotes.
	errorTail = 4000
)

// Spec says how to start one daemon.
type Spec struct {
	Name string                  // for messages, e.g. "memcached"
	Path string                  // the binary
	Args func(port int) []string // its arguments, given the port it is to listen on
	Env  []string                // added to this process's environment
	// Output receives the daemon's stdout and stderr. An *os.File is handed to the daemon itself, so its
	// output is not copied through this process (a benchmark's servers log so); Out then stays empty. Any
	// other writer gets a copy and Out keeps the last 8 KiB. nil: Out keeps all of it.
	Output io.Writer
	// Ready reports whether the daemon at addr serves; nil: it accepts a TCP connection.
	Ready func(addr string) error
	// StartTimeout bounds each attempt's wait for Ready; 0: DefaultStartTimeout.
	StartTimeout time.Duration
	// Attempts is the number of ports tried; 0: DefaultAttempts.
	Attempts int
	// OwnProcessGroup starts the daemon in a process group of its own, so that a Ctrl-C on the terminal
	// reaches only this process, which then stops the daemon itself.
	OwnProcessGroup bool
}

// Daemon is a started server process.
type Daemon struct {
	Name string
	Addr string // 127.0.0.1:Port
	Port int
	Cmd  *exec.Cmd
	Out  *Output // what the daemon wrote to stdout and stderr (see Spec.Output)

	outFile *os.File // Spec.Output, when it is a file
	exited  chan struct{}
	err     error
}

// FreePort asks the kernel for an unused loopback TCP port. The listener is closed before the daemon
// binds the port, so someone else may take it first: Start tries again on a new port.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Start starts spec on a free loopback port and waits until it is ready, trying again on a new port when
// an attempt fails (see the package comment).
func Start(ctx context.Context, spec Spec) (*Daemon, error) {
	attempts := spec.Attempts
	if attempts <= 0 {
		attempts = DefaultAttempts
	}
	var errs []error
	for range attempts {
		port, err := FreePort()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", spec.Name, err)
		}
		d, err := StartOnPort(ctx, spec, port)
		if err == nil {
			return d, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("%s: not started after %d attempts: %w", spec.Name, len(errs), errs[len(errs)-1])
}

// StartOnPort is one attempt of Start, on the given port. A daemon that does not become ready is stopped
// before the error returns.
func StartOnPort(ctx context.Context, spec Spec, port int) (*Daemon, error) {
	args := spec.Args(port)
	d := &Daemon{Name: spec.Name, Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Port: port,
		Cmd: exec.Command(spec.Path, args...), Out: &Output{}, exited: make(chan struct{})}
	var w io.Writer = d.Out
	switch o := spec.Output.(type) {
	case nil:
	case *os.File:
		w, d.outFile = o, o
	default:
		d.Out.limit = tailLimit
		w = io.MultiWriter(o, d.Out)
	}
	d.Cmd.Stdout, d.Cmd.Stderr = w, w
	if len(spec.Env) > 0 {
		d.Cmd.Env = append(os.Environ(), spec.Env...)
	}
	if spec.OwnProcessGroup {
		d.Cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	if err := d.Cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s %v: %w", spec.Path, args, err)
	}
	go func() {
		d.err = d.Cmd.Wait()
		close(d.exited)
	}()
	if err := d.waitReady(ctx, spec); err != nil {
		_ = d.Kill(DefaultStartTimeout)
		return nil, fmt.Errorf("%s %s: %w; output:\n%s", spec.Path, strings.Join(args, " "), err, d.outputTail())
	}
	return d, nil
}

// outputTail is the end of what the daemon wrote, for an error message.
func (d *Daemon) outputTail() string {
	if d.outFile == nil {
		return d.Out.Tail(errorTail)
	}
	// Only a regular file can be read back: os.Stderr's name is /dev/stderr, and reading a terminal or
	// the pipe `go test` gives its children blocks until someone writes to it, which here is never.
	if info, err := d.outFile.Stat(); err != nil || !info.Mode().IsRegular() {
		return fmt.Sprintf("(written to %s)", d.outFile.Name())
	}
	b, err := os.ReadFile(d.outFile.Name())
	if err != nil {
		return fmt.Sprintf("(in %s: %v)", d.outFile.Name(), err)
	}
	o := &Output{}
	o.Write(b)
	return o.Tail(errorTail)
}

func (d *Daemon) waitReady(ctx context.Context, spec Spec) error {
	ready := spec.Ready
	if ready == nil {
		ready = accepts
	}
	timeout := spec.StartTimeout
	if timeout <= 0 {
		timeout = DefaultStartTimeout
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		select {
		case <-d.exited:
			return fmt.Errorf("exited during start-up (%v)", d.err)
		default:
		}
		if ready(d.Addr) == nil {
			if owned, known := listenerOwned(d.Cmd.Process.Pid, d.Port); owned || !known {
				return nil
			}
			// Someone else listens on the port (listenerOwned): this daemon fails to bind it and exits, and
			// the next attempt takes another port.
		}
		select {
		case <-d.exited:
			return fmt.Errorf("exited during start-up (%v)", d.err)
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("not ready on %s after %v", d.Addr, timeout)
		case <-time.After(pollInterval):
		}
	}
}

// WaitAccepts waits at most timeout until addr accepts a TCP connection: for a port a daemon opens besides
// the one Start waited for.
func WaitAccepts(addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := accepts(addr)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(pollInterval)
	}
}

// accepts is the default readiness check: the daemon accepts a TCP connection.
func accepts(addr string) error {
	c, err := net.DialTimeout("tcp", addr, dialTimeout)
	if err != nil {
		return err
	}
	return c.Close()
}

// Exited is closed once the process has exited and been reaped.
func (d *Daemon) Exited() <-chan struct{} { return d.exited }

// Err is the process's exit status (nil for status 0); meaningful once Exited is closed.
func (d *Daemon) Err() error {
	select {
	case <-d.exited:
		return d.err
	default:
		return nil
	}
}

// Running reports whether the process has not exited yet.
func (d *Daemon) Running() bool {
	select {
	case <-d.exited:
		return false
	default:
		return true
	}
}

// Terminate sends SIGTERM and waits at most timeout for the exit. exited says whether the process ended
// in time; err is its exit status then (nil for status 0), or why the signal could not be sent.
func (d *Daemon) Terminate(timeout time.Duration) (exited bool, err error) {
	if !d.Running() {
		return true, d.err
	}
	if err := d.Cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return false, fmt.Errorf("send SIGTERM to %s: %w", d.Name, err)
	}
	return d.wait(timeout), d.Err()
}

// Kill sends SIGKILL and waits at most timeout for the exit; an error says the process outlived it.
// Killing a daemon that has exited does nothing.
func (d *Daemon) Kill(timeout time.Duration) error {
	if !d.Running() {
		return nil
	}
	_ = d.Cmd.Process.Kill()
	if !d.wait(timeout) {
		return fmt.Errorf("%s (pid %d) did not exit within %v of SIGKILL", d.Name, d.Cmd.Process.Pid, timeout)
	}
	return nil
}

// Stop ends the daemon politely: SIGTERM, then SIGKILL when it has not exited within timeout, each wait
// bounded by timeout. The error says it had to be killed, or outlived even that.
func (d *Daemon) Stop(timeout time.Duration) error {
	if exited, _ := d.Terminate(timeout); exited {
		return nil
	}
	if err := d.Kill(timeout); err != nil {
		return err
	}
	return fmt.Errorf("%s (pid %d): killed after not stopping within %v of SIGTERM", d.Name, d.Cmd.Process.Pid, timeout)
}

func (d *Daemon) wait(timeout time.Duration) bool {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-d.exited:
		return true
	case <-t.C:
		return false
	}
}

// Output collects a process's output, safe for the process's copier and a reader at once. With a limit it
// keeps only about the last limit bytes.
type Output struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	limit int
}

// Write appends p.
func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf.Write(p)
	if o.limit > 0 && o.buf.Len() > 2*o.limit {
		o.buf.Next(o.buf.Len() - o.limit)
	}
	return len(p), nil
}

// String is everything kept so far.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// Tail is at most the last n bytes kept, marked as cut when there were more.
func (o *Output) Tail(n int) string {
	s := o.String()
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("(%d bytes before) ...%s", len(s)-n, s[len(s)-n:])
}
