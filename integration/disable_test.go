package integration

import (
	"encoding/binary"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDisableSwitchesDifferential: memcached's -F, -X and -W (flush_all, the item dumps and watch
// refused) give memcached 1.6.18's replies, counts and settings, in text and binary, and refuse nothing
// else; without them the same commands work.
func TestDisableSwitchesDifferential(t *testing.T) {
	script := []string{
		"set a 0 0 1\r\nx\r\n", "flush_all\r\n", "flush_all 10\r\n", "flush_all noreply\r\n",
		"stats cachedump 1 1\r\n", "stats cachedump\r\n", "lru_crawler metadump all\r\n",
		"lru_crawler metadump bogus\r\n", "watch\r\n", "watch noreply\r\n", "watch fetchers noreply\r\n",
		"watch bogus\r\n", "get a\r\n",
	}
	run := func(t *testing.T, d *daemon, off bool) (text []string, bin []string, stats map[string]string) {
		c := dialWatch(t, d)
		for _, cmd := range script {
			if !off && (strings.HasPrefix(cmd, "watch") || strings.HasPrefix(cmd, "lru_crawler") ||
				cmd == "stats cachedump 1 1\r\n") {
				// A watch that works turns the connection into a stream (watch_test.go); the dumps that work
				// are compared elsewhere: memcached's reply to a command right behind a metadump varies, and
				// its cachedump lists a flushed item until its crawler reaps it.
				continue
			}
			text = append(text, fmt.Sprintf("%q -> %q", cmd, c.do(t, cmd)))
		}
		// Binary FLUSH and FLUSHQ, then a NOOP, on a connection of its own (the first byte picks the
		// protocol): each reply's opcode and status.
		b := dialWatch(t, d)
		b.send(t, string(bSimple(opFlush).encode("", 1, 0))+string(bSimple(opFlushQ).encode("", 2, 0))+
			string(bSimple(opNoop).encode("", 3, 0)))
		require.NoError(t, b.c.SetReadDeadline(time.Now().Add(5*time.Second)))
		for {
			hdr := make([]byte, binHdrLen)
			_, err := io.ReadFull(b.r, hdr)
			require.NoError(t, err)
			_, err = io.CopyN(io.Discard, b.r, int64(binary.BigEndian.Uint32(hdr[8:])))
			require.NoError(t, err)
			bin = append(bin, fmt.Sprintf("op %#02x status %#04x", hdr[1], binary.BigEndian.Uint16(hdr[6:])))
			if hdr[1] == opNoop {
				break
			}
		}
		stats = map[string]string{}
		for _, group := range []string{"stats\r\n", "stats settings\r\n"} {
			for _, l := range c.do(t, group) {
				if f := strings.Fields(l); len(f) == 3 && (f[1] == "cmd_flush" || strings.HasSuffix(f[1], "_enabled")) {
					stats[f[1]] = f[2]
				}
			}
		}
		return text, bin, stats
	}
	for _, flags := range [][]string{{"-F", "-X", "-W"}, nil} {
		t.Run(strings.Join(append([]string{"flags"}, flags...), " "), func(t *testing.T) {
			mcText, mcBin, mcStats := run(t, startMemcached(t, flags...), flags != nil)
			lcText, lcBin, lcStats := run(t, startLeasecached(t, flags...), flags != nil)
			assert.Equal(t, strings.Join(mcText, "\n"), strings.Join(lcText, "\n"), "memcached, then leasecached")
			assert.Equal(t, mcBin, lcBin)
			assert.Equal(t, mcStats, lcStats)
			if len(flags) > 0 {
				assert.Contains(t, lcText[1], "CLIENT_ERROR flush_all not allowed", "the switch is on")
			}
		})
	}
}
