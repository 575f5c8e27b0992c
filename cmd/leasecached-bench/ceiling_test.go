package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

func TestParseCeilingSizes(t *testing.T) {
	cases := []struct {
		in   string
		want []ceilingRange
		err  bool
	}{
		{"0:100", []ceilingRange{{0, 100}}, false},
		{"10000000:4096, 0:100", []ceilingRange{{0, 100}, {10000000, 4096}}, false},
		{"0:0", []ceilingRange{{0, 0}}, false},
		{"", nil, true},
		{"0", nil, true},
		{"x:1", nil, true},
		{"0:-1", nil, true},
		{"0:2000000", nil, true},
		{"5:1,5:2", nil, true},
	}
	for _, tc := range cases {
		got, err := parseCeilingSizes(tc.in)
		if (err != nil) != tc.err || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%q: %v, %v; want %v (error %v)", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestCeilingValueSize(t *testing.T) {
	c := newCeiling([]ceilingRange{{0, 100}, {1000, 4096}, {5000, 7}})
	cases := []struct {
		key  string
		want int
	}{
		{"k0000000000999", 100},
		{"k0000000001000", 4096},
		{"k0000000004999", 4096},
		{"k0000000005000", 7},
		{"k99999999999999999999999", 100}, // overflows: not a load-tool key
		{"other", 100},
		{"k12a", 100},
		{"k", 100},
	}
	for _, tc := range cases {
		if got := c.valueSize([]byte(tc.key)); got != tc.want {
			t.Errorf("%q: %d, want %d", tc.key, got, tc.want)
		}
	}
}

// startCeiling runs the responder in-process on a free port until the test ends.
func startCeiling(t *testing.T, sizes string) string {
	t.Helper()
	ranges, err := parseCeilingSizes(sizes)
	if err != nil {
		t.Fatal(err)
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() { done <- runCeiling(ctx, addr, 2, ranges, func() { close(ready) }) }()
	select {
	case <-ready:
	case err := <-done:
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return addr
}

// TestCeilingProtocol checks the replies byte for byte, with requests split at every byte boundary in
// turn, so partial lines and partial data blocks are both exercised.
func TestCeilingProtocol(t *testing.T) {
	addr := startCeiling(t, "0:3,100:5")
	req := "get k099 k100\r\nset k1 0 0 4\r\nab\r\n\r\ngets k7\r\nbogus\r\nset k1 0 0\r\nversion\r\n"
	want := "VALUE k099 0 3\r\nxxx\r\nVALUE k100 0 5\r\nxxxxx\r\nEND\r\n" +
		"STORED\r\n" +
		"VALUE k7 0 3 1\r\nxxx\r\nEND\r\n" +
		"ERROR\r\n" +
		"CLIENT_ERROR bad command line format\r\n" +
		"VERSION leasecached-bench-ceiling\r\n"
	for split := 1; split < len(req); split += 3 {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte(req[:split])); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond) // let the first part arrive alone
		if _, err := c.Write([]byte(req[split:] + "quit\r\n")); err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(c) // the responder closes after "quit"
		if err != nil {
			t.Fatalf("split %d: %v", split, err)
		}
		c.Close()
		if string(got) != want {
			t.Fatalf("split %d: replies\n%q\nwant\n%q", split, got, want)
		}
	}
}

// TestCeilingUnderLoad runs the load tool against the responder: every get is a hit of the size its key
// range says, and a client that writes much more than it reads does not lose replies.
func TestCeilingUnderLoad(t *testing.T) {
	addr := startCeiling(t, "0:100,50000:4096")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, cfg := range []loadConfig{
		{Pipeline: 1, MultiGet: 1, GetRatio: 0.9, ValueSize: 100, KeyBase: 0},
		{Pipeline: 16, MultiGet: 10, GetRatio: 0.8, ValueSize: 4096, KeyBase: 50000},
	} {
		cfg.Addr, cfg.Conns, cfg.KeySize, cfg.Keys, cfg.Dist = addr, 4, 14, 1000, "uniform"
		cfg.Duration, cfg.GetCmd, cfg.Seed = 200*time.Millisecond, "get", 1
		r, err := runLoad(ctx, cfg)
		if err != nil {
			t.Fatalf("pipeline %d: %v", cfg.Pipeline, err)
		}
		if r.Requests == 0 || r.HitRatio != 1 || r.SetFailed != 0 {
			t.Errorf("pipeline %d: %d requests, hit ratio %v, %d failed sets", cfg.Pipeline, r.Requests,
				r.HitRatio, r.SetFailed)
		}
	}

	// 20,000 gets written before reading a byte: their replies (80 MB) are far more than the socket
	// buffers hold, so the responder must stop reading while they back up, and deliver every one once the
	// client reads.
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(15 * time.Second))
	const gets = 20000
	go func() {
		line := []byte("get k0000000050001\r\n")
		batch := []byte(strings.Repeat(string(line), 1000))
		for i := 0; i < gets/1000; i++ {
			if _, err := c.Write(batch); err != nil {
				return
			}
		}
	}()
	r := bufio.NewReaderSize(c, 1<<16)
	for i := 0; i < gets; i++ {
		l, err := r.ReadSlice('\n')
		if err != nil || string(l) != "VALUE k0000000050001 0 4096\r\n" {
			t.Fatalf("get %d: %q, %v", i, l, err)
		}
		if _, err := r.Discard(4096 + 2); err != nil {
			t.Fatal(err)
		}
		if l, err := r.ReadSlice('\n'); err != nil || string(l) != "END\r\n" {
			t.Fatalf("get %d: %q, %v", i, l, err)
		}
	}
}
