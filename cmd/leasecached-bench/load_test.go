package main

import (
	"net"
	"testing"
)

// cannedConn is a net.Conn that swallows writes and answers every read with the same reply, over and over.
type cannedConn struct {
	net.Conn
	r *repeatReader
}

func (c *cannedConn) Read(p []byte) (int, error)  { return c.r.Read(p) }
func (c *cannedConn) Write(p []byte) (int, error) { return len(p), nil }

// TestLoadBatchAllocatesNothing proves the generator's steady state: a whole batch (drawing keys, encoding
// requests, writing, parsing the replies, recording latency) allocates nothing.
func TestLoadBatchAllocatesNothing(t *testing.T) {
	tests := []struct {
		name     string
		getRatio float64
		multiGet int
		reply    string
	}{
		{"gets, zipf, multi-get hits", 1, 10, "VALUE k0000000000001 0 3\r\nabc\r\nEND\r\n"},
		{"gets miss", 1, 1, "END\r\n"},
		{"sets", 0, 1, "STORED\r\n"},
	}
	for _, tc := range tests {
		cfg := &loadConfig{Conns: 1, Pipeline: 16, MultiGet: tc.multiGet, GetRatio: tc.getRatio, ValueSize: 100,
			KeySize: 14, Keys: 100000, Dist: "zipf", ZipfS: 0.99, GetCmd: "get", Seed: 1}
		ks, _ := newKeySpace(0, cfg.Keys, cfg.KeySize)
		vs, _ := newValueSource(cfg.ValueSize)
		conn := &cannedConn{r: &repeatReader{data: []byte(tc.reply)}}
		w, err := newLoadWorkerOn(cfg, ks, vs, 0, conn)
		if err != nil {
			t.Fatal(err)
		}
		if a := testing.AllocsPerRun(200, func() {
			if err := w.batch(); err != nil {
				t.Fatal(err)
			}
		}); a != 0 {
			t.Errorf("%s: a batch allocates %v times", tc.name, a)
		}
		if w.requests == 0 || w.hist.total == 0 {
			t.Errorf("%s: nothing counted", tc.name)
		}
	}
}
