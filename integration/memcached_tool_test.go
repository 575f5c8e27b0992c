package integration

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// memcachedTool is the admin script Debian's memcached package ships; its dump and keys commands read
// the cache through `lru_crawler metadump all`.
const memcachedTool = "/usr/share/memcached/scripts/memcached-tool"

// toolFields and toolDumpExp mask what legitimately differs between two servers started a moment apart:
// last-access times, absolute expiry times, CAS values (in keys' lines and dump's add lines).
var (
	toolFields  = regexp.MustCompile(`\b(la|exp|cas)=\d+`)
	toolDumpExp = regexp.MustCompile(`^(add \S+ \d+) \d{9,}`)
)

// TestMemcachedTool runs memcached-tool's keys and dump against memcached and leasecached holding the same
// items and requires the same output (sorted: both servers list in their own memory order).
func TestMemcachedTool(t *testing.T) {
	if _, err := os.Stat(memcachedTool); err != nil {
		missing(t, "memcached-tool not found at %s (Debian package memcached): %v", memcachedTool, err)
		return
	}
	if _, err := exec.LookPath("perl"); err != nil {
		missing(t, "perl not found: %v", err)
		return
	}
	mc, lc := startPair(t)
	setup := "set plain 0 0 5\r\nhello\r\nset flagged 42 3600 3\r\nabc\r\nset sp%20ace 0 0 1\r\nz\r\nget plain\r\nmn\r\n"
	for _, d := range []*daemon{mc, lc} {
		rc := dialRaw(t, d)
		if rep := rc.exchange([]byte(setup), wholeWrite, sentinelReply, defaultReplyTimeout); !strings.HasSuffix(string(rep.data), "MN\r\n") {
			t.Fatalf("setup on %s: %q", d.addr, rep.data)
		}
	}
	for _, cmd := range []string{"keys", "dump"} {
		var out [2]string
		for i, d := range []*daemon{mc, lc} {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			b, err := exec.CommandContext(ctx, "perl", memcachedTool, d.addr, cmd).CombinedOutput()
			cancel()
			if err != nil {
				t.Fatalf("memcached-tool %s %s: %v\n%s", d.addr, cmd, err, b)
			}
			// dump prints values with their "\r\n"; sorting lines from two listing orders must not
			// depend on which one came last.
			text := strings.ReplaceAll(string(b), "\r\n", "\n")
			lines := strings.Split(strings.TrimSpace(toolFields.ReplaceAllString(text, "$1=N")), "\n")
			for j, l := range lines {
				lines[j] = toolDumpExp.ReplaceAllString(l, "$1 N")
			}
			sort.Strings(lines)
			if len(lines) < 4 {
				t.Fatalf("memcached-tool %s %s printed too little: %q", d.addr, cmd, lines)
			}
			out[i] = strings.Join(lines, "\n")
		}
		if out[0] != out[1] {
			t.Errorf("memcached-tool %s differs:\nmemcached:   %q\nleasecached: %q", cmd, out[0], out[1])
		}
	}
}
