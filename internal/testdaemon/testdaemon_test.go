package testdaemon

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The daemons of these tests are this test binary, started again with helperEnv set: TestMain then runs
// the helper the arguments name instead of the tests.
const helperEnv = "TESTDAEMON_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(helper(os.Args[1], os.Args[2]))
	}
	os.Exit(m.Run())
}

// helper behaves as mode says, on port:
//
//	serve     listen, answer every line with "VERSION helper", exit 0 on SIGTERM
//	stubborn  listen, ignore SIGTERM
//	exit      print a line and exit with status 3 at once
//	silent    never listen
func helper(mode, port string) int {
	// SIGTERM is handled (or ignored) before the port is open: a daemon is stopped as soon as it accepts.
	signal.Ignore(syscall.SIGTERM)
	if mode == "serve" {
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		go func() {
			<-term
			fmt.Println("helper: SIGTERM")
			os.Exit(0)
		}()
	}
	if mode == "exit" {
		fmt.Println("helper: cannot start")
		return 3
	}
	if mode == "silent" {
		time.Sleep(time.Minute)
		return 0
	}
	l, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Println("helper: listening")
	for {
		c, err := l.Accept()
		if err != nil {
			return 1
		}
		go func() {
			defer c.Close()
			sc := bufio.NewScanner(c)
			for sc.Scan() {
				fmt.Fprintf(c, "VERSION helper\r\n")
			}
		}()
	}
}

// spec starts this binary as the helper in mode.
func spec(t *testing.T, mode string) Spec {
	self, err := os.Executable()
	require.NoError(t, err)
	return Spec{Name: "helper-" + mode, Path: self, Env: []string{helperEnv + "=1", "GORACE=atexit_sleep_ms=0"},
		Args: func(port int) []string { return []string{mode, strconv.Itoa(port)} }}
}

func TestFreePort(t *testing.T) {
	port, err := FreePort()
	require.NoError(t, err)
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	require.NoError(t, err, "the port FreePort returned is not free")
	require.NoError(t, l.Close())
}

func TestWaitAccepts(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	assert.NoError(t, WaitAccepts(addr, time.Second))
	require.NoError(t, l.Close())
	start := time.Now()
	assert.Error(t, WaitAccepts(addr, 100*time.Millisecond), "nothing listens there any more")
	assert.Less(t, time.Since(start), 5*time.Second)
}

func TestStartAcceptsAndStopsWithSIGTERM(t *testing.T) {
	d, err := Start(context.Background(), spec(t, "serve"))
	require.NoError(t, err)
	assert.True(t, d.Running())
	assert.Equal(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(d.Port)), d.Addr)
	c, err := net.DialTimeout("tcp", d.Addr, time.Second)
	require.NoError(t, err, "Start returned a daemon that does not accept")
	require.NoError(t, c.Close())

	require.NoError(t, d.Stop(5*time.Second))
	assert.False(t, d.Running())
	assert.NoError(t, d.Err(), "status 0 after SIGTERM")
	assert.Contains(t, d.Out.String(), "helper: listening")
	assert.Contains(t, d.Out.String(), "helper: SIGTERM")
}

// A daemon that exits at once is tried on Attempts ports, then reported with its output.
func TestStartReportsEarlyExit(t *testing.T) {
	s := spec(t, "exit")
	s.Attempts = 2
	tries := 0
	args := s.Args
	s.Args = func(port int) []string { tries++; return args(port) }
	start := time.Now()
	d, err := Start(context.Background(), s)
	require.Error(t, err)
	assert.Nil(t, d)
	assert.Equal(t, 2, tries)
	assert.Contains(t, err.Error(), "helper: cannot start")
	assert.Contains(t, err.Error(), "exited during start-up")
	assert.Contains(t, err.Error(), "exit status 3")
	assert.Less(t, time.Since(start), DefaultStartTimeout, "an early exit is not waited out")
}

// An attempt that fails (here: the helper exits, as a daemon whose port was taken does) is retried on a
// new port.
func TestStartRetriesOnANewPort(t *testing.T) {
	s := spec(t, "serve")
	var ports []int
	s.Args = func(port int) []string {
		ports = append(ports, port)
		if len(ports) == 1 {
			return []string{"exit", strconv.Itoa(port)}
		}
		return []string{"serve", strconv.Itoa(port)}
	}
	d, err := Start(context.Background(), s)
	require.NoError(t, err)
	defer d.Kill(5 * time.Second)
	require.Len(t, ports, 2)
	assert.Equal(t, ports[1], d.Port)
}

// A daemon that never listens is stopped after StartTimeout.
func TestStartTimesOut(t *testing.T) {
	s := spec(t, "silent")
	s.Attempts, s.StartTimeout = 1, 200*time.Millisecond
	start := time.Now()
	_, err := Start(context.Background(), s)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not ready")
	assert.Less(t, time.Since(start), 5*time.Second)
}

// The context bounds the start too.
func TestStartHonoursContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	s := spec(t, "silent")
	s.StartTimeout = time.Minute
	start := time.Now()
	_, err := Start(ctx, s)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 10*time.Second, "one attempt after the context ended, not three")
}

// Ready replaces the check that the port accepts.
func TestStartWaitsForReady(t *testing.T) {
	s := spec(t, "serve")
	checks := 0
	s.Ready = func(addr string) error {
		checks++
		if checks < 3 {
			return fmt.Errorf("not yet")
		}
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return err
		}
		defer c.Close()
		fmt.Fprintf(c, "version\r\n")
		l, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || !strings.HasPrefix(l, "VERSION ") {
			return fmt.Errorf("reply %q, %v", l, err)
		}
		return nil
	}
	d, err := Start(context.Background(), s)
	require.NoError(t, err)
	defer d.Stop(5 * time.Second)
	assert.GreaterOrEqual(t, checks, 3)
}

// A daemon that ignores SIGTERM is killed: Terminate reports it still running, Stop kills it.
func TestStopKillsAStubbornDaemon(t *testing.T) {
	d, err := Start(context.Background(), spec(t, "stubborn"))
	require.NoError(t, err)
	exited, err := d.Terminate(200 * time.Millisecond)
	assert.False(t, exited)
	assert.NoError(t, err)
	err = d.Stop(200 * time.Millisecond)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "killed")
	assert.False(t, d.Running())
	assert.NoError(t, d.Kill(time.Second), "killing an exited daemon does nothing")
	exited, _ = d.Terminate(time.Second)
	assert.True(t, exited)
}

// An *os.File as Output is the daemon's own stdout and stderr; an early exit quotes the file's end.
func TestOutputToFile(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "daemon-*.log")
	require.NoError(t, err)
	defer f.Close()
	s := spec(t, "serve")
	s.Output = f
	d, err := Start(context.Background(), s)
	require.NoError(t, err)
	require.NoError(t, d.Stop(5*time.Second))
	b, err := os.ReadFile(f.Name())
	require.NoError(t, err)
	assert.Contains(t, string(b), "helper: listening")
	assert.Contains(t, string(b), "helper: SIGTERM")
	assert.Empty(t, d.Out.String())

	s = spec(t, "exit")
	s.Output, s.Attempts = f, 1
	_, err = Start(context.Background(), s)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "helper: cannot start")
}

// A daemon whose output goes to a file that cannot be read back (a pipe, the test binary's stderr) is
// still reported at once when it fails to start: the error does not wait to read the output.
func TestOutputToPipeReportsFailure(t *testing.T) {
	// A named pipe, opened for reading and writing so that opening does not wait for a peer: reading it
	// back would never see its end, as with the /dev/stderr of a `go test` child.
	fifo := filepath.Join(t.TempDir(), "out")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	w, err := os.OpenFile(fifo, os.O_RDWR, 0)
	require.NoError(t, err)
	defer w.Close()
	s := spec(t, "exit")
	s.Output, s.Attempts = w, 1
	done := make(chan error, 1)
	go func() { _, err := Start(context.Background(), s); done <- err }()
	select {
	case err := <-done:
		require.Error(t, err)
		assert.Contains(t, err.Error(), "exit status 3")
	case <-time.After(5 * time.Second):
		t.Fatal("Start hung reading back the output it wrote to a pipe")
	}
}

// With another writer as Output, the output goes there too and Out keeps only its end.
func TestOutputToWriterKeepsATail(t *testing.T) {
	log := &Output{}
	s := spec(t, "serve")
	s.Output = log
	d, err := Start(context.Background(), s)
	require.NoError(t, err)
	require.NoError(t, d.Stop(5*time.Second))
	assert.Contains(t, log.String(), "helper: listening")
	assert.Contains(t, d.Out.String(), "helper: SIGTERM")

	o := &Output{limit: 10}
	for range 100 {
		fmt.Fprint(o, "0123456789")
	}
	assert.LessOrEqual(t, len(o.String()), 20)
	assert.True(t, strings.HasSuffix(o.String(), "0123456789"))
	o = &Output{}
	fmt.Fprint(o, "01234567890123456789")
	assert.Equal(t, "(15 bytes before) ...56789", o.Tail(5))
	assert.Equal(t, "01234567890123456789", o.Tail(20))
}

// A port someone else listens on is not the daemon's: the readiness check does not take that listener for
// the daemon's (a client would talk to the wrong server), whether the daemon waits or fails to bind.
func TestStartIgnoresAnotherListener(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("who listens on a port is read from /proc")
	}
	squatter, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer squatter.Close()
	taken := squatter.Addr().(*net.TCPAddr).Port
	for _, tc := range []struct {
		mode, want string
		timeout    time.Duration
	}{
		{"silent", "not ready", time.Second}, // never listens: times out
		// Cannot bind the port: exits, which a -race binary on a loaded machine has taken over 1 s to do
		// after printing why; the wait ends at the exit, not the timeout.
		{"serve", "exited during start-up", 30 * time.Second},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			s := spec(t, tc.mode)
			s.StartTimeout = tc.timeout
			d, err := StartOnPort(context.Background(), s, taken)
			if err == nil {
				d.Kill(5 * time.Second)
			}
			require.Error(t, err, "ready on a port only another process listens on")
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
