package integration

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasecached/leasecached/internal/testcert"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// binExchange sends reqs (keys without placeholders) and the sentinel on a binary connection and
// returns the reply packets before the sentinel's.
func binExchange(t *testing.T, rc *rawConn, reqs ...binReq) []binPkt {
	t.Helper()
	var script []byte
	for i, r := range reqs {
		script = append(script, r.encode("", uint32(binAutoOpaque+i+1), 0)...)
	}
	rep := rc.exchange(append(script, binSentinelReq...), wholeWrite, binSentinelReply, defaultReplyTimeout)
	require.True(t, endsWithBinSentinel(rep.data), "%s: no sentinel reply (closed %v, timed out %v): %x", rc.c.RemoteAddr(), rep.closed, rep.timedOut, rep.data)
	pkts, rest := splitBinReplies(rep.data[:len(rep.data)-len(binSentinelReply)])
	require.Empty(t, rest)
	return pkts
}

// textExchange sends a text script and the text sentinel and returns the replies before MN.
func textExchange(t *testing.T, rc *rawConn, script string) string {
	t.Helper()
	rep := rc.exchange([]byte(script+"mn\r\n"), wholeWrite, sentinelReply, defaultReplyTimeout)
	require.True(t, bytes.HasSuffix(rep.data, sentinelReply), "no MN: %q", rep.data)
	return string(bytes.TrimSuffix(rep.data, sentinelReply))
}

// textCAS parses "VALUE key flags bytes cas\r\n..." and returns flags and cas.
func textCAS(t *testing.T, reply string) (flags uint32, cas uint64) {
	t.Helper()
	f := strings.Fields(strings.SplitN(reply, "\r\n", 2)[0])
	require.Len(t, f, 5, "not a gets reply: %q", reply)
	fl, err := strconv.ParseUint(f[2], 10, 32)
	require.NoError(t, err)
	c, err := strconv.ParseUint(f[4], 10, 64)
	require.NoError(t, err)
	return uint32(fl), c
}

// TestBinaryTextShareStore: a text connection and a binary connection to the same server see the
// same items, flags and CAS uniques, whichever protocol wrote them; checked on memcached (the
// oracle: the test's own check) and on leasecached alike.
func TestBinaryTextShareStore(t *testing.T) {
	mc, lc := startPair(t)
	for _, d := range []*daemon{mc, lc} {
		t.Run(d.name, func(t *testing.T) {
			bc, tc := dialRaw(t, d), dialRaw(t, d)
			k1, k2, k3, k4 := "mix_1", "mix_2", "mix_3", "mix_4"

			// Binary writes, text reads.
			p := binExchange(t, bc, bStore(opSet, k1, "from-binary", 0xdeadbeef, 0))
			require.Len(t, p, 1)
			require.Equal(t, uint16(stSuccess), p[0].status())
			casSet := p[0].cas()
			require.NotZero(t, casSet)
			r := textExchange(t, tc, "gets "+k1+"\r\n")
			flags, cas := textCAS(t, r)
			assert.Equal(t, uint32(0xdeadbeef), flags)
			assert.Equal(t, casSet, cas, "text gets shows the CAS the binary SET returned")
			assert.True(t, strings.HasSuffix(r, "\r\nfrom-binary\r\nEND\r\n"), "%q", r)

			// Text writes, binary reads.
			r = textExchange(t, tc, "set "+k2+" 305419896 0 9\r\nfrom-text\r\ngets "+k2+"\r\n")
			flags, cas = textCAS(t, strings.TrimPrefix(r, "STORED\r\n"))
			require.Equal(t, uint32(305419896), flags)
			p = binExchange(t, bc, bGet(opGetK, k2))
			require.Len(t, p, 1)
			assert.Equal(t, uint16(stSuccess), p[0].status())
			assert.Equal(t, be32(305419896), p[0].extras())
			assert.Equal(t, k2, string(p[0].key()))
			assert.Equal(t, "from-text", string(p[0].value()))
			assert.Equal(t, cas, p[0].cas(), "binary GETK shows the CAS text gets showed")

			// A text cas with the binary CAS, then a binary SET with the CAS that made.
			r = textExchange(t, tc, fmt.Sprintf("cas %s 1 0 1 %d\r\nx\r\ngets %s\r\n", k1, casSet, k1))
			require.True(t, strings.HasPrefix(r, "STORED\r\n"), "%q", r)
			_, casText := textCAS(t, strings.TrimPrefix(r, "STORED\r\n"))
			assert.NotEqual(t, casSet, casText)
			p = binExchange(t, bc, bStore(opSet, k1, "y", 2, 0).withCAS(casSet), bStore(opSet, k1, "z", 3, 0).withCAS(casText), bGet(opGet, k1))
			require.Len(t, p, 3)
			assert.Equal(t, uint16(stKeyEEXISTS), p[0].status(), "the binary CAS is stale after the text cas")
			assert.Equal(t, uint16(stSuccess), p[1].status())
			assert.Equal(t, "z", string(p[2].value()))
			assert.Equal(t, be32(3), p[2].extras())
			_, casNow := textCAS(t, textExchange(t, tc, "gets "+k1+"\r\n"))
			assert.Equal(t, p[1].cas(), casNow)
			assert.Equal(t, p[2].cas(), casNow)

			// Counters across protocols.
			p = binExchange(t, bc, bArith(opIncrement, k3, 5, 10, 0))
			require.Len(t, p, 1)
			assert.Equal(t, uint64(10), binary.BigEndian.Uint64(p[0].value()))
			assert.Equal(t, "15\r\n", textExchange(t, tc, "incr "+k3+" 5\r\n"))
			p = binExchange(t, bc, bArith(opDecrement, k3, 1, 0, 0), bGet(opGet, k3))
			require.Len(t, p, 2)
			assert.Equal(t, uint64(14), binary.BigEndian.Uint64(p[0].value()))
			assert.Equal(t, "14", string(p[1].value()))

			// Append across protocols, delete and touch seen by the other side.
			textExchange(t, tc, "set "+k4+" 7 0 1\r\na\r\n")
			binExchange(t, bc, bValue(opAppendQ, k4, "b"))
			assert.Equal(t, "ab\r\n", strings.SplitN(textExchange(t, tc, "get "+k4+"\r\n"), "\r\n", 2)[1][:4])
			binExchange(t, bc, bKey(opDelete, k2))
			assert.Equal(t, "END\r\n", textExchange(t, tc, "get "+k2+"\r\n"))
			textExchange(t, tc, "delete "+k4+"\r\n")
			p = binExchange(t, bc, bGet(opGet, k4), bTouch(opTouch, k1, 0))
			require.Len(t, p, 2)
			assert.Equal(t, uint16(stKeyENOENT), p[0].status())
			assert.Equal(t, uint16(stSuccess), p[1].status())

			// Exptimes set through binary show in the meta protocol's TTL.
			binExchange(t, bc, bStore(opSet, k4, "t", 0, 100), bTouch(opGAT, k1, 200), bArith(opIncrement, k2, 1, 1, 300))
			r = textExchange(t, tc, "mg "+k4+" t\r\nmg "+k1+" t\r\nmg "+k2+" t\r\n")
			assert.Regexp(t, `^HD t(100|99)\r\nHD t(200|199)\r\nHD t(300|299)\r\n$`, r)
			// An incr that lengthens the number, an append and a prepend keep the item's TTL and flags.
			binExchange(t, bc, bStore(opSet, "mix_5", "99", 5, 400), bArith(opIncrement, "mix_5", 1, 0, 0),
				bStore(opSet, "mix_6", "x", 6, 500), bValue(opAppend, "mix_6", "y"), bValue(opPrependQ, "mix_6", "w"))
			r = textExchange(t, tc, "mg mix_5 t f v\r\nmg mix_6 t f v\r\n")
			assert.Regexp(t, `^VA 3 t(400|399) f5\r\n100\r\nVA 3 t(500|499) f6\r\nwxy\r\n$`, r)
			binExchange(t, bc, bTouch(opGATQ, k4, 0), bTouch(opTouch, k1, 0))
			assert.Equal(t, "HD t-1\r\nHD t-1\r\n", textExchange(t, tc, "mg "+k4+" t\r\nmg "+k1+" t\r\n"), "GAT and TOUCH with 0 make an item immortal")

			// A binary FLUSH empties what text sees.
			binExchange(t, bc, bSimple(opFlush))
			assert.Equal(t, "END\r\n", textExchange(t, tc, "get "+k1+" "+k3+"\r\n"))
		})
	}
}

// TestBinaryStatsCounters: the generic counters of `stats` (statsCounters) agree with memcached's
// after the same binary workload on fresh servers, quiet forms included, and binary STAT reports
// the same values as the text `stats`.
func TestBinaryStatsCounters(t *testing.T) {
	mc, lc := startMemcached(t, noLRUThreads...), startLeasecached(t)
	workload := []binReq{
		bStore(opSet, "f", "f", 0, 0), bSimple(opFlush), bGet(opGet, "f"),
		bStore(opSet, "a", "1", 0, 0), bStore(opSetQ, "b", "2", 0, 0), bGet(opGet, "a"), bGet(opGetQ, "c"), bGet(opGetK, "zz"),
		bGet(opGetKQ, "b"), bTouch(opGAT, "b", 0), bTouch(opGATQ, "zz", 0), bTouch(opGATK, "a", 0),
		bArith(opIncrement, "n", 1, 0, 0xffffffff), bArith(opIncrement, "n", 1, 0, 0), bArith(opIncrementQ, "n", 1, 0, 0),
		bArith(opDecrement, "n", 1, 0, 0), bArith(opDecrementQ, "x", 1, 0, 0xffffffff),
		bKey(opDelete, "a"), bKey(opDelete, "a"), bKey(opDeleteQ, "zz"), bTouch(opTouch, "b", 100), bTouch(opTouch, "z", 1),
		bStore(opSet, "b", "x", 0, 0).withCAS(999999), bStore(opSet, "z", "x", 0, 0).withCAS(1),
		bStore(opAdd, "b", "x", 0, 0), bStore(opReplaceQ, "q", "x", 0, 0), bValue(opAppend, "b", "y"), bValue(opPrependQ, "q", "y"),
		bStore(opSet, "e", "e", 0, 0xffffffff-1), bStore(opSet, "g", "g", 0, 0),
		bStore(opSet, "x", "x", 0, uint32(time.Now().Add(-time.Hour).Unix())), bGet(opGet, "x"), bTouch(opGATQ, "x", 0),
	}
	compareBinStats(t, mc, lc, workload, "after the workload")
	compareBinStats(t, mc, lc, []binReq{bKey(opStat, "reset"), bGet(opGet, "b"), bGet(opGetQ, "nope")}, "after STAT reset")
}

// compareBinStats sends reqs to each server, then compares statsCounters read with binary STAT (and
// with text stats) between the two.
func compareBinStats(t *testing.T, mc, lc *daemon, reqs []binReq, when string) {
	t.Helper()
	var got [2]map[string]string
	for i, d := range []*daemon{mc, lc} {
		bc := dialRaw(t, d)
		binExchange(t, bc, reqs...)
		// Binary STAT: every stat packet, then the terminator.
		p := binExchange(t, bc, bKey(opStat, ""))
		require.NotEmpty(t, p)
		last := p[len(p)-1]
		assert.Equal(t, 0, last.bodyLen(), "%s: STAT ends with an empty packet", d.name)
		bin := map[string]string{}
		for _, s := range p[:len(p)-1] {
			bin[string(s.key())] = string(s.value())
		}
		text := statsMap([]byte(textExchange(t, dialRaw(t, d), "stats\r\n")))
		for _, name := range statsCounters {
			assert.Equal(t, text[name], bin[name], "%s: %s: binary STAT %s against text stats", when, d.name, name)
		}
		got[i] = bin
	}
	for _, name := range statsCounters {
		want, ok := got[0][name]
		if !ok {
			t.Errorf("%s: memcached has no stat %q (test bug)", when, name)
			continue
		}
		have, ok := got[1][name]
		if !ok {
			have = "<missing>"
		}
		assert.Equal(t, want, have, "%s: STAT %s: memcached %s, leasecached %s", when, name, want, have)
	}
}

// TestBinaryConnLimit: a connection over -c is refused the same way whatever its protocol (memcached
// refuses it before it has read a byte, so in text), and a usable one speaks binary.
func TestBinaryConnLimit(t *testing.T) {
	mc, lc := startPair(t, "-c", connLimit)
	for _, d := range []*daemon{mc, lc} {
		t.Run(d.name, func(t *testing.T) {
			usable, refused := 0, 0
			var conns []*rawConn
			for i := 0; i < connLimitTries; i++ {
				rc, err := dialRawErr(d)
				require.NoError(t, err, "connection %d", i)
				t.Cleanup(func() { rc.c.Close() })
				conns = append(conns, rc)
			}
			time.Sleep(connLimitWait)
			for i, rc := range conns {
				rep := rc.exchange(binSentinelReq, wholeWrite, binSentinelReply, defaultReplyTimeout) // see TestConnLimit
				switch {
				case bytes.Equal(rep.data, binSentinelReply):
					usable++
				case bytes.Equal(rep.data, rejectReply) && rep.closed:
					refused++
				default:
					t.Errorf("connection %d: got %x (closed %v), want the NOOP's reply or %q then close", i, rep.data, rep.closed, rejectReply)
				}
			}
			assert.Positive(t, usable)
			assert.Positive(t, refused)
		})
	}
}

// TestBinaryOverTLS: binary requests over TLS (-Z), a large value among them (TLS records cut it),
// answered as memcached answers them. memcached 1.6.18 may stall behind the large value's last TLS
// record (TestTLSPipelinedBehindLargeRecord) until more bytes come: it is sent one more NOOP then,
// leasecached never.
func TestBinaryOverTLS(t *testing.T) {
	certs := testcert.New(t)
	big := strings.Repeat("t", 300000)
	reqs := []binReq{bStore(opSet, "tls_a", "hello", 7, 0), bGet(opGetK, "tls_a"), bValue(opAppendQ, "tls_a", "!"),
		bGet(opGetQ, "tls_missing"), bStore(opSetQ, "tls_big", big, 1, 0), bGet(opGetKQ, "tls_big"), bArith(opIncrement, "tls_n", 1, 5, 0),
		bKey(opDelete, "tls_a"), bGet(opGet, "tls_a"), bSimple(opVersion), bSimple(opNoop)}
	var script []byte
	for i, r := range reqs {
		script = append(script, r.encode("", uint32(binAutoOpaque+i+1), 0)...)
	}
	script = append(script, binSentinelReq...)
	eachServer(t, func(t *testing.T, name string, start startFunc) string {
		d := start(t, tlsFlags(certs)...)
		cfg := clientTLS(t, certs, nil)
		cfg.DynamicRecordSizingDisabled = true
		c, err := dialTLS(d.addr, cfg)
		require.NoError(t, err)
		defer c.Close()
		rep := tlsExchange(c, string(script), string(binSentinelReply), stallWait)
		data := rep.data
		if name == "memcached" && !rep.closed && countBinSentinels(data) == 0 {
			// memcached answers the rest once more bytes come, then stalls on those: its own last
			// reply comes with the next request's. The sentinels' replies are not compared.
			t.Logf("memcached 1.6.18 stalled after %d bytes; one more NOOP", len(data))
			rep = tlsExchange(c, string(binSentinelReq), string(binSentinelReply), stallWait)
			data = append(data, rep.data...)
			require.Positive(t, countBinSentinels(data), "memcached: %s", hexTrunc(data, 200))
		}
		require.True(t, endsWithBinSentinel(data), "%s: closed %v, timed out %v: %s", name, rep.closed, rep.timedOut, hexTrunc(data, 200))
		var kept []byte
		pkts, _ := splitBinReplies(data)
		for _, p := range pkts {
			if !bytes.Equal(p.hdr, binSentinelReply) {
				kept = append(append(kept, p.hdr...), p.body...)
			}
		}
		norm := newBinNormalizer("").render(kept)
		require.Contains(t, norm, `val="hello"`)
		require.Contains(t, norm, `key="tls_big"`)
		return norm
	})
}

// countBinSentinels is how many of b's packets are the sentinel's reply.
func countBinSentinels(b []byte) int {
	n := 0
	pkts, _ := splitBinReplies(b)
	for _, p := range pkts {
		if bytes.Equal(p.hdr, binSentinelReply) && len(p.body) == 0 {
			n++
		}
	}
	return n
}
