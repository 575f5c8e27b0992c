//go:build linux

package integration

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// Reads write nothing to the data directory (doc/design/restart-costs.md): a read of an item already
// read twice leaves its header alone, so a read-only load dirties no page of --data-dir's files and the
// next sync writes nothing back. Before, every read in a new second moved the item's time, and a sync
// rewrote (and write-protected) every page the load had read.
//
// The test cleans the files' pages itself (an fdatasync of each file writes the daemon's shared mappings
// back and write-protects them; --data-sync 0 keeps the daemon from doing it at other moments) and counts
// their dirty pages in the daemon's /proc/PID/smaps.
func TestDataDirReadsDirtyNoPage(t *testing.T) {
	requireLeasecached(t)
	dir := t.TempDir()
	var fs unix.Statfs_t
	require.NoError(t, unix.Statfs(dir, &fs))
	if fs.Type == unix.TMPFS_MAGIC {
		t.Skip("on tmpfs nothing is written back, so no page is ever clean")
	}
	const keys = 2000
	d := startLeasecached(t, onDirArgs(dir, "--data-sync", "0", "-m", "64")...)
	c := mustDialRS(t, d)
	names := make([]string, keys)
	val := []byte(strings.Repeat("v", 100))
	for i := range names {
		names[i] = fmt.Sprintf("page-%05d", i)
		c.queueStore("set", names[i], 0, 0, val)
	}
	require.NoError(t, c.flush())
	for range names {
		l, err := c.line()
		require.NoError(t, err)
		require.Equal(t, "STORED", l)
	}
	readAll := func(why string) {
		got, err := c.getItems("get", names)
		require.NoError(t, err, why)
		require.Len(t, got, keys, why)
		for _, k := range names[:100] { // the meta path bumps too (meta_get.go)
			l, err := c.call("mg " + k + " s\r\n")
			require.NoError(t, err, why)
			require.Equal(t, "HD s100", l, why)
		}
		got, err = c.getItems("lease-get", names[100:200]) // and a lease-get hit (lease.go)
		require.NoError(t, err, why)
		require.Len(t, got, 100, why)
	}
	readAll("first read")
	readAll("second read") // every item fetched and active now; the CLOCK bits set

	pid := d.cmd.Process.Pid
	cleanFiles(t, dir, dataFiles(t, dir))
	require.Zero(t, dirtyKB(t, pid, dir), "an fdatasync of each file left pages of %s dirty", dir)

	// A new second: a read that moves the item's time to now would write it.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 50*time.Millisecond)))
	for round := range 3 {
		readAll(fmt.Sprintf("read %d after the sync", round+1))
	}
	require.Zero(t, dirtyKB(t, pid, dir), "reads dirtied pages of %s", dir)

	// The count sees writes: a few sets dirty pages again.
	for _, k := range names[:10] {
		l, err := c.store("set", k, 0, 0, val)
		require.NoError(t, err)
		require.Equal(t, "STORED", l)
	}
	require.NotZero(t, dirtyKB(t, pid, dir), "sets dirtied no page of %s: the count does not see writes", dir)
}

// cleanFiles writes the dirty pages of dir's files back (which also write-protects them in the mappings).
func cleanFiles(t *testing.T, dir string, names []string) {
	t.Helper()
	for _, name := range names {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDWR, 0)
		require.NoError(t, err)
		err = unix.Fdatasync(int(f.Fd()))
		f.Close()
		require.NoError(t, err, "fdatasync %s", name)
	}
}

// dirtyKB sums the dirty kB of process pid's mappings of files under dir (/proc/PID/smaps).
func dirtyKB(t *testing.T, pid int, dir string) int {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	require.NoError(t, err)
	defer f.Close()
	sum, in, mappings := 0, false, 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":"):
			// A mapping's first line: range, perms, offset, device, inode, and the path if any.
			in = len(fields) >= 6 && strings.HasPrefix(fields[5], dir+"/")
			if in {
				mappings++
			}
		case in && (fields[0] == "Shared_Dirty:" || fields[0] == "Private_Dirty:"):
			n, err := strconv.Atoi(fields[1])
			require.NoError(t, err)
			sum += n
		}
	}
	require.NoError(t, sc.Err())
	require.NotZero(t, mappings, "daemon %d maps no file of %s", pid, dir)
	return sum
}
