package integration

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
)

// Bounds of the survival probe: after the bad input we send the sentinel up
// to probeAttempts times (a swallowed data block may eat the first ones),
// waiting probeWindow for its reply each time.
const (
	probeAttempts = 4
	probeWindow   = 250 * time.Millisecond
)

// connState is what a connection looks like after bad input.
type connState string

const (
	stateAlive  connState = "alive"  // the sentinel came back
	stateClosed connState = "closed" // the server closed the connection
	stateMute   connState = "mute"   // open, but no sentinel reply in time
)

// probeAfter sends bad, then probes the connection with the sentinel.
func probeAfter(d *daemon, bad []byte) (connState, []byte) {
	rc, err := dialRawErr(d)
	if err != nil {
		return connState("dial failed: " + err.Error()), nil
	}
	defer rc.c.Close()
	rep := rc.exchange(bad, wholeWrite, nil, probeWindow)
	seen := rep.data
	if rep.closed {
		return stateClosed, seen
	}
	for i := 0; i < probeAttempts; i++ {
		rep = rc.exchange(sentinelCmd, wholeWrite, sentinelReply, probeWindow)
		seen = append(seen, rep.data...)
		switch {
		case rep.closed:
			return stateClosed, seen
		case bytes.HasSuffix(rep.data, sentinelReply):
			return stateAlive, seen
		}
	}
	return stateMute, seen
}

// TestConnectionSurvivesBadInput sends each bad input on a fresh connection
// and requires leasecached's connection to end up in the same state as
// memcached's: usable where memcached's is usable, closed where memcached
// closes it.
func TestConnectionSurvivesBadInput(t *testing.T) {
	mc, lc := startPair(t)
	bad := []struct{ name, input string }{
		{"unknown command", "foo bar\r\n"},
		{"empty line", "\r\n"},
		{"bare newlines", "\n\n\n"},
		{"spaces only", "     \r\n"},
		{"wrong case", "GET k\r\nSET k 0 0 1\r\nx\r\n"},
		{"get without key", "get\r\n"},
		{"key too long get", "get " + strings.Repeat("k", 251) + "\r\n"},
		{"key too long set", "set " + strings.Repeat("k", 251) + " 0 0 1\r\nx\r\n"},
		{"bytes too few", "set k 0 0 5\r\nabc\r\n"},
		{"bytes too many", "set k 0 0 1\r\nabcdef\r\n"},
		{"negative length", "set k 0 0 -1\r\n"},
		{"garbage length", "set k 0 0 zz\r\nzz\r\n"},
		{"huge length", "set k 0 0 4294967296\r\n"},
		{"over item max", "set k 0 0 1048577\r\n" + strings.Repeat("v", 1048577) + "\r\n"},
		{"flags garbage", "set k x 0 1\r\nx\r\n"},
		{"cas garbage", "cas k 0 0 1 x\r\nx\r\n"},
		{"incr garbage", "incr k abc\r\n"},
		{"touch garbage", "touch k x\r\n"},
		{"gat garbage", "gat x k\r\n"},
		{"delete garbage", "delete k x y\r\n"},
		{"verbosity garbage", "verbosity x\r\n"},
		{"too many tokens", "get " + strings.Repeat("k ", 30) + "\r\nset k 0 0 1 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0\r\n"},
		{"nul bytes", "get a\x00b\r\n\x00\x00\r\n"},
		{"high bytes", "\xff\xfe\xfd garbage\r\n"},
		{"telnet interrupt", "\xff\xf4\xff\xfd\x06\r\n"},
		{"http request", "GET / HTTP/1.1\r\nHost: x\r\n\r\n"},
		{"meta command unknown flags", "mg k zz\r\n"},
		{"noreply error", "set k 0 0 2 noreply\r\nabcd\r\n"},
		{"line without newline, short", "get k"},
		{"line that never ends", "set " + strings.Repeat("x", neverEndingLine)},
	}
	for _, b := range bad {
		t.Run(b.name, func(t *testing.T) {
			parallelWaiting(t)
			wantState, wantSeen := probeAfter(mc, []byte(b.input))
			gotState, gotSeen := probeAfter(lc, []byte(b.input))
			if os.Getenv(dumpEnv) != "" {
				t.Logf("memcached: %s after %q", wantState, truncate(wantSeen, 300))
			}
			if gotState != wantState {
				t.Errorf("after %q: memcached's connection is %s (saw %q), leasecached's is %s (saw %q)",
					truncate([]byte(b.input), 80), wantState, truncate(wantSeen, 300), gotState, truncate(gotSeen, 300))
			}
		})
	}
}
