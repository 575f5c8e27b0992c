package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestRunHoldsAPPerLoopAndStaysPreemptible runs a real server in-process, starting from GOMAXPROCS 1 with
// three event loops. Our gnet poller (third_party/gnet) keeps a busy loop's P through its raw epoll waits,
// so Run must raise GOMAXPROCS to leave a P for everything else (procs.go), and loops must still give way
// to the runtime: a GC cycle, which has to stop every P, completes while all loops wait, and so does Stop.
func TestRunHoldsAPPerLoopAndStaysPreemptible(t *testing.T) {
	const loops = 3
	old := runtime.GOMAXPROCS(1)
	t.Cleanup(func() { runtime.GOMAXPROCS(old) })

	s, result := startRun(t, Config{Threads: loops, ConnLimit: 16})
	t.Cleanup(func() { // before startRun's: Run must return nil after Stop
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
		select {
		case err := <-result:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not return within 10s of Stop")
		}
	})

	// The loops and the acceptor each hold a P once they poll; one more is left for the rest.
	want := loops + 2
	for deadline := time.Now().Add(10 * time.Second); runtime.GOMAXPROCS(0) < want; {
		if time.Now().After(deadline) {
			t.Fatalf("GOMAXPROCS = %d after 10s, want at least %d", runtime.GOMAXPROCS(0), want)
		}
		time.Sleep(5 * time.Millisecond)
	}

	c, err := net.DialTimeout("tcp", s.cfg.Listen+":"+fmt.Sprint(s.cfg.Port), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)
	roundTrip := func(req, want string) {
		t.Helper()
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(want))
		if _, err := io.ReadFull(r, got); err != nil || string(got) != want {
			t.Fatalf("%q: got %q (%v), want %q", req, got, err, want)
		}
	}
	roundTrip("set k 0 0 1\r\nv\r\n", "STORED\r\n")

	// Every loop is idle in epoll_wait now; a stop-the-world has to interrupt each of them.
	gcDone := make(chan struct{})
	go func() { runtime.GC(); close(gcDone) }()
	select {
	case <-gcDone:
	case <-time.After(10 * time.Second):
		t.Fatal("runtime.GC did not finish within 10s while the event loops were idle")
	}
	roundTrip("get k\r\n", "VALUE k 0 1\r\nv\r\nEND\r\n")
}

// TestRunWithoutAsyncPreemption runs the test above in a child process with GODEBUG=asyncpreemptoff=1:
// without preemption signals, nothing can interrupt a loop's raw wait, so only its bound keeps a
// stop-the-world (raising GOMAXPROCS, a GC) from waiting forever behind an idle loop. With an unbounded raw
// wait the child hung at start-up.
func TestRunWithoutAsyncPreemption(t *testing.T) {
	if os.Getenv("LEASECACHED_RUN_CHILD") != "" {
		t.Skip("already the child")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestRunHoldsAPPerLoopAndStaysPreemptible$",
		"-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "GODEBUG=asyncpreemptoff=1", "LEASECACHED_RUN_CHILD=1")
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("child still running after 60s (a stop-the-world waits on an idle loop):\n%s", out)
	}
	if err != nil || !strings.Contains(string(out), "--- PASS: TestRunHoldsAPPerLoopAndStaysPreemptible") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
