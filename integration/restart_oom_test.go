package integration

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/leasecached/leasecached/internal/testdaemon"
)

// The OOM killer (issue 30: the cache survives "kill -9, and the OOM killer"). Each round's daemon runs in
// a memory cgroup of the test's own, so the pages of DIR's files it touches are charged to the group. At
// the round's random moment the test squeezes the group while the writes go on: the kernel reclaims what
// page cache it can (clean pages, unmapped from the daemon, which faults them back in from the files);
// then connections make the daemon hold more memory of its own than the group has left, and the group's
// OOM killer kills it. The restart must pass the same model check as after kill -9.

const (
	oomRounds   = 2
	oomHeadroom = 256 << 10 // the page cache the cap leaves room for, in the end
	oomStep     = 4 << 20   // the most one squeeze lowers the cap by
	oomSqueeze  = 50 * time.Millisecond
	// oomPushLine is the length of an unfinished get line a pushing connection sends (under the multi-key
	// line limit), and oomMaxPush of them stay under the daemon's gathering budget, half of oomMemoryMB:
	// up to 29 were needed in trials (the daemon's heap has room of its own first).
	oomPushLine = 1 << 20
	oomMaxPush  = 60
	oomMemoryMB = "128" // -m (the last -m given wins)
	// oomTimeout bounds the squeezing and pushing.
	oomTimeout = 30 * time.Second
)

// TestRestartAfterOOMKillDuringWrites is TestRestartAfterKillDuringWrites with the kernel's OOM killer
// in the place of kill -9.
func TestRestartAfterOOMKillDuringWrites(t *testing.T) {
	requireRestart(t)
	cg := newMemcg(t)
	killDuringWrites(t, oomRounds, func(dir string) *daemon {
		cg.setLimit(t, -1)
		return startInMemcg(t, cg, dir)
	}, func(d *daemon) { oomKill(t, cg, d) })
}

// TestRestartAfterOOMKillDuringWritesLive is the same with --data-live: the items are on tmpfs, which
// reclaim cannot free without swap, so the squeeze reaches its floor at once and the pushed lines bring
// the OOM killer; the live copy, charged to the group, outlives the daemon.
func TestRestartAfterOOMKillDuringWritesLive(t *testing.T) {
	requireRestart(t)
	cg := newMemcg(t)
	live := liveArgs(t)
	killDuringWrites(t, oomRounds, func(dir string) *daemon {
		cg.setLimit(t, -1)
		return startInMemcg(t, cg, dir, live...)
	}, func(d *daemon) { oomKill(t, cg, d) })
}

// startInMemcg is startOnDir with the daemon in cg from its first instruction, so that every page it
// touches is charged to cg (a page stays charged to the group that first touched it): a shell joins cg,
// then execs the daemon (the pid stays the same).
func startInMemcg(t *testing.T, cg *memcg, dir string, extra ...string) *daemon {
	t.Helper()
	requireLeasecached(t)
	args := leasecachedArgs(onDirArgs(dir, append([]string{"-m", oomMemoryMB}, extra...)...))
	return startDaemonSpec(t, testdaemon.Spec{Name: "leasecached", Path: "/bin/sh", Env: noExitSleep(),
		Args: func(port int) []string {
			return append([]string{"-c", `echo $$ > "$0" && exec "$@"`, cg.file("procs"), leasecachedPath},
				args(port)...)
		}})
}

// oomPushBytes is the unfinished get line a pushing connection sends (oomPushLine).
var oomPushBytes = []byte("get" + strings.Repeat(" oompushkey", oomPushLine/len(" oompushkey")))

// oomPush opens one more connection to addr and sends it oomPushBytes, waiting at most write for the
// daemon to take them; it returns conns with the connection added, or as they were if the dial failed.
func oomPush(conns []net.Conn, addr string, write time.Duration) []net.Conn {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return conns
	}
	_ = c.SetWriteDeadline(time.Now().Add(write))
	_, _ = c.Write(oomPushBytes)
	return append(conns, c)
}

// oomKill squeezes cg, which holds d and whose writes go on, until the group's OOM killer kills d: every
// oomSqueeze the file systems are synced and the cap lowered by at most oomStep, towards oomHeadroom above
// what the group cannot reclaim (the kernel refuses a cap, EBUSY, while what it must reclaim is dirty; the
// next try goes on from there). At that floor the daemon can go on for a long while, reclaiming one clean
// page for the next, so from there on each step also opens a connection that sends an unfinished get line
// of oomPushLine bytes: the daemon gathers it in memory of its own (not the files' pages), which no
// reclaim can free, and once those lines pass the page cache the group still holds, the kernel cannot
// make room.
func oomKill(t *testing.T, cg *memcg, d *daemon) {
	t.Helper()
	before := cg.oomKills(t)
	start := time.Now()
	deadline := start.Add(oomTimeout)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	capped, refused, floor, limited := int64(-1), 0, false, false
squeeze:
	for {
		syscall.Sync()
		usage := cg.usage(t)
		n := usage - cg.pageCache(t) + oomHeadroom
		if capped < 0 {
			capped = usage
		}
		floor = floor || n >= capped-oomStep
		// The cap only comes down, from the usage at the first step, which is capped even when nothing
		// is reclaimable (a --data-live daemon's items are tmpfs pages).
		if n = min(capped, max(n, capped-oomStep)); n < capped || !limited {
			switch err := os.WriteFile(cg.file("limit"), []byte(strconv.FormatInt(n, 10)), 0); {
			case err == nil:
				capped, limited = n, true
			case errors.Is(err, syscall.EBUSY):
				refused++
			default:
				require.NoError(t, err, "capping %s", cg.dir)
			}
		}
		if floor && len(conns) < oomMaxPush {
			conns = oomPush(conns, d.addr, oomSqueeze)
		}
		select {
		case <-d.exited:
			break squeeze
		case <-time.After(oomSqueeze):
		}
		if time.Now().After(deadline) {
			d.forceStop()
			t.Fatalf("%s outlived %v of squeezing: cap %s bytes, usage %d, %d caps refused, %d lines pushed",
				d.name, oomTimeout, cg.limit(t), cg.usage(t), refused, len(conns))
		}
	}
	require.Equal(t, before+1, cg.oomKills(t), "the group's OOM killer killed the daemon; output:\n%s",
		d.out.Tail(2000))
	var ee *exec.ExitError
	require.ErrorAs(t, d.waitErr, &ee, "the daemon exited by itself")
	ws, ok := ee.Sys().(syscall.WaitStatus)
	require.True(t, ok)
	require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "exit status %v, not SIGKILL", ws)
	t.Logf("OOM-killed %v after the squeeze began (%d caps refused, %d lines pushed)",
		time.Since(start).Round(time.Millisecond), refused, len(conns))
}

// memcg is a memory cgroup a test made: under its own with cgroup v1's memory controller; with v2, beside
// it where the test's group has the memory controller (v2 gives no controller to the children of a group
// that holds processes, as the test's does), under it at the root. Its files are named by version.
type memcg struct {
	dir string
	v2  bool
}

// newMemcg makes a memory cgroup below the test's and removes it at the end of the test (after the
// daemons it holds are stopped: cleanups run last first). It skips where there is none to make (not
// root, no memory controller the test may use).
func newMemcg(t *testing.T) *memcg {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a memory cgroup needs root")
	}
	parent, v2, err := ownMemcg()
	if err != nil {
		t.Skipf("no memory cgroup: %v", err)
	}
	if _, err := os.Stat(filepath.Join(parent, "memory.max")); v2 && err == nil {
		parent = filepath.Dir(parent)
	}
	cg := &memcg{dir: filepath.Join(parent, fmt.Sprintf("leasecached-test-%d", os.Getpid())), v2: v2}
	if err := os.Mkdir(cg.dir, 0o755); err != nil {
		t.Skipf("cannot make a memory cgroup under %s: %v", parent, err)
	}
	t.Cleanup(func() {
		// A killed process leaves its group a moment after its exit is reported.
		for i := 0; i < 100; i++ {
			if err = os.Remove(cg.dir); err == nil || errors.Is(err, os.ErrNotExist) {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Errorf("removing %s: %v", cg.dir, err)
	})
	if _, err := os.Stat(cg.file("limit")); err != nil {
		t.Skipf("%s has no memory controller (v2: %s's subtree_control lacks memory): %v", cg.dir, parent, err)
	}
	return cg
}

// ownMemcg finds the directory of the test process's memory cgroup: v1's memory hierarchy when mounted,
// else the v2 group.
func ownMemcg() (dir string, v2 bool, err error) {
	groups, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", false, err
	}
	var v1Path, v2Path string
	haveV2 := false
	for _, l := range strings.Split(strings.TrimSpace(string(groups)), "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) != 3 {
			continue
		}
		switch {
		case f[0] == "0" && f[1] == "":
			v2Path, haveV2 = f[2], true
		case hasMemory(f[1]):
			v1Path = f[2]
		}
	}
	mounts, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", false, err
	}
	defer mounts.Close()
	var v1Mount, v2Mount string
	sc := bufio.NewScanner(mounts)
	for sc.Scan() {
		// mount ID, parent ID, major:minor, root, mount point, options, optional fields..., "-", type,
		// source, super options
		f := strings.Fields(sc.Text())
		sep := -1
		for i, x := range f {
			if x == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+3 >= len(f) || f[3] != "/" {
			continue
		}
		switch f[sep+1] {
		case "cgroup":
			if hasMemory(f[sep+3]) {
				v1Mount = f[4]
			}
		case "cgroup2":
			v2Mount = f[4]
		}
	}
	switch {
	case v1Mount != "" && v1Path != "":
		return filepath.Join(v1Mount, v1Path), false, nil
	case v2Mount != "" && haveV2:
		return filepath.Join(v2Mount, v2Path), true, nil
	}
	return "", false, errors.New("neither a cgroup v1 memory hierarchy nor cgroup v2 is mounted")
}

// hasMemory reports whether a comma-separated list of controllers or options holds "memory".
func hasMemory(list string) bool { return slices.Contains(strings.Split(list, ","), "memory") }

// file is the path of the group's file for what: limit, usage, events, stat or procs.
func (cg *memcg) file(what string) string {
	names := map[string][2]string{ // v1, v2
		"limit":  {"memory.limit_in_bytes", "memory.max"},
		"usage":  {"memory.usage_in_bytes", "memory.current"},
		"events": {"memory.oom_control", "memory.events"},
		"stat":   {"memory.stat", "memory.stat"},
		"procs":  {"cgroup.procs", "cgroup.procs"},
	}[what]
	if cg.v2 {
		return filepath.Join(cg.dir, names[1])
	}
	return filepath.Join(cg.dir, names[0])
}

func (cg *memcg) write(t *testing.T, what, v string) {
	t.Helper()
	require.NoError(t, os.WriteFile(cg.file(what), []byte(v), 0), "writing %q to %s", v, cg.file(what))
}

func (cg *memcg) read(t *testing.T, what string) string {
	t.Helper()
	b, err := os.ReadFile(cg.file(what))
	require.NoError(t, err)
	return strings.TrimSpace(string(b))
}

// setLimit caps the group at n bytes; n < 0 lifts the cap.
func (cg *memcg) setLimit(t *testing.T, n int64) {
	t.Helper()
	switch {
	case n >= 0:
		cg.write(t, "limit", strconv.FormatInt(n, 10))
	case cg.v2:
		cg.write(t, "limit", "max")
	default:
		cg.write(t, "limit", "-1")
	}
}

func (cg *memcg) limit(t *testing.T) string { return cg.read(t, "limit") }

// entry is the number on the line "key N" of the group's file for what (stat or events).
func (cg *memcg) entry(t *testing.T, what, key string) int64 {
	t.Helper()
	for _, l := range strings.Split(cg.read(t, what), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == key {
			n, err := strconv.ParseInt(f[1], 10, 64)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatalf("%s has no %s", cg.file(what), key)
	return 0
}

// pageCache is how much of the group's usage is page cache that reclaim can free, in bytes: tmpfs's is not.
func (cg *memcg) pageCache(t *testing.T) int64 {
	t.Helper()
	file := "cache"
	if cg.v2 {
		file = "file"
	}
	return max(cg.entry(t, "stat", file)-cg.entry(t, "stat", "shmem"), 0)
}

// usage is what the group is charged for now, in bytes.
func (cg *memcg) usage(t *testing.T) int64 {
	t.Helper()
	n, err := strconv.ParseInt(cg.read(t, "usage"), 10, 64)
	require.NoError(t, err)
	return n
}

// oomKills is how many processes the group's OOM killer has killed.
func (cg *memcg) oomKills(t *testing.T) int64 {
	t.Helper()
	return cg.entry(t, "events", "oom_kill")
}
