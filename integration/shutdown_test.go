package integration

import (
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestShutdownCommandDifferential: memcached's shutdown command, with and without -A. Without it the
// command is refused in memcached's words; with it a bad mode is a client error, and `shutdown` or
// `shutdown graceful` closes the connection without a reply and stops the daemon with status 0. Both
// servers must agree on every reply and on the end.
func TestShutdownCommandDifferential(t *testing.T) {
	parallelWaiting(t)
	for _, tc := range []struct {
		flags []string
		final string // the command that ends the run ("": none)
	}{
		{nil, ""},
		{[]string{"-A"}, "shutdown\r\n"},
		{[]string{"-A"}, "shutdown graceful\r\n"},
	} {
		t.Run(fmt.Sprint(tc.flags, tc.final), func(t *testing.T) {
			run := func(d *daemon) []string {
				c := dialWatch(t, d)
				var got []string
				for _, cmd := range []string{"shutdown foo\r\n", "shutdown graceful now\r\n", "set k 0 0 1\r\nv\r\n"} {
					got = append(got, fmt.Sprintf("%q -> %q", cmd, c.do(t, cmd)))
				}
				for _, l := range c.do(t, "stats settings\r\n") {
					if len(l) > 22 && l[:22] == "STAT shutdown_command " {
						got = append(got, l)
					}
				}
				if tc.final == "" {
					got = append(got, fmt.Sprintf("%q -> %q", "shutdown\r\n", c.do(t, "shutdown\r\n")))
					return got
				}
				c.send(t, tc.final)
				require.NoError(t, c.c.SetReadDeadline(time.Now().Add(5*time.Second)))
				rest, err := io.ReadAll(c.r)
				got = append(got, fmt.Sprintf("after %q: %q %v", tc.final, rest, err))
				select {
				case <-d.exited:
					got = append(got, fmt.Sprintf("exit status: %v", d.waitErr))
				case <-time.After(10 * time.Second):
					got = append(got, "still running 10 s after the command")
				}
				return got
			}
			mc := run(startMemcached(t, tc.flags...))
			lc := run(startLeasecached(t, tc.flags...))
			assert.Equal(t, mc, lc, "memcached, then leasecached")
		})
	}
}
