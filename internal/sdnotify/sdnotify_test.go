package sdnotify

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/leasecached/leasecached/internal/sdnotify/sdnotifytest"
)

func TestNotifySends(t *testing.T) {
	cases := []struct {
		name   string
		socket func(t *testing.T) string // the NOTIFY_SOCKET value
	}{
		{"path", func(t *testing.T) string { return filepath.Join(t.TempDir(), "notify") }},
		{"abstract", func(t *testing.T) string {
			return fmt.Sprintf("@leasecached-sdnotify-test-%d-%d", os.Getpid(), time.Now().UnixNano())
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			socket := tc.socket(t)
			c := sdnotifytest.ListenAt(t, socket)
			t.Setenv(EnvSocket, socket)
			n := FromEnv()
			require.True(t, n.Enabled())
			for _, state := range []string{Ready, Stopping, "RELOADING=1\nMONOTONIC_USEC=5"} {
				require.NoError(t, n.Notify(state))
				msg, ok := c.Next(time.Second)
				require.True(t, ok, "no datagram within 1s")
				assert.Equal(t, state, msg, "one datagram, as sent")
			}
		})
	}
}

// Unset, nothing is sent and nothing fails; a socket that is not there, or not a unix socket, is an error
// the daemon can log.
func TestNotifyNotThere(t *testing.T) {
	t.Setenv(EnvSocket, "")
	assert.False(t, FromEnv().Enabled())
	assert.NoError(t, FromEnv().Notify(Ready))
	var nilN *Notifier
	assert.NoError(t, nilN.Notify(Ready))

	for _, socket := range []string{filepath.Join(t.TempDir(), "absent"), "vsock:2:1234", "relative/path"} {
		n := New(socket)
		assert.True(t, n.Enabled(), socket)
		assert.Error(t, n.Notify(Ready), socket)
	}
}

// MONOTONIC_USEC is CLOCK_MONOTONIC in microseconds, the clock systemd compares it with.
func TestReloadingMonotonic(t *testing.T) {
	now := func() int64 {
		var ts unix.Timespec
		require.NoError(t, unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts))
		return ts.Nano() / 1000
	}
	before := now()
	msg := Reloading()
	after := now()
	lines := strings.Split(msg, "\n")
	require.Len(t, lines, 2)
	assert.Equal(t, "RELOADING=1", lines[0])
	v, ok := strings.CutPrefix(lines[1], "MONOTONIC_USEC=")
	require.True(t, ok, lines[1])
	usec, err := strconv.ParseInt(v, 10, 64)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, usec, before)
	assert.LessOrEqual(t, usec, after)
}
