package load

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// unhex decodes hex with spaces between the fields, for readable packets.
func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	require.NoError(t, err)
	return b
}

// The request encoders write memcached's packets byte for byte: 0x80, opcode, key length, extras length,
// data type and vbucket 0, body length, opaque, CAS 0, then extras, key, value.
func TestAppendBinRequests(t *testing.T) {
	ks, err := newKeySpace(0, 100, 4)
	require.NoError(t, err)
	vs, err := newValueSource(3)
	require.NoError(t, err)
	val7 := hex.EncodeToString(vs.value(7))
	tests := []struct {
		name string
		enc  func([]byte) []byte
		want string
	}{
		{"get", func(b []byte) []byte { return appendBinGet(b, binOpGet, ks, 7, 0x01020304) },
			"80 00 0004 00 00 0000 00000004 01020304 0000000000000000 6b303037"},
		{"getkq", func(b []byte) []byte { return appendBinGet(b, binOpGetKQ, ks, 42, 0xfffffffe) },
			"80 0d 0004 00 00 0000 00000004 fffffffe 0000000000000000 6b303432"},
		{"set", func(b []byte) []byte { return appendBinSet(b, ks, vs, 7, 9) },
			"80 01 0004 08 00 0000 0000000f 00000009 0000000000000000 " +
				hex.EncodeToString(binary.BigEndian.AppendUint32(nil, vs.flags(7))) + " 00000000 6b303037 " + val7},
		{"noop", func(b []byte) []byte { return appendBinNoop(b, 0x11) },
			"80 0a 0000 00 00 0000 00000000 00000011 0000000000000000"},
		{"appends after what dst holds", func(b []byte) []byte { return appendBinNoop(append(b, 'x'), 1) },
			"78 80 0a 0000 00 00 0000 00000000 00000001 0000000000000000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, hex.EncodeToString(unhex(t, tc.want)), hex.EncodeToString(tc.enc(nil)))
			// With room in dst the encoders allocate nothing.
			buf := make([]byte, 0, 512)
			assert.Zero(t, testing.AllocsPerRun(10, func() { _ = tc.enc(buf[:0]) }))
		})
	}
}

// appendBinReply appends a reply packet as a server sends it.
func appendBinReply(dst []byte, op byte, status uint16, opaque uint32, cas uint64, extras, key, value []byte) []byte {
	var h [binHeaderLen]byte
	h[0], h[1] = binResMagic, op
	binary.BigEndian.PutUint16(h[2:], uint16(len(key)))
	h[4] = byte(len(extras))
	binary.BigEndian.PutUint16(h[6:], status)
	binary.BigEndian.PutUint32(h[8:], uint32(len(extras)+len(key)+len(value)))
	binary.BigEndian.PutUint32(h[12:], opaque)
	binary.BigEndian.PutUint64(h[16:], cas)
	return append(append(append(append(dst, h[:]...), extras...), key...), value...)
}

func binReply(op byte, status uint16, opaque uint32, cas uint64, extras, key, value []byte) []byte {
	return appendBinReply(nil, op, status, opaque, cas, extras, key, value)
}

// appendBinHit appends the reply of a hit on index i (with its key for GETKQ), as memcached sends it.
func appendBinHit(dst []byte, ks keySpace, vs *valueSource, op byte, opaque uint32, i uint64) []byte {
	var flags [4]byte
	binary.BigEndian.PutUint32(flags[:], vs.flags(i))
	var kb [maxKeyLen]byte
	key := kb[:0]
	if op == binOpGetKQ {
		key = ks.appendKey(key, i)
	}
	return appendBinReply(dst, op, binStatusOK, opaque, 1000+i, flags[:], key, vs.value(i))
}

func binHit(ks keySpace, vs *valueSource, op byte, opaque uint32, i uint64) []byte {
	return appendBinHit(nil, ks, vs, op, opaque, i)
}

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func TestBinParser(t *testing.T) {
	ks, err := newKeySpace(0, 1000, 14)
	require.NoError(t, err)
	vs, err := newValueSource(100)
	require.NoError(t, err)
	hit := func(op byte, opaque uint32, i uint64) []byte { return binHit(ks, vs, op, opaque, i) }
	stored := func(opaque uint32) []byte { return binReply(binOpSet, binStatusOK, opaque, 77, nil, nil, nil) }
	noop := func(opaque uint32) []byte { return binReply(binOpNoop, binStatusOK, opaque, 0, nil, nil, nil) }
	notFound := func(opaque uint32) []byte {
		return binReply(binOpGet, binStatusKeyENOENT, opaque, 0, nil, nil, []byte("Not found"))
	}
	flagsOf := func(i uint64) []byte { return binary.BigEndian.AppendUint32(nil, vs.flags(i)) }
	wrongValue := []byte(strings.Repeat("z", 100))

	type packet struct {
		op     byte
		opaque uint32
		idx    uint64
	}
	get := func(opaque uint32, i uint64) packet { return packet{binOpGet, opaque, i} }
	getkq := func(opaque uint32, i uint64) packet { return packet{binOpGetKQ, opaque, i} }
	set := func(opaque uint32, i uint64) packet { return packet{binOpSet, opaque, i} }
	nop := func(opaque uint32) packet { return packet{binOpNoop, opaque, 0} }

	tests := []struct {
		name                  string
		batch                 []packet
		reply                 []byte
		hits, sets, setFailed uint64
		errors                uint64
		errLike, fatalLike    string // substrings of the first counted error, of the fatal error
		trailing              int    // bytes after the batch's last reply, left unconsumed
	}{
		{name: "get hit", batch: []packet{get(1, 5)}, reply: hit(binOpGet, 1, 5), hits: 1},
		{name: "get miss is no error", batch: []packet{get(1, 5)}, reply: notFound(1)},
		{name: "set stored", batch: []packet{set(3, 9)}, reply: stored(3), sets: 1},
		{name: "a pipelined mix", batch: []packet{get(1, 1), set(2, 2), get(3, 3), get(4, 4)},
			reply: cat(hit(binOpGet, 1, 1), stored(2), notFound(3), hit(binOpGet, 4, 4)), hits: 2, sets: 1},
		{name: "getkq x3 + noop, all hits", batch: []packet{getkq(10, 1), getkq(11, 2), getkq(12, 3), nop(13)},
			reply: cat(hit(binOpGetKQ, 10, 1), hit(binOpGetKQ, 11, 2), hit(binOpGetKQ, 12, 3), noop(13)), hits: 3},
		{name: "getkq: a silent miss in the middle", batch: []packet{getkq(10, 1), getkq(11, 2), getkq(12, 3), nop(13)},
			reply: cat(hit(binOpGetKQ, 10, 1), hit(binOpGetKQ, 12, 3), noop(13)), hits: 2},
		{name: "getkq: all miss", batch: []packet{getkq(10, 1), getkq(11, 2), nop(12)}, reply: noop(12)},
		{name: "two multi-gets in a batch", batch: []packet{getkq(1, 1), nop(2), getkq(3, 3), nop(4)},
			reply: cat(noop(2), hit(binOpGetKQ, 3, 3), noop(4)), hits: 1},
		{name: "bytes after the batch are left", batch: []packet{get(1, 5)}, reply: cat(hit(binOpGet, 1, 5), noop(9)),
			hits: 1, trailing: binHeaderLen},

		// Wrong but framed: counted, the batch goes on.
		{name: "set not stored", batch: []packet{set(3, 9), get(4, 9)},
			reply: cat(binReply(binOpSet, binStatusNotStored, 3, 0, nil, nil, []byte("Not stored.")), hit(binOpGet, 4, 9)),
			hits:  1, sets: 1, setFailed: 1, errors: 1, errLike: "status NOT_STORED in the reply to a set"},
		{name: "set reply without CAS", batch: []packet{set(3, 9)},
			reply: binReply(binOpSet, binStatusOK, 3, 0, nil, nil, nil), sets: 1, errors: 1, errLike: "CAS 0"},
		{name: "get hit with a wrong value", batch: []packet{get(1, 5)},
			reply: binReply(binOpGet, binStatusOK, 1, 1, flagsOf(5), nil, wrongValue), errors: 1,
			errLike: "body byte 4 on differs"},
		{name: "get hit with the wrong flags", batch: []packet{get(1, 5)},
			reply: binReply(binOpGet, binStatusOK, 1, 1, flagsOf(6), nil, vs.value(5)), errors: 1,
			errLike: "body byte 0 on differs"},
		{name: "get hit with another key's value", batch: []packet{get(1, 5)},
			reply: binReply(binOpGet, binStatusOK, 1, 1, flagsOf(5), nil, vs.value(6)), errors: 1,
			errLike: "for key k0000000000005"},
		{name: "getkq hit with the wrong key", batch: []packet{getkq(1, 5), nop(2)},
			reply:  cat(binReply(binOpGetKQ, binStatusOK, 1, 1, flagsOf(5), ks.appendKey(nil, 6), vs.value(5)), noop(2)),
			errors: 1, errLike: "body byte 17 on differs from what was stored (flags, key, value), from there 36"},
		{name: "get hit with a key", batch: []packet{get(1, 5)},
			reply: binReply(binOpGet, binStatusOK, 1, 1, flagsOf(5), ks.appendKey(nil, 5), vs.value(5)), errors: 1,
			errLike: "14 of key and a 118-byte body; want 4, 0 and 104"},
		{name: "get hit without extras", batch: []packet{get(1, 5)},
			reply: binReply(binOpGet, binStatusOK, 1, 1, nil, nil, vs.value(5)), errors: 1, errLike: "with 0 bytes of extras"},
		{name: "a short value", batch: []packet{get(1, 5)},
			reply: binReply(binOpGet, binStatusOK, 1, 1, flagsOf(5), nil, vs.value(5)[:99]), errors: 1, errLike: "103-byte body"},
		{name: "getkq miss answered", batch: []packet{getkq(1, 5), nop(2)},
			reply:  cat(binReply(binOpGetKQ, binStatusKeyENOENT, 1, 0, nil, nil, []byte("Not found")), noop(2)),
			errors: 1, errLike: "status KEY_ENOENT in the reply to opcode 0x0d"},
		{name: "unknown command", batch: []packet{get(1, 5)},
			reply: binReply(binOpGet, binStatusUnknownCommand, 1, 0, nil, nil, []byte("Unknown command")), errors: 1,
			errLike: "status UNKNOWN_COMMAND"},
		{name: "the wrong opcode echoed", batch: []packet{get(1, 5)},
			reply: binHit(ks, vs, 0x09 /* GETK */, 1, 5), errors: 1, errLike: "opcode 0x09 in the reply to opcode 0x00"},
		{name: "a data type", batch: []packet{nop(1)},
			reply: func() []byte { b := noop(1); b[5] = 1; return b }(), errors: 1, errLike: "data type 0x01"},
		{name: "noop with a body", batch: []packet{nop(1)},
			reply: binReply(binOpNoop, binStatusOK, 1, 0, nil, nil, []byte("x")), errors: 1, errLike: "1-byte body"},

		// Framing or correlation lost: the connection's run ends.
		{name: "text reply", batch: []packet{get(1, 5)}, reply: []byte("ERROR\r\nERROR\r\nERROR\r\nERROR\r\n"),
			fatalLike: "magic 0x45, want 0x81 (header 4552524f520d0a"},
		{name: "request magic", batch: []packet{nop(1)},
			reply: func() []byte { b := noop(1); b[0] = binReqMagic; return b }(), fatalLike: "magic 0x80"},
		{name: "the opaque of no request", batch: []packet{get(1, 5)}, reply: hit(binOpGet, 2, 5),
			fatalLike: "opaque 0x00000002 (opcode 0x00, status OK) answers no outstanding request; next reply due: 0x00000001"},
		{name: "a reply skipped", batch: []packet{get(1, 5), get(2, 6)}, reply: hit(binOpGet, 2, 6),
			fatalLike: "answers no outstanding request"},
		// The parser stops at the batch's end; the transport fails a run on bytes after it.
		{name: "noop before the quiet hits", batch: []packet{getkq(1, 5), nop(2)},
			reply: cat(noop(2), hit(binOpGetKQ, 1, 5)), trailing: binHeaderLen + 4 + 14 + 100},
		{name: "key longer than the body", batch: []packet{get(1, 5)},
			reply: func() []byte { b := notFound(1); b[3] = 200; return b }(), fatalLike: "200 of key"},
		{name: "a huge body", batch: []packet{get(1, 5)},
			reply: func() []byte { b := notFound(1); b[8] = 0x7f; return b }(), fatalLike: "body of 2130706441 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Whole, one byte at a time, and in random pieces: a reply may be split anywhere between reads.
			for _, split := range []string{"whole", "bytes", "random"} {
				p := newBinParser(ks, vs, 4)
				p.reset()
				for _, pk := range tc.batch {
					p.expect(pk.op, pk.opaque, pk.idx)
				}
				r := rand.New(rand.NewPCG(uint64(len(tc.name)), 7))
				var pending []byte
				var ferr error
				fed := 0
				for fed < len(tc.reply) && ferr == nil {
					n := len(tc.reply) - fed
					switch split {
					case "bytes":
						n = 1
					case "random":
						n = 1 + r.IntN(min(n, 40))
					}
					pending = append(pending, tc.reply[fed:fed+n]...)
					fed += n
					var used int
					used, ferr = p.feed(pending)
					pending = pending[used:]
				}
				if tc.fatalLike != "" {
					require.Error(t, ferr, split)
					assert.Contains(t, ferr.Error(), tc.fatalLike, split)
					continue
				}
				require.NoError(t, ferr, split)
				assert.True(t, p.done(), "%s: batch not done", split)
				assert.Len(t, pending, tc.trailing, split)
				assert.Equal(t, tc.hits, p.hits, "%s: hits", split)
				assert.Equal(t, tc.sets, p.sets, "%s: sets", split)
				assert.Equal(t, tc.setFailed, p.setFailed, "%s: set failures", split)
				assert.Equal(t, tc.errors, p.errors, "%s: errors (first: %s)", split, p.firstErr)
				if tc.errLike != "" {
					assert.Contains(t, p.firstErr, tc.errLike, split)
				}
			}
		})
	}
}

func TestBinStatusName(t *testing.T) {
	for status, want := range map[uint16]string{0: "OK", 1: "KEY_ENOENT", 5: "NOT_STORED", 0x81: "UNKNOWN_COMMAND",
		0x82: "ENOMEM", 0x20: "AUTH_ERROR", 0x99: "0x99"} {
		assert.Equal(t, want, binStatusName(status))
	}
}

// answerBinary is what a server that has every key answers to the batch c encoded.
func answerBinary(c *genConn, dst []byte) []byte {
	for _, e := range c.bin.exp {
		switch e.op {
		case binOpGet, binOpGetKQ:
			dst = appendBinHit(dst, c.ks, c.vs, e.op, e.opaque, e.idx)
		case binOpSet:
			dst = appendBinReply(dst, binOpSet, binStatusOK, e.opaque, 1, nil, nil, nil)
		case binOpNoop:
			dst = appendBinReply(dst, binOpNoop, binStatusOK, e.opaque, 0, nil, nil, nil)
		}
	}
	return dst
}

// A connection's batches, encoded and their replies parsed, in the three shapes make bench runs: gets,
// sets, 10-key quiet multi-gets. Opaques run on across batches; encoding and parsing allocate nothing.
func TestBinaryGenConn(t *testing.T) {
	tests := []struct {
		name     string
		getRatio float64
		multiGet int
		packets  int // per request
	}{
		{"get", 1, 1, 1},
		{"set", 0, 1, 1},
		{"getkq x10 + noop", 1, 10, 11},
		{"mixed", 0.5, 3, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &Config{Conns: 1, Pipeline: 16, MultiGet: tc.multiGet, GetRatio: tc.getRatio, ValueSize: 100,
				KeySize: 14, Keys: 1000, Dist: "uniform", GetCmd: "get", Seed: 1, Binary: true, Duration: time.Second}
			require.NoError(t, cfg.validate())
			ks, _ := newKeySpace(0, cfg.Keys, cfg.KeySize)
			vs, _ := newValueSource(cfg.ValueSize)
			c, err := newGenConn(cfg, ks, vs, 3, -1)
			require.NoError(t, err)
			first := c.opaque
			c.encode()
			if tc.packets > 0 {
				require.Len(t, c.bin.exp, 16*tc.packets)
			}
			for i, e := range c.bin.exp {
				assert.Equal(t, first+uint32(i), e.opaque)
			}
			// The wire holds exactly the packets the parser expects, in order.
			b := c.wbuf
			for _, e := range c.bin.exp {
				require.GreaterOrEqual(t, len(b), binHeaderLen)
				assert.Equal(t, byte(binReqMagic), b[0])
				assert.Equal(t, e.op, b[1])
				assert.Equal(t, e.opaque, binary.BigEndian.Uint32(b[12:]))
				b = b[binHeaderLen+int(binary.BigEndian.Uint32(b[8:])):]
			}
			assert.Empty(t, b)
			assert.LessOrEqual(t, len(c.wbuf), cap(c.wbuf), "the batch fits the buffer made for it")

			reply := make([]byte, 0, 64<<10)
			allocs := testing.AllocsPerRun(20, func() {
				c.encode()
				reply = answerBinary(c, reply[:0])
				used, err := c.bin.feed(reply)
				if err != nil || used != len(reply) || !c.bin.done() {
					t.Fatalf("feed: %v, %d of %d bytes, done %v", err, used, len(reply), c.bin.done())
				}
			})
			assert.Zero(t, allocs, "encode and feed allocate")
			assert.Zero(t, c.bin.errors, c.bin.firstErr)
			if tc.getRatio == 1 {
				assert.Equal(t, uint64(21*16*tc.multiGet), c.bin.hits, "every key hits")
			}
		})
	}
}

// binaryFake is a binary-protocol server for the transport: it answers GET and GETKQ with the value the
// generator's value source gives each key (so every reply checks out), SET with a CAS and NOOP, and writes
// its replies in pieces of 1 to maxPiece bytes, so that headers and values are split anywhere between the
// generator's reads.
func binaryFake(t *testing.T, valueSize, maxPiece int) string {
	t.Helper()
	vs, err := newValueSource(valueSize)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for n := uint64(0); ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				r := rand.New(rand.NewPCG(n, 5))
				br := bufio.NewReader(c)
				var h [binHeaderLen]byte
				var out []byte
				for {
					if _, err := io.ReadFull(br, h[:]); err != nil {
						return
					}
					body := make([]byte, binary.BigEndian.Uint32(h[8:]))
					if _, err := io.ReadFull(br, body); err != nil {
						return
					}
					op, opaque := h[1], binary.BigEndian.Uint32(h[12:])
					key := body[int(h[4]) : int(h[4])+int(binary.BigEndian.Uint16(h[2:]))]
					i, _ := KeyNumber(key)
					switch op {
					case binOpGet, binOpGetKQ:
						var flags [4]byte
						binary.BigEndian.PutUint32(flags[:], vs.flags(i))
						if op == binOpGet {
							key = nil
						}
						out = appendBinReply(out, op, binStatusOK, opaque, 1, flags[:], key, vs.value(i))
					case binOpSet:
						out = appendBinReply(out, op, binStatusOK, opaque, 1, nil, nil, nil)
					default:
						out = appendBinReply(out, op, binStatusOK, opaque, 0, nil, nil, nil)
					}
					if br.Buffered() > 0 && op == binOpGetKQ {
						continue // the rest of a quiet batch is here: answer it with the NOOP
					}
					for len(out) > 0 {
						k := min(len(out), 1+r.IntN(maxPiece))
						if _, err := c.Write(out[:k]); err != nil {
							return
						}
						out = out[k:]
					}
				}
			})
		}
	})
	return ln.Addr().String()
}

// The transport with the binary protocol: replies split anywhere between reads, values larger than a read
// buffer, quiet batches; every reply checked, none wrong, every key a hit.
func TestBinaryTransport(t *testing.T) {
	tests := []struct {
		name                string
		pipeline, multiGet  int
		getRatio            float64
		valueSize, maxPiece int
	}{
		{"p1 get, small pieces", 1, 1, 1, 100, 7},
		{"p16 sets and gets", 16, 1, 0.5, 100, 300},
		{"p8 getkq x10", 8, 10, 1, 100, 50},
		{"p4 mixed, 20 KB values in small pieces", 4, 3, 0.7, 20000, 999},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			addr := binaryFake(t, tc.valueSize, tc.maxPiece)
			r, err := Run(context.Background(), Config{Addr: addr, Conns: 3, Pipeline: tc.pipeline, MultiGet: tc.multiGet,
				GetRatio: tc.getRatio, ValueSize: tc.valueSize, KeySize: 14, Keys: 1000, Dist: "uniform",
				Duration: 150 * time.Millisecond, GetCmd: "get", Seed: 1, Binary: true})
			require.NoError(t, err)
			assert.Zero(t, r.Errors, r.ErrorSample)
			assert.NotZero(t, r.Requests)
			assert.Equal(t, r.GetKeys, r.Hits)
			assert.Equal(t, r.Requests, r.Sets+r.GetKeys/uint64(tc.multiGet))
		})
	}
}
