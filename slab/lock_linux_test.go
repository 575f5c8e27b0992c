package slab

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// fakeProc writes a /proc/PID directory under root with the given stat and status texts ("": no file).
func fakeProc(t *testing.T, root string, pid int, stat, status string) {
	t.Helper()
	dir := filepath.Join(root, strconv.Itoa(pid))
	require.NoError(t, os.MkdirAll(dir, 0o700))
	for name, text := range map[string]string{"stat": stat, "status": status} {
		if text != "" {
			require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600))
		}
	}
}

// statLine is a /proc/PID/stat line of a process named comm in state with flags.
func statLine(comm string, state byte, flags uint64) string {
	return "4242 (" + comm + ") " + string(state) + " 1 4242 4242 0 -1 " + strconv.FormatUint(flags, 10) +
		" 120 0 0 0 5 3 0 0 20 0 9 0 1234 5000000 300 18446744073709551615\n"
}

func statusText(sigPnd, shdPnd string) string {
	return "Name:\tleasecached\nState:\tS (sleeping)\nTgid:\t4242\nSigQ:\t0/63459\nSigPnd:\t" + sigPnd +
		"\nShdPnd:\t" + shdPnd + "\nSigBlk:\t0000000000000000\n"
}

// TestOwnerLeaving reads lock files and /proc as the kernel writes them: a holder is leaving when it
// wrote that it is stopping, is a zombie or in its exit (PF_EXITING), or has a SIGKILL pending.
func TestOwnerLeaving(t *testing.T) {
	const none = "0000000000000000"
	killed := "0000000000000100" // bit 8: signal 9
	tests := []struct {
		name, content, stat, status string
		pid, leaving                string
	}{
		{name: "running", content: "4242", stat: statLine("leasecached", 'S', 0x400040), status: statusText(none, none),
			pid: "4242"},
		{name: "stopping", content: "4242 stopping", stat: statLine("leasecached", 'S', 0x400040), pid: "4242",
			leaving: "stopping"},
		{name: "stopping, gone from /proc: a mark left behind", content: "4243 stopping", pid: "4243"},
		{name: "zombie", content: "4242", stat: statLine("leasecached", 'Z', 0x400044), pid: "4242", leaving: "exiting"},
		{name: "dead", content: "4242", stat: statLine("leasecached", 'X', 0), pid: "4242", leaving: "exiting"},
		{name: "in its exit", content: "4242", stat: statLine("leasecached", 'R', 0x400044), pid: "4242",
			leaving: "exiting"},
		{name: "a comm with ') Z '", content: "4242", stat: statLine("a) Z 1 (b", 'S', 0x400040),
			status: statusText(none, none), pid: "4242"},
		{name: "SIGKILL pending on the thread", content: "4242", stat: statLine("leasecached", 'S', 0x400040),
			status: statusText(killed, none), pid: "4242", leaving: "killed"},
		{name: "SIGKILL pending on the group", content: "4242", stat: statLine("leasecached", 'S', 0x400040),
			status: statusText(none, killed), pid: "4242", leaving: "killed"},
		{name: "other signals pending", content: "4242", stat: statLine("leasecached", 'S', 0x400040),
			status: statusText("0000000000004000", "0000000000000002"), pid: "4242"},
		{name: "not in /proc", content: "4244", pid: "4244"},
		{name: "no pid", content: "", pid: ""},
		{name: "not a pid", content: "../../etc", pid: "../../etc"},
		{name: "a negative pid", content: "-1 stopping", pid: "-1"},
		{name: "torn: a mark half written", content: "4242 sto", stat: statLine("leasecached", 'S', 0x400040),
			pid: "4242 sto"},
	}
	root := t.TempDir()
	old := procRoot
	procRoot = root
	t.Cleanup(func() { procRoot = old })
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, os.RemoveAll(filepath.Join(root, "4242")))
			if tc.stat != "" || tc.status != "" {
				fakeProc(t, root, 4242, tc.stat, tc.status)
			}
			pid, leaving := ownerLeaving([]byte(tc.content))
			assert.Equal(t, tc.pid, pid)
			assert.Equal(t, tc.leaving, leaving)
		})
	}
}

// TestOwnerLeavingThisProcess: the test process itself, running, is not leaving.
func TestOwnerLeavingThisProcess(t *testing.T) {
	pid, leaving := ownerLeaving([]byte(strconv.Itoa(os.Getpid())))
	assert.Equal(t, strconv.Itoa(os.Getpid()), pid)
	assert.Empty(t, leaving)
}

// holdLock takes dir's lock as another server would (flock is per open file, so a second open in this
// process conflicts with it) and writes content into the lock file; the returned func lets go.
func holdLock(t *testing.T, dir, content string) func() {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	require.NoError(t, err)
	require.NoError(t, unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB))
	require.NoError(t, f.Truncate(0))
	_, err = f.WriteAt([]byte(content), 0)
	require.NoError(t, err)
	return func() { _ = f.Close() }
}

// TestOpenWaitsForALeavingServer: an open whose directory is locked by a server that is leaving, or that
// says so within lockGrace, waits, says so once, and opens when the lock is let go; one locked by a server
// that runs is refused after lockGrace; one whose holder stays leaving past lockWait is refused then.
func TestOpenWaitsForALeavingServer(t *testing.T) {
	id := Identity{Shards: 1, Classes: DefaultClasses()}
	root := t.TempDir()
	oldRoot, oldWait := procRoot, lockWait
	procRoot = root
	t.Cleanup(func() { procRoot, lockWait = oldRoot, oldWait })
	fakeProc(t, root, 4242, statLine("leasecached", 'Z', 0x400044), "")
	fakeProc(t, root, 4243, statLine("leasecached", 'S', 0x400040), statusText("0000000000000000", "0000000000000000"))

	for _, tc := range []struct{ name, content, later, said string }{
		{"stopping", "4243 stopping", "", "pid 4243, which is stopping"},
		{"exiting", "4242", "", "pid 4242, which is exiting"},
		// Told to stop, it writes its mark once its signal handling has run: shortly after the start looked.
		{"marked stopping after the start looked", "4243", "4243 stopping", "pid 4243, which is stopping"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			release := holdLock(t, dir, tc.content)
			if tc.later != "" {
				go func() {
					time.Sleep(lockGrace / 5)
					_ = os.WriteFile(filepath.Join(dir, "lock"), []byte(tc.later), 0o600)
				}()
			}
			var told []string
			opened := make(chan error, 1)
			go func() {
				b, _, err := OpenBacking(dir, id, BackingOptions{Waiting: func(owner string) { told = append(told, owner) }})
				if err == nil {
					defer b.Close()
					var pid []byte
					pid, err = readSmall(filepath.Join(dir, "lock"), lockMax)
					if err == nil && string(pid) != strconv.Itoa(os.Getpid()) {
						err = assert.AnError
					}
				}
				opened <- err
			}()
			select {
			case err := <-opened:
				t.Fatalf("opened while the lock was held by a server %s: %v", tc.name, err)
			case <-time.After(200 * time.Millisecond):
			}
			release()
			select {
			case err := <-opened:
				require.NoError(t, err, "the open, once the lock was let go (and the lock file naming this process)")
			case <-time.After(10 * time.Second):
				t.Fatal("the open did not return once the lock was let go")
			}
			assert.Equal(t, []string{tc.said}, told)
		})
	}

	t.Run("running", func(t *testing.T) {
		dir := t.TempDir()
		defer holdLock(t, dir, "4243")()
		start := time.Now()
		_, _, err := OpenBacking(dir, id, BackingOptions{Waiting: func(string) { t.Error("told to wait for a running server") }})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "is in use by another leasecached (pid 4243)")
		assert.GreaterOrEqual(t, time.Since(start), lockGrace, "looked at again for lockGrace")
		assert.Less(t, time.Since(start), lockGrace+2*time.Second, "refused then")
	})

	t.Run("stopping for too long", func(t *testing.T) {
		lockWait = 300 * time.Millisecond
		dir := t.TempDir()
		defer holdLock(t, dir, "4243 stopping")()
		_, _, err := OpenBacking(dir, id, BackingOptions{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "is in use by another leasecached (pid 4243, stopping for more than 300ms)")
	})
}

// TestBackingStopping: Stopping leaves the pid first in the lock file and marks it stopping.
func TestBackingStopping(t *testing.T) {
	dir := t.TempDir()
	b, _, err := OpenBacking(dir, Identity{Shards: 1, Classes: DefaultClasses()}, BackingOptions{})
	require.NoError(t, err)
	defer b.Close()
	b.Stopping()
	content, err := readSmall(filepath.Join(dir, "lock"), lockMax)
	require.NoError(t, err)
	assert.Equal(t, strconv.Itoa(os.Getpid())+" stopping", string(content))
	pid, leaving := ownerLeaving(content)
	assert.Equal(t, strconv.Itoa(os.Getpid()), pid)
	assert.Equal(t, "stopping", leaving)
}

// FuzzOwnerLeaving reads any lock file content, /proc/PID/stat line and status text without panicking,
// and never takes a holder that /proc does not show for a leaving one.
func FuzzOwnerLeaving(f *testing.F) {
	f.Add([]byte("4242 stopping"), []byte(statLine("leasecached", 'Z', 0x400044)), []byte(statusText("0", "100")))
	f.Add([]byte("4242"), []byte("4242 (a) b) R 1 2 3 4 5 4"), []byte("SigPnd:\tzz\nShdPnd:"))
	f.Add([]byte(""), []byte(")"), []byte(":"))
	f.Fuzz(func(t *testing.T, content, stat, status []byte) {
		_ = statExiting(stat)
		_ = statusKilled(status)
		old := procRoot
		procRoot = filepath.Join(t.TempDir(), "none")
		defer func() { procRoot = old }()
		if _, leaving := ownerLeaving(content); leaving != "" {
			t.Fatalf("%q: a holder /proc does not show taken as %s", content, leaving)
		}
	})
}
