package integration

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/leasecached/leasecached/internal/testdaemon"
)

// TestDataDirDefaultLive runs --data-dir with --data-live's default, which keeps the live copy in
// /dev/shm when it is a tmpfs with room for -m (doc/design/restart-live.md): the start says
// so in one line, the copy is there while the server runs and after it stops, a restart after SIGTERM
// and after kill -9 serves every value, and a start with --data-live off serves them from the directory
// and frees the copy. The fallback, a directory mapped where there is no such tmpfs, is
// cmd/leasecached's TestAutoLive.
func TestDataDirDefaultLive(t *testing.T) {
	requireRestart(t)
	var fs syscall.Statfs_t
	if syscall.Statfs("/dev/shm", &fs) != nil || fs.Type != tmpfsMagic || int64(fs.Bavail)*fs.Bsize < 1<<30 {
		t.Skip("no tmpfs at /dev/shm with 1 GiB free")
	}
	dir := t.TempDir()
	var st syscall.Stat_t
	require.NoError(t, syscall.Stat(dir, &st))
	liveDir := fmt.Sprintf("/dev/shm/leasecached-%x-%x", st.Dev, st.Ino)
	t.Cleanup(func() { _ = os.RemoveAll(liveDir) }) // after the daemons stop: cleanups run last first
	start := func(args ...string) *daemon {
		d := startDaemonSpec(t, testdaemon.Spec{Name: "leasecached", Path: leasecachedPath, Env: noExitSleep(),
			Args: leasecachedArgs(append([]string{"--data-dir", dir, "-m", "64"}, args...))})
		waitLoaded(t, d)
		return d
	}

	d := start()
	lines := dataDirLines(d)
	require.Len(t, lines, 1, "one line names --data-dir: %q", lines)
	require.Contains(t, lines[0], "kept live in /dev/shm")
	require.DirExists(t, liveDir)
	want, _ := fillSettings(t, mustDialRS(t, d), 300, 0)
	for i, how := range []stopHow{stopTerm, stopKill} {
		stopDaemon(t, d, how)
		require.DirExists(t, liveDir, "the live copy after %s", how)
		d = start()
		c := mustDialRS(t, d)
		expectItems(t, c, want, "the default --data-live after "+string(how))
		for j := range 50 { // more, for the next stop to keep
			key := fmt.Sprintf("more%d-%d", i, j)
			it := rsItem{flags: uint32(j), val: rsValue(key, i, 100+j)}
			mustStore(t, c, "set", key, it.flags, 0, it.val)
			want[key] = it
		}
	}
	stopDaemon(t, d, stopTerm)
	d = start("--data-live", "off")
	expectItems(t, mustDialRS(t, d), want, "--data-live off after a clean stop with the default")
	require.NoDirExists(t, liveDir, "a start with --data-live off frees the default live copy")
	for _, l := range dataDirLines(d) {
		require.False(t, strings.Contains(l, "/dev/shm"), "--data-live off: %q", l)
	}

	// After kill -9 the live copy is ahead of the directory by what no sync took there (none: --data-sync
	// 0): a start with --data-live off writes it into the directory first, deletes and overwrites too.
	stopDaemon(t, d, stopTerm)
	d = start("--data-sync", "0")
	c := mustDialRS(t, d)
	gone := 0
	for key, it := range want {
		if gone < 20 {
			line, err := c.call("delete " + key + "\r\n")
			require.NoError(t, err)
			require.Equal(t, "DELETED", line)
			delete(want, key)
			gone++
			continue
		}
		it.val = rsValue(key, 9, len(it.val))
		mustStore(t, c, "set", key, it.flags, 0, it.val)
		want[key] = it
	}
	stopDaemon(t, d, stopKill)
	d = start("--data-live", "off")
	c = mustDialRS(t, d)
	expectItems(t, c, want, "--data-live off after kill -9 with the default")
	stats, err := c.stats()
	require.NoError(t, err)
	require.Equal(t, strconv.Itoa(len(want)), stats["curr_items"], "deleted items came back")
	require.NoDirExists(t, liveDir)
}
