package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leasecached/leasecached/internal/sdnotify"
	"github.com/leasecached/leasecached/internal/sdnotify/sdnotifytest"
	"github.com/leasecached/leasecached/internal/testdaemon"
)

// notifySocket adds expectations to a test notify socket.
type notifySocket struct{ *sdnotifytest.Socket }

func listenNotify(t *testing.T) *notifySocket { return &notifySocket{sdnotifytest.Listen(t)} }

// expect fails the test unless the next datagram, within 5 s, is want.
func (s *notifySocket) expect(t *testing.T, want string) {
	t.Helper()
	msg, ok := s.Next(5 * time.Second)
	require.True(t, ok, "no %q within 5s", want)
	require.Equal(t, want, msg)
}

// expectReloading fails the test unless the next datagram is RELOADING=1 with a CLOCK_MONOTONIC time no
// later than now, as systemd's Type=notify-reload wants it.
func (s *notifySocket) expectReloading(t *testing.T) {
	t.Helper()
	msg, ok := s.Next(5 * time.Second)
	require.True(t, ok, "no RELOADING=1 within 5s")
	v, found := strings.CutPrefix(msg, "RELOADING=1\nMONOTONIC_USEC=")
	require.True(t, found, "got %q", msg)
	usec, err := strconv.ParseInt(v, 10, 64)
	require.NoError(t, err, msg)
	now, _ := strconv.ParseInt(strings.TrimPrefix(sdnotify.Reloading(), "RELOADING=1\nMONOTONIC_USEC="), 10, 64)
	assert.Positive(t, usec)
	assert.LessOrEqual(t, usec, now)
}

// expectNone fails the test if a datagram comes within wait.
func (s *notifySocket) expectNone(t *testing.T, wait time.Duration, why string) {
	t.Helper()
	if msg, ok := s.Next(wait); ok {
		t.Fatalf("%s: got %q", why, msg)
	}
}

// runUntilStopped tells the service manager READY=1 only once the server is ready, RELOADING=1 then
// READY=1 around a reload, and STOPPING=1 when the stopping signal comes.
func TestRunUntilStoppedNotifies(t *testing.T) {
	f := newFakeServer(0)
	f.ready = make(chan struct{}) // not up yet
	r := startLifecycle(t, f, 5*time.Second)
	r.notes.expectNone(t, 50*time.Millisecond, "READY=1 before the listeners are up")

	r.sigs <- syscall.SIGHUP // a reload before that reloads, and says nothing
	require.Eventually(t, func() bool { return f.reloads.Load() == 1 }, 2*time.Second, time.Millisecond)
	r.notes.expectNone(t, 50*time.Millisecond, "SIGHUP before the listeners are up")

	close(f.ready)
	r.notes.expect(t, sdnotify.Ready)
	r.notes.expectNone(t, 50*time.Millisecond, "READY=1 twice")

	r.sigs <- syscall.SIGHUP
	r.notes.expectReloading(t)
	r.notes.expect(t, sdnotify.Ready)
	assert.Equal(t, int32(2), f.reloads.Load())

	r.sigs <- syscall.SIGTERM
	r.notes.expect(t, sdnotify.Stopping)
	returned, err := r.wait(t, 2*time.Second)
	assert.True(t, returned)
	assert.NoError(t, err)
}

// A notify socket that is not there is a log line, and the server serves and stops as ever.
func TestRunUntilStoppedNotifyFails(t *testing.T) {
	r := startLifecycleWith(t, newFakeServer(0), 5*time.Second, sdnotify.New("/nonexistent/notify"))
	require.Eventually(t, func() bool { return strings.Contains(r.log.String(), "notify /nonexistent/notify: ") },
		2*time.Second, time.Millisecond)
	r.sigs <- syscall.SIGTERM
	returned, err := r.wait(t, 2*time.Second)
	assert.True(t, returned)
	assert.NoError(t, err)
}

var daemonBuild = testdaemon.Build{Pkg: testdaemon.Leasecached}

// TestMain removes the daemon binary the tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	daemonBuild.Remove()
	os.Exit(code)
}

// daemonBinary builds this command once for the tests that run the real daemon.
func daemonBinary(t *testing.T) string {
	t.Helper()
	bin, err := daemonBuild.Path()
	require.NoError(t, err)
	return bin
}

// The daemon under systemd: READY=1 arrives when its port accepts connections, RELOADING=1 and READY=1
// around a SIGHUP, STOPPING=1 at SIGTERM, then it exits 0.
func TestDaemonNotifiesServiceManager(t *testing.T) {
	bin := daemonBinary(t)
	notes := listenNotify(t)
	var acceptedAtReady error
	d, err := testdaemon.Start(context.Background(), testdaemon.Spec{
		Name: "leasecached", Path: bin,
		Args: func(port int) []string { return []string{"-p", strconv.Itoa(port), "-t", "1", "-m", "8"} },
		Env:  []string{sdnotify.EnvSocket + "=" + notes.Name},
		// Ready is READY=1; the port must accept at that moment, not only later.
		Ready: func(addr string) error {
			msg, ok := notes.Next(20 * time.Millisecond)
			if !ok {
				return os.ErrDeadlineExceeded
			}
			if msg != sdnotify.Ready {
				t.Errorf("first notification %q, want %q", msg, sdnotify.Ready)
			}
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				c.Close()
			}
			acceptedAtReady = err
			return nil
		},
	})
	require.NoError(t, err)
	defer d.Kill(5 * time.Second)
	require.NoError(t, acceptedAtReady, "READY=1 came before the port accepted connections")

	require.NoError(t, d.Cmd.Process.Signal(syscall.SIGHUP))
	notes.expectReloading(t)
	notes.expect(t, sdnotify.Ready)

	exited, err := d.Terminate(10 * time.Second)
	require.True(t, exited, "no exit within 10s of SIGTERM")
	assert.NoError(t, err, "exit status; output:\n%s", d.Out.String())
	notes.expect(t, sdnotify.Stopping)
	notes.expectNone(t, 50*time.Millisecond, "after STOPPING=1")
}

// A daemon whose listener cannot be made never says READY=1: it exits 1 and systemd sees a failed start.
func TestDaemonPortTakenNeverReady(t *testing.T) {
	bin := daemonBinary(t)
	notes := listenNotify(t)
	held, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer held.Close()
	port := held.Addr().(*net.TCPAddr).Port

	cmd := exec.Command(bin, "-p", strconv.Itoa(port), "-t", "1", "-m", "8")
	cmd.Env = append(os.Environ(), sdnotify.EnvSocket+"="+notes.Name)
	out := &testdaemon.Output{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("still running 10s after start on a taken port; output:\n%s", out.String())
	}
	var exitErr *exec.ExitError
	require.ErrorAs(t, err, &exitErr, "output:\n%s", out.String())
	assert.Equal(t, 1, exitErr.ExitCode())
	notes.expectNone(t, 50*time.Millisecond, "a daemon that never listened")
}
