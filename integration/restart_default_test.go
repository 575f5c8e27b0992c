package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
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

// TestRestartUnreadableLiveCopy: a start that cannot read the live copy a killed server left (its
// directory made unreadable to the user the server runs as) refuses to start, saying why, and changes
// nothing: once the copy is readable again, the next start serves what was stored after the last sync,
// which only the copy holds. The refused start used to take the copy for absent and mark DIR's files
// as the newest (a new instance, or the copy freed with --data-live off), losing it for good (found by
// the kill -9 campaign, run unprivileged). Both starts that read the copy are run: same root, and
// --data-live off, which writes the copy into DIR first, and a -m whose shard count would start empty
// (which emptied DIR before it failed). Needs root, to run the refused start as nobody.
func TestRestartUnreadableLiveCopy(t *testing.T) {
	requireRestart(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root, to start a server as another user")
	}
	const nobody = 65534
	bin := filepath.Join(t.TempDir(), "leasecached") // where nobody may run it from
	data, err := os.ReadFile(leasecachedPlainPath)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bin, data, 0o755))
	for _, d := range []string{filepath.Dir(bin), filepath.Dir(filepath.Dir(bin))} { // the test's, 0700
		require.NoError(t, os.Chmod(d, 0o755))
	}
	for _, then := range []string{"same root", "--data-live off", "another shard count"} {
		t.Run(then, func(t *testing.T) {
			live := liveArgs(t)
			root := live[1]
			dir := t.TempDir()
			d := startOnDir(t, dir, live...)
			waitLoaded(t, d)
			c := mustDialRS(t, d)
			want := map[string]rsItem{}
			for i := range 50 { // after the start's header sync, before any sync of items: in the copy only
				key := fmt.Sprintf("u%d", i)
				want[key] = rsItem{flags: uint32(i), val: rsValue(key, 0, 100+i)}
				mustStore(t, c, "set", key, want[key].flags, 0, want[key].val)
			}
			stopDaemon(t, d, stopKill)
			copies, err := filepath.Glob(filepath.Join(root, "leasecached-*"))
			require.NoError(t, err)
			require.Len(t, copies, 1, "the live copy")
			for _, p := range []string{dir, root} {
				require.NoError(t, filepath.Walk(p, func(path string, _ os.FileInfo, err error) error {
					if err != nil {
						return err
					}
					return os.Lchown(path, nobody, nobody)
				}))
			}
			require.NoError(t, os.Chmod(filepath.Dir(dir), 0o711))
			require.NoError(t, os.Chmod(copies[0], 0))

			port, err := freePort()
			require.NoError(t, err)
			args := []string{"-p", strconv.Itoa(port), "-l", "127.0.0.1", "--data-dir", dir, "--data-live", root}
			switch then {
			case "--data-live off":
				args[len(args)-1] = "off"
			case "another shard count": // would start empty, if it could read the copy
				args = append(args, "-m", "1024")
			}
			cmd := exec.Command(bin, args...)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
			out, err := runBounded(cmd, 5*time.Second)
			var exit *exec.ExitError
			assert.ErrorAs(t, err, &exit, "a start that cannot read the live copy must fail: %s", out)
			assert.Contains(t, string(out), "cannot read its live copy", "why, in its one line")
			lock, err := os.ReadFile(filepath.Join(dir, "lock"))
			require.NoError(t, err)
			assert.NotContains(t, string(lock), strconv.Itoa(cmd.Process.Pid), "DIR's lock names a server that did not start")

			require.NoError(t, os.Chmod(copies[0], 0o700))
			d = startOnDir(t, dir, live...)
			waitLoaded(t, d)
			expectItems(t, mustDialRS(t, d), want, "stored after the last sync, once the copy is readable")
		})
	}
}

// runBounded runs cmd to its end, or kills it after limit; its combined output.
func runBounded(cmd *exec.Cmd, limit time.Duration) ([]byte, error) {
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	timer := time.AfterFunc(limit, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	err := cmd.Wait()
	return []byte(out.String()), err
}
