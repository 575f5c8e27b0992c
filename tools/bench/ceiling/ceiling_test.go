package ceiling

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasecached/leasecached/tools/bench/load"
)

func TestParseCeilingSizes(t *testing.T) {
	cases := []struct {
		in   string
		want []Range
		err  bool
	}{
		{"0:100", []Range{{0, 100}}, false},
		{"10000000:4096, 0:100", []Range{{0, 100}, {10000000, 4096}}, false},
		{"0:0", []Range{{0, 0}}, false},
		{"", nil, true},
		{"0", nil, true},
		{"x:1", nil, true},
		{"0:-1", nil, true},
		{"0:2000000", nil, true},
		{"5:1,5:2", nil, true},
	}
	for _, tc := range cases {
		got, err := ParseSizes(tc.in)
		if (err != nil) != tc.err || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%q: %v, %v; want %v (error %v)", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestCeilingValueSize(t *testing.T) {
	c, err := newCeiling([]Range{{0, 100}, {1000, 4096}, {5000, 7}}, 0)
	if err != nil {
		t.Fatal(err)
	}
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
		if got := len(c.value([]byte(tc.key))); got != tc.want {
			t.Errorf("%q: %d, want %d", tc.key, got, tc.want)
		}
	}
}

// -keys refuses more value memory than ceilingMaxMemory in all, however large the numbers.
func TestCeilingValueMemoryBounded(t *testing.T) {
	for _, tc := range []struct {
		ranges []Range
		keys   uint64
	}{
		{[]Range{{0, 4}}, 1 << 62}, // 2^64 bytes: wraps to 0 if multiplied
		{[]Range{{0, 1 << 20}}, ceilingMaxMemory>>20 + 1},
		{[]Range{{0, 1 << 20}, {ceilingMaxMemory >> 20, 1 << 20}}, ceilingMaxMemory >> 20}, // the sum
	} {
		if c, err := newCeiling(tc.ranges, tc.keys); err == nil {
			c.release()
			t.Errorf("ranges %v, -keys %d: accepted", tc.ranges, tc.keys)
		}
	}
}

// With -keys, the first keys of each range are answered from values of their own, one slot each, and
// every other key from filler.
func TestCeilingValuesInMemory(t *testing.T) {
	c, err := newCeiling([]Range{{10, 4}, {12, 3}, {100, 0}}, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer c.release()
	if len(c.values[0]) != 2*4 || len(c.values[1]) != 3*3 || c.values[2] != nil {
		t.Fatalf("value memory of %d, %d and %d bytes, want 8 (two keys before the next range), 9 and none",
			len(c.values[0]), len(c.values[1]), len(c.values[2]))
	}
	cases := []struct {
		key        string
		size, from int // from: the range whose memory holds the value, -1 for filler
		slot       int
	}{
		{"k9", 4, -1, 0}, // below every range: the first range's size, from filler
		{"k10", 4, 0, 0},
		{"k11", 4, 0, 1},
		{"k12", 3, 1, 0},
		{"k14", 3, 1, 2},
		{"k15", 3, -1, 0}, // past -keys
		{"k100", 0, -1, 0},
		{"other", 4, -1, 0},
	}
	for _, tc := range cases {
		v := c.value([]byte(tc.key))
		if len(v) != tc.size || strings.Trim(string(v), "x") != "" {
			t.Errorf("%s: value %q, want %d bytes of x", tc.key, v, tc.size)
			continue
		}
		if tc.size == 0 {
			continue
		}
		want := &c.filler[0]
		if tc.from >= 0 {
			want = &c.values[tc.from][tc.slot*tc.size]
		}
		if &v[0] != want {
			t.Errorf("%s: value not at slot %d of range %d (-1: filler)", tc.key, tc.slot, tc.from)
		}
	}
}

// startCeiling runs the responder in-process on a port the kernel picks, until the test ends.
func startCeiling(t *testing.T, sizes string) string { return startCeilingKeys(t, sizes, 0) }

// startCeilingKeys is startCeiling with the values of keys keys of each range in memory (-keys).
func startCeilingKeys(t *testing.T, sizes string, keys uint64) string {
	t.Helper()
	ranges, err := ParseSizes(sizes)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan string, 1), make(chan error, 1)
	go func() { done <- Run(ctx, "127.0.0.1:0", 2, ranges, keys, func(a string) { ready <- a }) }()
	var addr string
	select {
	case addr = <-ready:
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
// turn, so partial lines and partial data blocks are both exercised; with values from filler and from
// memory (-keys), which must answer the same bytes.
func TestCeilingProtocol(t *testing.T) {
	for _, keys := range []uint64{0, 200} {
		testCeilingProtocol(t, startCeilingKeys(t, "0:3,100:5", keys))
	}
}

func testCeilingProtocol(t *testing.T, addr string) {
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
	for _, cfg := range []load.Config{
		{Pipeline: 1, MultiGet: 1, GetRatio: 0.9, ValueSize: 100, KeyBase: 0},
		{Pipeline: 16, MultiGet: 10, GetRatio: 0.8, ValueSize: 4096, KeyBase: 50000},
	} {
		cfg.Addr, cfg.Conns, cfg.KeySize, cfg.Keys, cfg.Dist = addr, 4, 14, 1000, "uniform"
		cfg.Duration, cfg.GetCmd, cfg.Seed = 200*time.Millisecond, "get", 1
		r, err := load.Run(ctx, cfg)
		if err != nil {
			t.Fatalf("pipeline %d: %v", cfg.Pipeline, err)
		}
		if r.Requests == 0 || r.HitRatio != 1 || r.SetFailed != 0 {
			t.Errorf("pipeline %d: %d requests, hit ratio %v, %d failed sets", cfg.Pipeline, r.Requests,
				r.HitRatio, r.SetFailed)
		}
	}

	// 20,000 gets pipelined by a writer that does not wait for replies: their replies (80 MB) are far more
	// than the socket buffers hold, so the responder's writes hit EAGAIN and it must keep what is unsent
	// and deliver every reply, in order, as the client reads. (That it stops reading meanwhile shows only
	// in its memory, which this does not measure.)
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

// A client that half-closes while its replies are backed up does not make the responder spin: it waits
// for the socket to drain (EPOLLOUT), not on the half-close, which would be reported on every wait.
func TestCeilingHalfCloseWhileBlocked(t *testing.T) {
	addr := startCeiling(t, "0:4096")
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	// A small receive buffer, so that a few MB of replies fill the path (the responder's send buffer
	// grows to 4 MB on loopback) and building them stays quick even under the race detector.
	if err := c.(*net.TCPConn).SetReadBuffer(64 << 10); err != nil {
		t.Fatal(err)
	}
	const gets = 1500 // 6 MB of replies
	if _, err := c.Write([]byte(strings.Repeat("get k1\r\n", gets))); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	// Let the responder build its replies, fill the socket and block, and collect their garbage first: the
	// window below should see only what a blocked responder costs.
	time.Sleep(300 * time.Millisecond)
	runtime.GC()
	before, start := cpu(), time.Now()
	time.Sleep(400 * time.Millisecond)
	if used, wall := cpu()-before, time.Since(start); used > wall/2 {
		t.Errorf("the process used %v of CPU in %v while the responder waited on a full socket", used, wall)
	}
	n, err := io.Copy(io.Discard, c) // every reply is still delivered, then the responder closes
	if want := int64(gets * len("VALUE k1 0 4096\r\n\r\nEND\r\n"+strings.Repeat("x", 4096))); n != want || err != nil {
		t.Errorf("read %d bytes (%v), want %d", n, err, want)
	}
}

// touchValuesAhead loads two bytes of each short value in memory that the buffer's complete gets will
// copy, and nothing for data blocks, the rest of a block being discarded, incomplete lines or filler.
func TestCeilingTouchValuesAhead(t *testing.T) {
	c, err := newCeiling([]Range{{10, 4}}, 5)
	if err != nil {
		t.Fatal(err)
	}
	defer c.release()
	cases := []struct {
		buf     string
		discard int
		values  int // values touched
	}{
		{"get k10 k11\r\n", 0, 2},
		{"get k10\r\nset k12 0 0 9\r\nget k13\r\n\r\nget k14\r\n", 0, 2}, // the set's data is not a request
		{"et k10\r\nget k11\r\n", 3, 1},                                  // the rest of a block, then a get
		{"get k10 k11", 0, 0},                                            // incomplete
		{"get k99 other\r\ngets k12\r\n", 0, 1},                          // past -keys, not a key: filler
	}
	for _, tc := range cases {
		if got, want := c.touchValuesAhead([]byte(tc.buf), tc.discard), byte(2*tc.values*'x'); got != want {
			t.Errorf("%q: loads summed to %d, want %d (two loads of x for each of %d values)", tc.buf, got, want,
				tc.values)
		}
	}
}
