package server

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"github.com/leasecached/leasecached/auth"
	bp "github.com/leasecached/leasecached/protocol/binprot"
)

// bpkt builds a binary request packet; opaque is set to op so that replies can be told apart.
func bpkt(op bp.Opcode, key, ext, val string, cas uint64) string {
	b := []byte{bp.MagicRequest, byte(op)}
	b = binary.BigEndian.AppendUint16(b, uint16(len(key)))
	b = append(b, byte(len(ext)), 0, 0, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(len(key)+len(ext)+len(val)))
	b = binary.BigEndian.AppendUint32(b, uint32(op)<<24|uint32(len(val)))
	b = binary.BigEndian.AppendUint64(b, cas)
	return string(b) + ext + key + val
}

func setExt(flags, exp uint32) string {
	return string(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, flags), exp))
}

func incrExt(delta, initial uint64, exp uint32) string {
	b := binary.BigEndian.AppendUint64(nil, delta)
	b = binary.BigEndian.AppendUint64(b, initial)
	return string(binary.BigEndian.AppendUint32(b, exp))
}

func u32(v uint32) string { return string(binary.BigEndian.AppendUint32(nil, v)) }

// replies splits out into response packets, failing the test on a malformed one.
func replies(t testing.TB, out []byte) []bp.Response {
	t.Helper()
	var rs []bp.Response
	for len(out) > 0 {
		require.GreaterOrEqual(t, len(out), bp.HeaderLen, "a torn reply header")
		require.Equal(t, byte(bp.MagicResponse), out[0])
		r := bp.Response{Opcode: bp.Opcode(out[1]), KeyLen: binary.BigEndian.Uint16(out[2:]), ExtLen: out[4],
			Status: bp.Status(binary.BigEndian.Uint16(out[6:])), BodyLen: binary.BigEndian.Uint32(out[8:]),
			Opaque: binary.BigEndian.Uint32(out[12:]), Cas: binary.BigEndian.Uint64(out[16:])}
		require.GreaterOrEqual(t, len(out), bp.HeaderLen+int(r.BodyLen), "a torn reply body")
		require.LessOrEqual(t, int(r.ExtLen)+int(r.KeyLen), int(r.BodyLen))
		rs = append(rs, r)
		out = out[bp.HeaderLen+int(r.BodyLen):]
	}
	return rs
}

// binScript is a session of every command, quiet forms and refusals included, that leaves the connection
// open: what a client of the binary protocol sends.
func binScript() []string {
	big := strings.Repeat("v", 200_000) // gathered (bigreq.go)
	return []string{
		bpkt(bp.OpSet, "a", setExt(5, 0), "hello", 0),
		bpkt(bp.OpGet, "a", "", "", 0),
		bpkt(bp.OpGetK, "a", "", "", 0),
		bpkt(bp.OpGetQ, "missing", "", "", 0),
		bpkt(bp.OpGetKQ, "a", "", "", 0),
		bpkt(bp.OpGet, "missing", "", "", 0),
		bpkt(bp.OpGetK, "missing", "", "", 0),
		bpkt(bp.OpNoop, "", "", "", 0),
		bpkt(bp.OpAddQ, "a", setExt(0, 0), "x", 0),
		bpkt(bp.OpReplace, "nope", setExt(0, 0), "x", 0),
		bpkt(bp.OpSet, "a", setExt(0, 0), "cas", 12345),
		bpkt(bp.OpAppend, "a", "", "+end", 0),
		bpkt(bp.OpPrependQ, "a", "", "beg+", 0),
		bpkt(bp.OpAppend, "nope", "", "x", 0),
		bpkt(bp.OpIncrement, "n", incrExt(5, 10, 0), "", 0),
		bpkt(bp.OpIncrement, "n", incrExt(5, 10, 0), "", 0),
		bpkt(bp.OpDecrementQ, "n", incrExt(100, 0, 0), "", 0),
		bpkt(bp.OpIncrement, "m", incrExt(1, 1, bp.NoCreate), "", 0),
		bpkt(bp.OpIncrement, "a", incrExt(1, 1, 0), "", 0),
		bpkt(bp.OpTouch, "a", u32(100), "", 0),
		bpkt(bp.OpGatK, "a", u32(100), "", 0),
		bpkt(bp.OpGatQ, "nope", u32(100), "", 0),
		bpkt(bp.OpSet, "big", setExt(0, 0), big, 0),
		bpkt(bp.OpGet, "big", "", "", 0),
		bpkt(bp.OpSet, "huge", setExt(0, 0), strings.Repeat("h", 1<<20), 0), // E2BIG, swallowed
		bpkt(bp.OpDelete, "a", "", "", 1),
		bpkt(bp.OpDeleteQ, "a", "", "", 0),
		bpkt(bp.OpDelete, "a", "", "", 0),
		bpkt(0x3d, "", "", "", 0), // unknown, nothing to swallow
		bpkt(bp.OpStat, "settings", "", "", 0),
		bpkt(bp.OpStat, "nope", "", "", 0),
		bpkt(bp.OpSASLListMechs, "", "", "", 0),
		bpkt(bp.OpVersion, "", "", "", 0),
		bpkt(bp.OpFlushQ, "", u32(0), "", 0),
		bpkt(bp.OpGet, "n", "", "", 0),
		bpkt(bp.OpNoop, "", "", "", 0),
	}
}

// feedBinary serves input to a fresh connection cut at the given points, and returns the replies.
func feedBinary(t *testing.T, input string, cuts []int) ([]byte, Action) {
	s := newTestServer(t)
	cn := newConn(s, nil)
	fc := &fakeConn{}
	var act Action
	prev := 0
	for _, c := range append(cuts, len(input)) {
		fc.in.WriteString(input[prev:c])
		prev = c
		if act = serveWoken(cn, fc); act == Close {
			break
		}
	}
	return fc.out.Bytes(), act
}

// What a binary client gets does not depend on how its bytes are cut into reads.
func TestBinaryPiecesMatchWhole(t *testing.T) {
	input := strings.Join(binScript(), "")
	whole, act := feedBinary(t, input, nil)
	require.Equal(t, Continue, act)
	rs := replies(t, whole)
	// Every request that is answered is answered once, in order; quiet successes are not.
	var ops []bp.Opcode
	for _, r := range rs {
		ops = append(ops, r.Opcode)
	}
	require.Contains(t, ops, bp.OpGatK)
	for _, quiet := range []bp.Opcode{bp.OpGetQ, bp.OpPrependQ, bp.OpDecrementQ, bp.OpDeleteQ, bp.OpFlushQ, bp.OpGatQ} {
		require.NotContains(t, ops, quiet, "a quiet success or miss is not answered")
	}
	require.Contains(t, ops, bp.OpAddQ, "a quiet failure is")
	rng := rand.New(rand.NewSource(1))
	for i := range 20 {
		var cuts []int
		for c := rng.Intn(2000) + 1; c < len(input); c += rng.Intn(70_000) + 1 {
			cuts = append(cuts, c)
		}
		if i == 0 { // byte by byte through the small requests
			cuts = cuts[:0]
			for c := 1; c < 2000; c++ {
				cuts = append(cuts, c)
			}
		}
		got, act := feedBinary(t, input, cuts)
		require.Equal(t, Continue, act)
		require.True(t, bytes.Equal(whole, got), "cut %d: replies differ", i)
	}
}

// A binary connection's request path allocates nothing per request once its buffers have grown.
func TestBinaryServeAllocatesNothing(t *testing.T) {
	s := newTestServer(t)
	cn := newConn(s, nil)
	fc := &fakeConn{}
	var multi strings.Builder
	for i := range 10 {
		multi.WriteString(bpkt(bp.OpGetKQ, "k"+string(rune('0'+i)), "", "", 0))
	}
	multi.WriteString(bpkt(bp.OpNoop, "", "", "", 0))
	for _, in := range []string{
		bpkt(bp.OpSet, "k1", setExt(1, 0), "value", 0),
		bpkt(bp.OpGet, "k1", "", "", 0),
		bpkt(bp.OpGetK, "nope", "", "", 0),
		multi.String(),
		bpkt(bp.OpIncrement, "n", incrExt(1, 0, 0), "", 0),
		bpkt(bp.OpDelete, "nope", "", "", 0),
		bpkt(bp.OpTouch, "k1", u32(0), "", 0),
	} {
		serve := func() {
			fc.out.Reset()
			fc.in.WriteString(in)
			measuredServe(cn, fc)
		}
		serve()
		assert.Zero(t, testing.AllocsPerRun(200, serve), "%q", in[:2])
	}
}

// A client that sends requests and never reads makes the server hold a bounded amount of replies: serve
// stops once the transport holds more than outboundLimit (doc/design/backpressure.md).
func TestBinaryBackpressure(t *testing.T) {
	s := newTestServer(t)
	cn := newConn(s, nil)
	fc := &fakeConn{stuck: true}
	value := strings.Repeat("x", 100_000)
	fc.in.WriteString(bpkt(bp.OpSet, "v", setExt(0, 0), value, 0))
	serveWoken(cn, fc)
	get := bpkt(bp.OpGetKQ, "v", "", "", 0)
	fc.in.WriteString(strings.Repeat(get, 1000)) // 100 MB of replies asked for
	act := serveWoken(cn, fc)
	assert.Equal(t, Continue, act)
	assert.True(t, fc.paused, "serve must ask to stop reading")
	assert.LessOrEqual(t, fc.out.Len(), outboundLimit+flushThreshold+len(value)+100)
	assert.Positive(t, fc.in.Len(), "the rest of the requests wait in the input")
}

// Malformed headers: memcached's reply, then its close.
func TestBinaryRefusals(t *testing.T) {
	cases := []struct {
		name   string
		in     string
		status bp.Status
		close  bool
	}{
		{"key over 250", bpkt(bp.OpGet, strings.Repeat("k", 251), "", "", 0), bp.StatusEINVAL, true},
		{"wrong extras", bpkt(bp.OpGet, "k", "1234", "", 0), bp.StatusEINVAL, true},
		{"unknown", bpkt(0x30, "", "", "", 0) + bpkt(bp.OpNoop, "", "", "", 0), bp.StatusUnknownCommand, false},
		{"sasl off", bpkt(bp.OpSASLAuth, "PLAIN", "", "\x00u\x00p", 0) + bpkt(bp.OpNoop, "", "", "", 0), bp.StatusUnknownCommand, false},
		{"too large", bpkt(bp.OpSet, "k", setExt(0, 0), strings.Repeat("v", 2<<20), 0) + bpkt(bp.OpNoop, "", "", "", 0), bp.StatusE2BIG, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, act := feedBinary(t, c.in, nil)
			rs := replies(t, out)
			require.NotEmpty(t, rs)
			assert.Equal(t, c.status, rs[0].Status)
			if c.close {
				assert.Equal(t, Close, act)
			} else {
				require.Len(t, rs, 2)
				assert.Equal(t, bp.OpNoop, rs[1].Opcode)
			}
		})
	}
	// Key and extras longer than the body: UNKNOWN_COMMAND and close.
	bad := []byte(bpkt(bp.OpGet, "key", "", "", 0))
	binary.BigEndian.PutUint32(bad[8:], 1)
	out, act := feedBinary(t, string(bad), nil)
	assert.Equal(t, bp.StatusUnknownCommand, replies(t, out)[0].Status)
	assert.Equal(t, Close, act)
	// A bad magic closes without a word, and loses the replies memcached had not written.
	out, act = feedBinary(t, bpkt(bp.OpSet, "k", setExt(0, 0), "v", 0)+"\x81"+strings.Repeat("\x00", 23), nil)
	assert.Empty(t, out)
	assert.Equal(t, Close, act)
}

// Random input never panics and never produces a torn reply.
func FuzzBinaryServe(f *testing.F) {
	for _, p := range binScript()[:22] {
		f.Add([]byte(p), uint16(7))
	}
	f.Add([]byte(bpkt(bp.OpStat, "", "", "", 0)), uint16(3))
	f.Fuzz(func(t *testing.T, in []byte, cut uint16) {
		in = append([]byte{bp.MagicRequest}, in...)
		s := newTestServer(t)
		cn := newConn(s, nil)
		fc := &fakeConn{}
		c := min(int(cut), len(in))
		for _, piece := range [][]byte{in[:c], in[c:]} {
			fc.in.Write(piece)
			if serveWoken(cn, fc) == Close {
				break
			}
		}
		replies(t, fc.out.Bytes())
		cn.releaseBig()
		// Whatever the input did, the server still serves a new connection.
		out, act := serveBinaryOn(s, bpkt(bp.OpSet, "fz", setExt(3, 0), "after", 0)+bpkt(bp.OpGetK, "fz", "", "", 0))
		require.Equal(t, Continue, act)
		rs := replies(t, out)
		require.Len(t, rs, 2)
		require.Equal(t, bp.StatusOK, rs[1].Status)
		require.True(t, bytes.HasSuffix(out, []byte("fzafter")))
	})
}

// serveBinaryOn serves input, in one read, to a new connection of s.
func serveBinaryOn(s *Server, input string) ([]byte, Action) {
	cn := newConn(s, nil)
	fc := &fakeConn{}
	fc.in.WriteString(input)
	act := serveWoken(cn, fc)
	return fc.out.Bytes(), act
}

// SASL PLAIN (-S): before authenticating, only the SASL commands and VERSION are served; a wrong password
// fails and is counted; the right one opens every command.
func TestBinarySASL(t *testing.T) {
	pw := t.TempDir() + "/pwdb"
	require.NoError(t, os.WriteFile(pw, []byte("alice:secret\n"), 0o600))
	s := newTestServerConfig(t, func(c *Config) { c.SASLFile, c.Protocol = pw, ProtocolBinary })
	require.NoError(t, s.authErr)
	get := bpkt(bp.OpGet, "k", "", "", 0)
	auth := func(data string) string { return bpkt(bp.OpSASLAuth, "PLAIN", "", data, 0) }
	cases := []struct {
		name     string
		in       string
		statuses []bp.Status
		close    bool
	}{
		{"get before auth", get, []bp.Status{bp.StatusAuthError}, true},
		{"version before auth", bpkt(bp.OpVersion, "", "", "", 0), []bp.Status{bp.StatusOK}, false},
		{"list", bpkt(bp.OpSASLListMechs, "", "", "", 0), []bp.Status{bp.StatusOK}, false},
		{"wrong password", auth("\x00alice\x00nope") + get, []bp.Status{bp.StatusAuthError, bp.StatusAuthError}, true},
		{"right password", auth("\x00alice\x00secret") + get, []bp.Status{bp.StatusOK, bp.StatusKeyENOENT}, false},
		{"authzid is the user", auth("alice\x00alice\x00secret") + get, []bp.Status{bp.StatusOK, bp.StatusKeyENOENT}, false},
		{"authzid of another", auth("bob\x00alice\x00secret"), []bp.Status{bp.StatusAuthError}, false},
		{"other mechanism", bpkt(bp.OpSASLAuth, "CRAM-MD5", "", "\x00alice\x00secret", 0), []bp.Status{bp.StatusAuthError}, false},
		{"step without auth", bpkt(bp.OpSASLStep, "PLAIN", "", "x", 0), []bp.Status{bp.StatusAuthError}, false},
		{"credentials in a step", auth("") + bpkt(bp.OpSASLStep, "PLAIN", "", "\x00alice\x00secret", 0) + get,
			[]bp.Status{bp.StatusAuthContinue, bp.StatusOK, bp.StatusKeyENOENT}, false},
		{"mechanism in lower case", bpkt(bp.OpSASLAuth, "plain", "", "\x00alice\x00secret", 0) + get,
			[]bp.Status{bp.StatusOK, bp.StatusKeyENOENT}, false},
		{"no second exchange, and a failed one logs out", auth("\x00alice\x00secret") + auth("\x00alice\x00secret") + get,
			[]bp.Status{bp.StatusOK, bp.StatusAuthError, bp.StatusAuthError}, true},
		{"listing the mechanisms logs out", auth("\x00alice\x00secret") + bpkt(bp.OpSASLListMechs, "", "", "", 0) + get,
			[]bp.Status{bp.StatusOK, bp.StatusOK, bp.StatusAuthError}, true},
		{"text protocol", "get k\r\nget k\r\nget k\r\nget k\r\n", nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, act := serveBinaryOn(s, c.in)
			var got []bp.Status
			for _, r := range replies(t, out) {
				got = append(got, r.Status)
			}
			assert.Equal(t, c.statuses, got)
			assert.Equal(t, c.close, act == Close)
		})
	}
	assert.Equal(t, uint64(11), s.stats.get(statAuthCmds))
	assert.Equal(t, uint64(5), s.stats.get(statAuthErrors))
}

// A bcrypt SASL check runs off the event loop: the SASL_AUTH stays in the input, unanswered, and the
// checker's wake has it answered with what followed it.
func TestBinarySASLBcryptOffLoop(t *testing.T) {
	h, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	require.NoError(t, err)
	pw := t.TempDir() + "/pwdb"
	require.NoError(t, os.WriteFile(pw, []byte("foo:"+string(h)+"\n"), 0o600))
	s := newTestServerConfig(t, func(c *Config) { c.SASLFile = pw })
	for _, c := range []struct {
		pass string
		want []bp.Status
		act  Action
	}{
		{"s3cret", []bp.Status{bp.StatusOK, bp.StatusKeyENOENT}, Continue},
		{"wrong", []bp.Status{bp.StatusAuthError, bp.StatusAuthError}, Close}, // the get is refused: closed
	} {
		cn, wc := newConn(s, nil), &wakeConn{fakeConn: &fakeConn{}, woken: make(chan struct{}, 1)}
		wc.in.WriteString(bpkt(bp.OpSASLAuth, "PLAIN", "", "\x00foo\x00"+c.pass, 0))
		require.Equal(t, Continue, cn.serve(wc))
		require.NotNil(t, cn.bin.pending, "serve made the bcrypt check itself")
		assert.Empty(t, wc.out.Bytes())
		wc.in.WriteString(bpkt(bp.OpGet, "k", "", "", 0))
		act := cn.serve(wc) // the check may be over already (bcrypt at its lowest cost): then all is answered
		if cn.bin.pending != nil {
			require.Equal(t, Continue, act)
			assert.Empty(t, wc.out.Bytes(), "the get waits behind the check")
			select {
			case <-wc.woken:
			case <-time.After(60 * time.Second):
				t.Fatal("the checker did not wake the connection")
			}
			act = cn.serve(wc)
		}
		require.Equal(t, c.act, act)
		var got []bp.Status
		for _, r := range replies(t, wc.out.Bytes()) {
			got = append(got, r.Status)
		}
		assert.Equal(t, c.want, got, c.pass)
	}
}

// TestBinarySASLClosedConnChecksSkipped: SASL connections that send a password for a bcrypt user and
// disconnect before the answer leave no checks behind, as -Y's do (TestAuthClosedConnChecksSkipped): the
// checks still waiting for a checker leave the queue when their connection closes.
func TestBinarySASLClosedConnChecksSkipped(t *testing.T) {
	const cost, rounds = 10, 20 // ~60 ms a check: the queued ones cannot all be over before the count
	h, err := bcrypt.GenerateFromPassword([]byte("s3cret"), cost)
	require.NoError(t, err)
	pw := t.TempDir() + "/pwdb"
	require.NoError(t, os.WriteFile(pw, []byte("foo:"+string(h)+"\n"), 0o600))
	s := newTestServerConfig(t, func(c *Config) { c.SASLFile = pw })
	require.Less(t, rounds, auth.Checkers+auth.MaxQueued(cost), "every round's check is queued, none refused")
	for i := range rounds {
		cn, wc := newConn(s, nil), &wakeConn{fakeConn: &fakeConn{}, woken: make(chan struct{}, 1)}
		wc.in.WriteString(bpkt(bp.OpSASLAuth, "PLAIN", "", fmt.Sprintf("\x00foo\x00wrong%d", i), 0))
		require.Equal(t, Continue, cn.serve(wc))
		require.NotNil(t, cn.bin.pending, "round %d: the check runs off the loop", i)
		s.closeConn(cn, nil)
	}
	assert.LessOrEqual(t, s.sasl.Checking(), auth.Checkers, "the abandoned checks have left the queue")
	require.Eventually(t, func() bool { return s.sasl.Checking() == 0 }, 60*time.Second, time.Millisecond)
}

// stats sizes_disable answers as memcached does (one stat, no END, no empty packet after it); sizes_enable
// answers memcached's error form, as leasecached keeps no size histogram.
func TestSizesSwitch(t *testing.T) {
	s := newTestServer(t)
	out, _ := serveBinaryOn(s, "stats sizes_disable\r\nstats sizes_enable\r\n")
	assert.Equal(t, "STAT sizes_status disabled\r\nSTAT sizes_status error\r\nSTAT sizes_error not_supported\r\n", string(out))
	out, _ = serveBinaryOn(s, bpkt(bp.OpStat, "sizes_disable", "", "", 0)+bpkt(bp.OpNoop, "", "", "", 0))
	rs := replies(t, out)
	require.Len(t, rs, 2)
	assert.Equal(t, bp.OpStat, rs[0].Opcode)
	assert.True(t, bytes.Contains(out, []byte("sizes_statusdisabled")))
	assert.Equal(t, bp.OpNoop, rs[1].Opcode, "no empty STAT packet")
}
