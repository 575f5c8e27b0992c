package integration

import (
	"encoding/json"
	"io"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leasecached/leasecached/internal/testcert"
	"github.com/leasecached/leasecached/internal/testdaemon"
)

// The daemon's log at -v0, -v and -vv, as text and as JSON (doc/design/logging.md): the stop a signal
// asks for is logged at every verbosity; a connection refused by -c and a failed TLS handshake from -v
// on; connections opened and closed from -vv on; each line about a client names its descriptor (conn)
// and its address (peer).
func TestDaemonLogs(t *testing.T) {
	parallelWaiting(t)
	certs := testcert.New(t)
	const (
		stopping = "stopping (a second signal exits at once)"
		refused  = "refused: too many open connections"
		tlsFail  = "TLS handshake failed"
		opened   = "connection opened"
		closed   = "connection closed"
	)
	all := []string{stopping, refused, tlsFail, opened, closed}
	for _, tc := range []struct {
		name string
		args []string
		json bool
		want []string // of all, the messages logged; the others must not be
	}{
		{"-v0", nil, false, []string{stopping}},
		{"-v", []string{"-v"}, false, []string{stopping, refused, tlsFail}},
		{"-vv", []string{"-vv"}, false, all},
		{"-v0 json", []string{"--log-format", "json"}, true, []string{stopping}},
		{"-v json", []string{"-v", "--log-format=json"}, true, []string{stopping, refused, tlsFail}},
		{"-vv json", []string{"-vv", "--log-format", "json"}, true, all},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port, err := freePort()
			require.NoError(t, err)
			plainAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
			args := append(tlsFlags(certs), "-l", "notls:"+plainAddr, "-c", "1")
			d := startLeasecached(t, append(args, tc.args...)...)
			require.NoError(t, testdaemon.WaitAccepts(plainAddr, startTimeout))

			held, refusedConn := holdAndRefuse(t, plainAddr)
			bad, err := net.DialTimeout("tcp", d.addr, dialTimeout) // plaintext on the TLS port
			require.NoError(t, err)
			require.NoError(t, bad.SetDeadline(time.Now().Add(10*time.Second)))
			_, err = io.WriteString(bad, "version\r\n")
			require.NoError(t, err)
			_, _ = io.ReadAll(bad)
			bad.Close()
			heldPeer := held.LocalAddr().String()
			held.Close()
			time.Sleep(50 * time.Millisecond) // the close reaches the server before the signal
			require.NoError(t, d.cmd.Process.Signal(syscall.SIGTERM))
			status, _ := waitExit(t, d, sigtermTimeout)
			require.Equal(t, 0, status)

			peers := map[string]string{refused: refusedConn, tlsFail: bad.LocalAddr().String(), opened: heldPeer}
			found := map[string]bool{}
			out := strings.TrimSuffix(d.out.String(), "\n")
			for _, line := range strings.Split(out, "\n") {
				l := parseDaemonLine(t, line, tc.json)
				assert.NotEqual(t, "", l.level, "%q", line)
				if p, ok := peers[l.msg]; ok {
					assert.Regexp(t, `^[0-9]+$`, l.attrs["conn"], "the descriptor: %q", line)
					assert.Regexp(t, `^127\.0\.0\.1:[0-9]+$`, l.attrs["peer"], "the address: %q", line)
					if l.attrs["peer"] == p {
						found[l.msg] = true
					}
					continue
				}
				if l.msg == closed || l.msg == stopping {
					found[l.msg] = true
				}
			}
			for _, m := range all {
				assert.Equal(t, slices.Contains(tc.want, m), found[m], "%q logged; output:\n%s", m, out)
			}
		})
	}
}

// holdAndRefuse opens connections to addr (a daemon with -c 1) until one is served and one refused, and
// returns the one served (open) and the address of the refused one. A slot another connection (a
// readiness probe) still holds makes a refusal before the served one: that one is tried again.
func holdAndRefuse(t *testing.T, addr string) (held net.Conn, refusedPeer string) {
	t.Helper()
	for try := 0; try < 50 && (held == nil || refusedPeer == ""); try++ {
		c, err := net.DialTimeout("tcp", addr, dialTimeout)
		require.NoError(t, err)
		require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
		_, err = io.WriteString(c, "version\r\n")
		require.NoError(t, err)
		buf := make([]byte, 64)
		n, _ := io.ReadAtLeast(c, buf, 2)
		switch reply := string(buf[:n]); {
		case strings.HasPrefix(reply, "VERSION ") && held == nil:
			held = c
			continue
		case reply == string(rejectReply) && held != nil:
			refusedPeer = c.LocalAddr().String()
		}
		c.Close()
		time.Sleep(10 * time.Millisecond)
	}
	require.NotNil(t, held, "no connection was served")
	require.NotEmpty(t, refusedPeer, "no connection was refused")
	return held, refusedPeer
}

// daemonLine is one log line of the daemon, in either format.
type daemonLine struct {
	level, msg string
	attrs      map[string]string
}

var (
	daemonText     = regexp.MustCompile(`^leasecached: \d{4}/\d\d/\d\d \d\d:\d\d:\d\d ([A-Z]+) (.*)$`)
	daemonTextAttr = regexp.MustCompile(` ([a-z_]+)=("[^"]*"|[^ ]*)`)
)

func parseDaemonLine(t *testing.T, line string, isJSON bool) daemonLine {
	t.Helper()
	l := daemonLine{attrs: map[string]string{}}
	if isJSON {
		var m map[string]any
		if !assert.NoError(t, json.Unmarshal([]byte(line), &m), "one JSON object a line: %q", line) {
			return l
		}
		l.level, _ = m["level"].(string)
		l.msg, _ = m["msg"].(string)
		for k, v := range m {
			b, _ := json.Marshal(v)
			l.attrs[k] = strings.Trim(string(b), `"`)
		}
		return l
	}
	m := daemonText.FindStringSubmatch(line)
	if !assert.NotNil(t, m, "a text line: %q", line) {
		return l
	}
	l.level, l.msg = m[1], m[2]
	if i := daemonTextAttr.FindStringIndex(l.msg); i != nil {
		l.msg = l.msg[:i[0]]
	}
	for _, a := range daemonTextAttr.FindAllStringSubmatch(line, -1) {
		l.attrs[a[1]] = strings.Trim(a[2], `"`)
	}
	return l
}
