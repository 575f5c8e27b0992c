package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leasecached/leasecached/internal/logging"
)

// logBuffer collects a server's log lines; the server writes from several goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := strings.TrimSuffix(b.buf.String(), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// logLine is one line, read from either format.
type logLine struct {
	level, msg string
	attrs      map[string]string
}

// textAttr is one key=value of a text line (values without spaces or quotes: what these tests log).
var textAttr = regexp.MustCompile(` ([a-z_]+)=("[^"]*"|[^ ]*)`)

func parseLogLine(t *testing.T, f logging.Format, line string) logLine {
	t.Helper()
	if f == logging.JSON {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), "one JSON object a line: %q", line)
		l := logLine{level: m["level"].(string), msg: m["msg"].(string), attrs: map[string]string{}}
		for k, v := range m {
			b, err := json.Marshal(v)
			require.NoError(t, err)
			l.attrs[k] = strings.Trim(string(b), `"`)
		}
		return l
	}
	m := regexp.MustCompile(`^leasecached: \S+ \S+ ([A-Z]+) (.*)$`).FindStringSubmatch(line)
	require.NotNil(t, m, "a text line: %q", line)
	l := logLine{level: m[1], msg: m[2], attrs: map[string]string{}}
	if i := textAttr.FindStringIndex(l.msg); i != nil { // the message ends where the attributes start
		l.msg = l.msg[:i[0]]
	}
	for _, a := range textAttr.FindAllStringSubmatch(line, -1) {
		l.attrs[a[1]] = strings.Trim(a[2], `"`)
	}
	return l
}

// binaryNoop is a binary protocol NOOP request.
var binaryNoop = append([]byte{0x80, 0x0a}, make([]byte, 22)...)

// What the server logs at each verbosity, in both formats: nothing at -v0; refusals, a failed TLS
// handshake and a protocol error that closes a connection at -v; connections opened and closed at -vv;
// each command at -vvv. Every line about a client names its descriptor and its address.
func TestLogLevels(t *testing.T) {
	v1 := []string{"listening", "refused: too many open connections", "TLS handshake failed", "closing: protocol error"}
	v2 := append(v1[:len(v1):len(v1)], "connection opened", "connection closed")
	v3 := append(v2[:len(v2):len(v2)], "command")
	for _, tc := range []struct {
		name      string
		verbosity int
		format    logging.Format
		want      []string // every message logged
	}{
		{"-v0", 0, logging.Text, nil},
		{"-v", 1, logging.Text, v1},
		{"-vv", 2, logging.Text, v2},
		{"-vvv", 3, logging.Text, v3},
		{"-v0 json", 0, logging.JSON, nil},
		{"-v json", 1, logging.JSON, v1},
		{"-vv json", 2, logging.JSON, v2},
		{"-vvv json", 3, logging.JSON, v3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out logBuffer
			var lv slog.LevelVar
			ts := startTLS(t, func(c *Config) {
				c.ConnLimit, c.Verbosity, c.LogLevel = 2, tc.verbosity, &lv
				c.Logger = logging.New(&out, tc.format, &lv)
			})
			// Two connections take -c 2: a binary one and a text one.
			bin := plain(t, ts.tcpAddr)
			_, err := bin.Write(binaryNoop)
			require.NoError(t, err)
			_, err = io.ReadFull(bin, make([]byte, 24))
			require.NoError(t, err)
			text := plain(t, ts.tcpAddr)
			assert.Equal(t, "STORED\r\n", exchange(t, text, "set k 0 0 1\r\nv\r\n", "\r\n"))
			// A third is refused.
			refused := plain(t, ts.tcpAddr)
			got, _ := io.ReadAll(refused)
			assert.Equal(t, string(tooManyConns), string(got))
			// A plaintext client on the TLS port fails its handshake.
			bad := plain(t, ts.tlsAddr)
			_, err = io.WriteString(bad, "get k\r\n")
			require.NoError(t, err)
			_, _ = io.ReadAll(bad)
			// A binary request with a bad magic byte closes its connection.
			_, err = bin.Write(make([]byte, 24))
			require.NoError(t, err)
			_, _ = io.ReadAll(bin)
			text.Close()

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			require.NoError(t, ts.s.Stop(ctx))
			select { // once Run has returned, every line is written
			case err := <-ts.result:
				require.NoError(t, err)
			case <-time.After(10 * time.Second):
				t.Fatal("Run did not return within 10s of Stop")
			}

			peers := map[string]string{ // the client each line must name
				"refused: too many open connections": refused.LocalAddr().String(),
				"TLS handshake failed":               bad.LocalAddr().String(),
				"closing: protocol error":            bin.LocalAddr().String(),
			}
			lines := out.lines()
			seen := map[string]bool{}
			for _, line := range lines {
				l := parseLogLine(t, tc.format, line)
				if strings.HasPrefix(l.msg, "gnet: ") && (l.level == "INFO" || l.level == "DEBUG") {
					continue // gnet's own news, at -v and -vv
				}
				seen[l.msg] = true
				assert.Contains(t, tc.want, l.msg, "not at %s: %q", tc.name, line)
				if l.msg == "listening" {
					continue
				}
				assert.Regexp(t, `^[1-9][0-9]*$`, l.attrs[attrConn], "the descriptor: %q", line)
				assert.Regexp(t, `^127\.0\.0\.1:[0-9]+$`, l.attrs[attrPeer], "the peer: %q", line)
				if p, ok := peers[l.msg]; ok {
					assert.Equal(t, p, l.attrs[attrPeer], "%q", line)
				}
			}
			for _, m := range tc.want {
				assert.True(t, seen[m], "missing %q in:\n%s", m, strings.Join(lines, "\n"))
			}
		})
	}
}

// memcached's `verbosity N` changes what is logged at once: a quiet server logs connections after
// `verbosity 2`, and each command after `verbosity 3`, until `verbosity 0` quiets it again.
func TestLogVerbosityCommand(t *testing.T) {
	var out logBuffer
	var lv slog.LevelVar
	s, _ := startRun(t, Config{LogLevel: &lv, Logger: logging.New(&out, logging.JSON, &lv)})
	addr := net.JoinHostPort(s.cfg.Listen, strconv.Itoa(s.cfg.Port))
	admin := plain(t, addr)
	// logged reports whether a line with msg about the client at peer was written, waiting for it up to
	// a bound when want says it should be.
	logged := func(msg, peer string, want bool) bool {
		wait := 50 * time.Millisecond
		if want {
			wait = 5 * time.Second
		}
		for deadline := time.Now().Add(wait); ; time.Sleep(time.Millisecond) {
			for _, line := range out.lines() {
				l := parseLogLine(t, logging.JSON, line)
				if l.msg == msg && l.attrs[attrPeer] == peer {
					return true
				}
			}
			if time.Now().After(deadline) {
				return false
			}
		}
	}
	for _, tc := range []struct {
		verbosity        string
		opened, commands bool
	}{
		{"0", false, false},
		{"2", true, false},
		{"3", true, true},
		{"1", false, false},
		{"0", false, false},
	} {
		assert.Equal(t, "OK\r\n", exchange(t, admin, "verbosity "+tc.verbosity+"\r\n", "\r\n"))
		assert.Equal(t, tc.verbosity, statSetting(t, admin, "verbosity"))
		c := plain(t, addr)
		assert.Equal(t, "END\r\n", exchange(t, c, "get nothing\r\n", "\r\n"))
		peer := c.LocalAddr().String()
		assert.Equal(t, tc.opened, logged("connection opened", peer, tc.opened), "verbosity %s", tc.verbosity)
		assert.Equal(t, tc.commands, logged("command", peer, tc.commands), "verbosity %s", tc.verbosity)
		c.Close()
	}
}

// statSetting is one line of `stats settings` over c.
func statSetting(t *testing.T, c net.Conn, name string) string {
	t.Helper()
	out := exchange(t, c, "stats settings\r\n", "END\r\n")
	for _, line := range strings.Split(out, "\r\n") {
		if v, ok := strings.CutPrefix(line, "STAT "+name+" "); ok {
			return v
		}
	}
	return ""
}

// A line the level does not print costs no allocation: connections open and close on a quiet server
// without building their lines.
func TestLogQuietAllocatesNothing(t *testing.T) {
	var lv slog.LevelVar
	lv.Set(logging.Level(0))
	s := &Server{logger: logging.New(io.Discard, logging.JSON, &lv)}
	cn := &conn{srv: s, fd: 23, remote: "127.0.0.1:5555"}
	quiet := func() {
		cn.log(slog.LevelDebug, "connection opened", slog.String("listen", "tcp:127.0.0.1:11211"))
		s.logConn(slog.LevelInfo, "refused: too many open connections", 24, "127.0.0.1:5556", slog.Int("limit", 2))
		cn.protocolError("not a binary request")
	}
	assert.Zero(t, testing.AllocsPerRun(200, quiet))
}

// The refusal lines' limit lets refusalLines lines through in each window, holds back the rest, and says
// when the first held-back line since the count was taken arrives.
func TestLineLimit(t *testing.T) {
	type step struct {
		at        time.Duration // since the first line
		ok, first bool
		take      int // when > 0 or the last step: takeHeld before the next step, expecting this
	}
	fill := func(at time.Duration) []step { // refusalLines lines let through at at
		s := make([]step, refusalLines)
		for i := range s {
			s[i] = step{at: at, ok: true}
		}
		return s
	}
	cat := func(parts ...[]step) []step {
		var all []step
		for _, p := range parts {
			all = append(all, p...)
		}
		return all
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"under the limit", fill(0)},
		{"over it", cat(fill(0), []step{{at: 1, first: true}, {at: 2}, {at: refusalWindow - 1}})},
		{"a new window", cat(fill(0), []step{{at: 1, first: true}}, fill(refusalWindow), []step{{at: refusalWindow, take: 2}})},
		{"counted again after a take", cat(fill(0), []step{{at: 1, first: true, take: 1}, {at: 2, first: true}, {at: 3, take: 2}})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l lineLimit
			t0 := time.Unix(1_000_000, 0)
			held := 0
			for i, s := range tc.steps {
				ok, first := l.allow(t0.Add(s.at))
				assert.Equal(t, s.ok, ok, "step %d: let through", i)
				assert.Equal(t, s.first, first, "step %d: first held back", i)
				if !ok {
					held++
				}
				if s.take > 0 {
					assert.Equal(t, s.take, held, "the test's own count at step %d", i)
					assert.Equal(t, held, l.takeHeld(), "held back before step %d", i+1)
					held = 0
				}
			}
			assert.Equal(t, held, l.takeHeld(), "held back at the end")
		})
	}
}

// A connection refused for lack of descriptors (gnet's acceptor calls Refusal with the descriptor it was
// accepted on and its peer) is counted, told memcached's line, and logged at -v naming its descriptor and
// peer: refusalLines lines a second at most, and one line with the count of those held back.
func TestRefusalLogged(t *testing.T) {
	const refusals = refusalLines + 5
	for _, verbosity := range []int{0, 1} {
		t.Run("-v"+strconv.Itoa(verbosity), func(t *testing.T) {
			var out logBuffer
			var lv slog.LevelVar
			s := newTestServerConfig(t, func(c *Config) {
				c.Verbosity, c.LogLevel, c.Logger = verbosity, &lv, logging.New(&out, logging.JSON, &lv)
			})
			for i := range refusals {
				peer := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000 + i}
				assert.Equal(t, string(tooManyConns), string(s.Refusal(30+i, peer)))
			}
			assert.Equal(t, uint64(refusals), s.stats.rejectedConns.Load(), "rejected_connections")
			if verbosity == 0 {
				time.Sleep(refusalWindow + 100*time.Millisecond)
				assert.Empty(t, out.lines(), "quiet at -v0")
				return
			}
			var summary *logLine
			for deadline := time.Now().Add(refusalWindow + 3*time.Second); summary == nil && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
				lines := out.lines()
				if len(lines) > refusalLines {
					l := parseLogLine(t, logging.JSON, lines[refusalLines])
					summary = &l
				}
			}
			lines := out.lines()
			require.Len(t, lines, refusalLines+1, "%d refusal lines and the count of the rest:\n%s", refusalLines, strings.Join(lines, "\n"))
			for i, line := range lines[:refusalLines] {
				l := parseLogLine(t, logging.JSON, line)
				assert.Equal(t, "INFO", l.level, line)
				assert.Equal(t, "refused: out of file descriptors", l.msg, line)
				assert.Equal(t, strconv.Itoa(30+i), l.attrs[attrConn], line)
				assert.Equal(t, "127.0.0.1:"+strconv.Itoa(40000+i), l.attrs[attrPeer], line)
			}
			require.NotNil(t, summary)
			assert.Equal(t, "refusals not logged", summary.msg)
			assert.Equal(t, "INFO", summary.level)
			assert.Equal(t, strconv.Itoa(refusals-refusalLines), summary.attrs["count"])
		})
	}
}

// -vvv traces a command once, however often it is executed again (a multi-key fetch that yields).
func TestTraceOncePerRequest(t *testing.T) {
	var out logBuffer
	var lv slog.LevelVar
	s := newTestServerConfig(t, func(c *Config) {
		c.Verbosity, c.LogLevel, c.Logger = 3, &lv, logging.New(&out, logging.JSON, &lv)
	})
	big := strings.Repeat("v", 200_000) // two of these pass flushThreshold: the get yields after b
	for _, k := range []string{"a", "b", "c"} {
		o, _ := feed(newConn(s, nil), &fakeConn{}, "set "+k+" 0 0 200000\r\n"+big+"\r\n")
		require.Equal(t, "STORED\r\n", o)
	}
	cn, fc := newConn(s, nil), &fakeConn{}
	cn.fd = 7
	fc.in.WriteString("get a b c\r\n")
	require.Equal(t, ServeAgain, cn.serve(fc), "the get yields")
	serveWoken(cn, fc)
	var gets []string
	for _, line := range out.lines() {
		if l := parseLogLine(t, logging.JSON, line); l.msg == "command" && l.attrs[attrConn] == "7" {
			gets = append(gets, line)
		}
	}
	require.Len(t, gets, 1, "%s", strings.Join(gets, "\n"))
	l := parseLogLine(t, logging.JSON, gets[0])
	assert.Equal(t, "get", l.attrs["cmd"])
	assert.Equal(t, "a", l.attrs["key"])
	assert.Equal(t, "3", l.attrs["keys"])
}
