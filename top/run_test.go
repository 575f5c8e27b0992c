package top

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scriptedServer answers `stats` with a few counters and `stats hotkeys` with hot, for polls polls, then
// closes the connection. The real servers are in integration/top_test.go; this one makes a lost server.
func scriptedServer(t *testing.T, polls int, hot string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		r := bufio.NewReader(conn)
		gets := 0
		for n := 0; n < 2*polls; n++ {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			reply := hot
			if line == "stats\r\n" {
				gets += 1000
				reply = "STAT uptime 5\r\nSTAT version 1.6.18\r\nSTAT cmd_get " + strconv.Itoa(gets) + "\r\nEND\r\n"
			}
			if _, err := io.WriteString(conn, reply); err != nil {
				return
			}
		}
	}()
	return ln.Addr().String()
}

// runPiped runs the view with pipes for its terminal and returns what it printed.
func runPiped(t *testing.T, opt Options) (string, error) {
	t.Helper()
	inR, inW, err := os.Pipe()
	require.NoError(t, err)
	defer inW.Close()
	defer inR.Close()
	outR, outW, err := os.Pipe()
	require.NoError(t, err)
	defer outR.Close()
	got := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(outR)
		got <- string(b)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	runErr := Run(ctx, opt, inR, outW)
	outW.Close()
	return <-got, runErr
}

func TestRunPiped(t *testing.T) {
	cases := []struct {
		name   string
		polls  int
		hot    string
		iters  int
		errHas string
		has    []string // in this order
		re     string   // and this
	}{
		{"memcached-like, two frames", 2, "ERROR\r\n", 2, "", []string{
			"memcached 1.6.18 at", "rates since start", "get 200/s", "hot keys: not available (the server answered ERROR)",
			"rates over", "delete n/a"}, `rates over [0-9.]+m?s\n\nrequests   total [1-9]\d*/s  get [1-9]\d*/s`},
		{"hot keys", 1, "STAT hotkeys_sample_rate 10\r\nSTAT hotkeys_window_seconds 2\r\nSTAT hotkey:1:key k1\r\nSTAT hotkey:1:rate 9\r\nEND\r\n", 1, "",
			[]string{"hot keys: sampled 1 in 10, rates over 2 s", "  1        9   0.00%        0        0  k1"}, ""},
		{"server lost", 1, "ERROR\r\n", 0, "lost 127.0.0.1:", []string{"get 200/s"}, ""},
		{"closed before the first reply", 0, "", 0, "cannot reach 127.0.0.1:", nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr := scriptedServer(t, tc.polls, tc.hot)
			out, err := runPiped(t, Options{Addr: addr, Interval: 50 * time.Millisecond, Iterations: tc.iters, Timeout: 5 * time.Second})
			if tc.errHas != "" {
				require.ErrorContains(t, err, tc.errHas)
			} else {
				require.NoError(t, err)
			}
			assert.NotContains(t, out, "\x1b", "escape codes on a pipe")
			at := 0
			for _, want := range tc.has {
				i := strings.Index(out[at:], want)
				require.GreaterOrEqual(t, i, 0, "%q missing (in order) from:\n%s", want, out)
				at += i
			}
			assert.Regexp(t, tc.re, out)
			if tc.iters > 0 {
				assert.Equal(t, tc.iters, strings.Count(out, " at 127.0.0.1:"), "frames")
			}
		})
	}
}

func TestRunUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	out, err := runPiped(t, Options{Addr: addr, Timeout: 2 * time.Second})
	require.ErrorContains(t, err, "cannot reach "+addr)
	assert.Empty(t, out)
}

func TestReadKeys(t *testing.T) {
	cases := []struct {
		in   string
		quit bool
	}{
		{"q", true}, {"Q", true}, {"\x03", true}, {"\x04", true}, {"xyz\x1b[Aq", true}, {"abc", false}, {"", false},
	}
	for _, tc := range cases {
		stopped := false
		readKeys(strings.NewReader(tc.in), func() { stopped = true })
		assert.Equal(t, tc.quit, stopped, "%q", tc.in)
	}
}
