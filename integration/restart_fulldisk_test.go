package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Bounds of TestDataDirFullDisk: a 128 MiB btrfs (about its smallest) under an -m twice as large, filled
// with more than the -m's worth of 4 KiB values.
const (
	fullDiskMiB    = 128
	fullDiskMem    = "256"
	fullDiskKeys   = 80_000
	fullDiskValue  = 4096
	fullDiskSample = 2000 // the last keys stored, read back after the fill
	// fullDiskWait bounds the wait for a sync (every second) to find the disk full.
	fullDiskWait = 15 * time.Second
)

// TestDataDirFullDisk: a server with the default live copy whose data directory's file system fills up
// goes on serving, and starts again on the directory. On btrfs, before the files were made nocow, it died
// with SIGBUS: meta is mapped in DIR with a live copy too, and a rewrite of a block the kernel has written
// back needs new space on a copy-on-write file system (doc/design/restart-costs.md, "File systems"). Every set
// is answered STORED, the syncs that find no room fail (data_sync_failures) instead, the last values
// stored read back exact, a SIGTERM stops it cleanly, and the restart, from the live copy, serves every
// item it had and only values that were stored. With DIR's files mapped (--data-live off) the same fill
// takes minutes here, paced by the disk: TestBackingFullDisk (slab) checks that mode's stores.
func TestDataDirFullDisk(t *testing.T) {
	requireRestart(t)
	requireLoopMount(t)
	if _, err := exec.LookPath("mkfs.btrfs"); err != nil {
		t.Skipf("mkfs.btrfs: %v (make test-deps installs btrfs-progs)", err)
	}
	img := filepath.Join(t.TempDir(), "btrfs.img")
	require.NoError(t, os.WriteFile(img, nil, 0o600))
	require.NoError(t, os.Truncate(img, fullDiskMiB<<20))
	mustRun(t, "mkfs.btrfs", "-q", "-f", img)
	mnt := mountImage(t, img)
	dir := filepath.Join(mnt, "dir")
	args := append([]string{"-m", fullDiskMem, "--data-sync", "1s"}, liveArgs(t)...)

	d := startOnDirPlain(t, dir, args...)
	waitLoaded(t, d)
	if strings.Contains(d.out.Tail(4000), "before 6.17") {
		t.Skip("btrfs faults a store into a nocow file's page on a full disk before Linux 6.17 (the start warns)")
	}
	c := mustDialRS(t, d)
	keys := make([]string, fullDiskKeys)
	for i := range keys {
		keys[i] = "full" + strconv.Itoa(i)
	}
	for i := 0; i < len(keys); i += 64 {
		batch := keys[i:min(i+64, len(keys))]
		for _, k := range batch {
			c.queueStore("set", k, 0, 0, fullDiskVal(k))
		}
		require.NoError(t, c.flush())
		for _, k := range batch {
			l, err := c.line()
			require.NoError(t, err, "set %s: the server died? output:\n%s", k, d.out.Tail(2000))
			require.Equal(t, "STORED", l, "set %s", k)
		}
	}
	var (
		stats map[string]string
		err   error
	)
	deadline := time.Now().Add(fullDiskWait)
	for {
		stats, err = c.stats()
		require.NoError(t, err)
		if stats["data_sync_failures"] != "0" || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.NotEqual(t, "0", stats["data_sync_failures"], "no sync ran out of room: the disk never filled up")
	t.Logf("after the fill: curr_items %s, evictions %s, data_syncs %s, data_sync_failures %s",
		stats["curr_items"], stats["evictions"], stats["data_syncs"], stats["data_sync_failures"])

	recent := keys[len(keys)-fullDiskSample:]
	got, err := c.getItems("get", recent)
	require.NoError(t, err)
	for _, k := range recent {
		if g, ok := got[k]; ok {
			require.Equal(t, fullDiskVal(k), g.val, "%s", k)
		}
	}
	assert.Greater(t, len(got), fullDiskSample*9/10, "the last values stored are mostly there")
	stopDaemon(t, d, stopTerm) // its last sync fails too: logged, and the stop is still clean

	d = startOnDirPlain(t, dir, args...)
	waitLoaded(t, d)
	c = mustDialRS(t, d)
	got, err = c.getItems("get", keys)
	require.NoError(t, err)
	for k, g := range got {
		require.Equal(t, fullDiskVal(k), g.val, "%s after the restart", k)
	}
	assert.Equal(t, stats["curr_items"], strconv.Itoa(len(got)), "every item back from the live copy")
	stopDaemon(t, d, stopTerm)
}

// fullDiskVal is key k's value: its name, repeated.
func fullDiskVal(k string) []byte {
	return []byte(strings.Repeat(k+".", fullDiskValue/(len(k)+1)+1)[:fullDiskValue])
}
