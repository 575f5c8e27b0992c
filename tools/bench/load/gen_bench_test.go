package load

import (
	"testing"
)

// BenchmarkGenBatch is the generator's own user-space work for one pipeline-16 batch of make bench's 90/10
// row (uniform keys, 100-byte values, the hashed flags): drawing keys, encoding the requests and parsing
// the replies a server sends. The socket calls are left out. ns/op is per batch.
func BenchmarkGenBatch(b *testing.B) { benchGenBatch(b, 0.9, 1) }

// BenchmarkGenBatchMultiGet is BenchmarkGenBatch on make bench's 10-key get row: every request a get of
// ten keys, all hits.
func BenchmarkGenBatchMultiGet(b *testing.B) { benchGenBatch(b, 1, 10) }

func benchGenBatch(b *testing.B, getRatio float64, multiGet int) {
	cfg := &Config{Conns: 1, Pipeline: 16, MultiGet: multiGet, GetRatio: getRatio, ValueSize: 100, KeySize: 14,
		Keys: 100000, Dist: "uniform", GetCmd: "get", Seed: 1}
	ks, _ := newKeySpace(0, cfg.Keys, cfg.KeySize)
	vs, _ := newValueSource(cfg.ValueSize)
	c, err := newGenConn(cfg, ks, vs, 0, -1)
	if err != nil {
		b.Fatal(err)
	}
	reply := make([]byte, 0, 64<<10)
	b.ReportAllocs()
	for b.Loop() {
		c.encode()
		reply = reply[:0]
		for _, g := range c.isGet {
			if !g {
				reply = append(reply, "STORED\r\n"...)
				continue
			}
			for range multiGet {
				reply = append(reply, "VALUE k0000000012345 2654435761 100\r\n"...)
				reply = append(reply, vs.value(7)...)
				reply = append(reply, "\r\n"...)
			}
			reply = append(reply, "END\r\n"...)
		}
		if _, err := c.parser.feed(reply); err != nil || !c.parser.done() {
			b.Fatalf("feed: %v (done %v)", err, c.parser.done())
		}
	}
}

// BenchmarkGenBatchBinary is BenchmarkGenBatch with the binary protocol: make bench's binary get row
// (every request a GET, all hits), every reply checked byte for byte. ns/op includes building the replies (answerBinary), which the
// text benchmarks take from a fixed string.
func BenchmarkGenBatchBinary(b *testing.B) { benchGenBatchBinary(b, 1, 1) }

// BenchmarkGenBatchBinaryMultiGet is the binary 10-key row: ten GETKQ and a NOOP a request, all hits.
func BenchmarkGenBatchBinaryMultiGet(b *testing.B) { benchGenBatchBinary(b, 1, 10) }

func benchGenBatchBinary(b *testing.B, getRatio float64, multiGet int) {
	cfg := &Config{Conns: 1, Pipeline: 16, MultiGet: multiGet, GetRatio: getRatio, ValueSize: 100, KeySize: 14,
		Keys: 100000, Dist: "uniform", GetCmd: "get", Seed: 1, Binary: true}
	ks, _ := newKeySpace(0, cfg.Keys, cfg.KeySize)
	vs, _ := newValueSource(cfg.ValueSize)
	c, err := newGenConn(cfg, ks, vs, 0, -1)
	if err != nil {
		b.Fatal(err)
	}
	reply := make([]byte, 0, 64<<10)
	b.ReportAllocs()
	for b.Loop() {
		c.encode()
		reply = answerBinary(c, reply[:0])
		if _, err := c.bin.feed(reply); err != nil || !c.bin.done() {
			b.Fatalf("feed: %v (done %v)", err, c.bin.done())
		}
	}
}
