package load

import (
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestLoadBatchAllocatesNothing proves the generator's steady state: a whole batch (drawing keys, encoding
// requests, writing, reading and parsing the replies, recording latency, sending the next batch)
// allocates nothing. The connection is one end of a socket pair; the test answers on the other.
func TestLoadBatchAllocatesNothing(t *testing.T) {
	tests := []struct {
		name     string
		getRatio float64
		multiGet int
		hit, set string // the reply to a get and to a set
	}{
		{"gets, zipf, multi-get hits", 1, 10, "VALUE k0000000000001 0 3\r\nabc\r\nEND\r\n", ""},
		{"gets miss", 1, 1, "END\r\n", ""},
		{"sets", 0, 1, "", "STORED\r\n"},
		{"90/10 with lease replies", 0.9, 2, "LVALUE k0000000000001 5 0 0\r\n\r\nVALUE k0000000000002 0 1\r\nx\r\nEND\r\n",
			"STORED\r\n"},
	}
	for _, tc := range tests {
		cfg := &Config{Conns: 1, Pipeline: 16, MultiGet: tc.multiGet, GetRatio: tc.getRatio, ValueSize: 100,
			KeySize: 14, Keys: 100000, Dist: "zipf", ZipfS: 0.99, GetCmd: "get", Seed: 1}
		ks, _ := newKeySpace(0, cfg.Keys, cfg.KeySize)
		vs, _ := newValueSource(cfg.ValueSize)
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		peer := fds[1]
		c, err := newGenConn(cfg, ks, vs, 0, fds[0])
		if err != nil {
			t.Fatal(err)
		}
		th, err := newGenThread(time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := th.add(c); err != nil {
			t.Fatal(err)
		}
		var stop atomic.Bool
		req := make([]byte, 64<<10)
		reply := make([]byte, 0, 64<<10)
		if err := th.send(c); err != nil {
			t.Fatal(err)
		}
		batch := func() {
			// The peer takes the batch and answers every request; the connection reads the answers and,
			// on the last one, sends its next batch.
			if n, err := unix.Read(peer, req); err != nil || n != len(c.wbuf) {
				t.Fatalf("peer read %d of %d bytes: %v", n, len(c.wbuf), err)
			}
			reply = reply[:0]
			for _, g := range c.isGet {
				if g {
					reply = append(reply, tc.hit...)
				} else {
					reply = append(reply, tc.set...)
				}
			}
			if _, err := unix.Write(peer, reply); err != nil {
				t.Fatal(err)
			}
			for done := false; !done; {
				if done, err = c.receive(); err != nil {
					t.Fatal(err)
				}
			}
			if err := th.complete(c, time.Since(th.base), time.Hour, &stop); err != nil {
				t.Fatal(err)
			}
		}
		if a := testing.AllocsPerRun(200, batch); a != 0 {
			t.Errorf("%s: a batch allocates %v times", tc.name, a)
		}
		if c.requests == 0 || th.hist.total == 0 || (tc.getRatio > 0 && c.getKeys == 0) || (tc.getRatio < 1 && c.parser.sets == 0) {
			t.Errorf("%s: nothing counted: %d requests, %d get keys, %d sets", tc.name, c.requests, c.getKeys, c.parser.sets)
		}
		th.close()
		unix.Close(peer)
	}
}
