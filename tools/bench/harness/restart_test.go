package harness

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseMemStatus(t *testing.T) {
	full := "Name:\tx\nVmPeak:\t  9 kB\nVmRSS:\t  300 kB\nRssAnon:\t  100 kB\nRssFile:\t  150 kB\nRssShmem:\t  50 kB\nThreads:\t3\n"
	cases := []struct {
		name    string
		in      string
		want    memStatus
		wantErr string
	}{
		{"all four", full, memStatus{VmRSS: 300 << 10, RssAnon: 100 << 10, RssFile: 150 << 10, RssShmem: 50 << 10}, ""},
		{"one missing", strings.Replace(full, "RssShmem:\t  50 kB\n", "", 1), memStatus{}, "3 of the lines"},
		{"not kB", strings.Replace(full, "150 kB", "150 MB", 1), memStatus{}, "bad line"},
		{"not a number", strings.Replace(full, "100 kB", "x kB", 1), memStatus{}, "bad line"},
	}
	for _, tc := range cases {
		got, err := parseMemStatus([]byte(tc.in))
		if tc.wantErr != "" {
			assert.ErrorContains(t, err, tc.wantErr, tc.name)
			continue
		}
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.want, got, tc.name)
	}
	// The kernel's own lines: the three parts add up to VmRSS.
	m, err := readMemStatus(os.Getpid())
	require.NoError(t, err)
	assert.Equal(t, m.VmRSS, m.RssAnon+m.RssFile+m.RssShmem)
}

func TestParseRestartSizes(t *testing.T) {
	cases := []struct {
		in   string
		want []restartSize
		ok   bool
	}{
		{"1000000:1024,10000000:2048", []restartSize{{1000000, 1024}, {10000000, 2048}}, true},
		{" 5:1", []restartSize{{5, 1}}, true},
		{"1000000", nil, false},
		{"0:64", nil, false},
		{"10:0", nil, false},
		{"10:x", nil, false},
		{"1:1,", nil, false},
	}
	for _, tc := range cases {
		got, err := parseRestartSizes(tc.in)
		if !tc.ok {
			assert.Error(t, err, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, got, tc.in)
	}
}

func TestItemsLabelAndMarkdownTable(t *testing.T) {
	for n, want := range map[uint64]string{1000000: "1M", 10000000: "10M", 20000: "20k", 1500: "1500", 7: "7"} {
		assert.Equal(t, want, itemsLabel(n))
	}
	var b bytes.Buffer
	markdownTable(&b, []string{"server", "a", "b"}, [][]string{{"x", "1", "2"}})
	assert.Equal(t, "| server | a | b |\n|---|---:|---:|\n| x | 1 | 2 |\n", b.String())
}

// The memcached half of make bench-restart, small: a warm restart after SIGUSR1 serves every item (it
// needs the wait into the next second: memcached refuses a restart in its stop's second), and after
// kill -9 it comes back empty.
func TestRestartMemcached(t *testing.T) {
	bin, err := exec.LookPath("memcached")
	if err != nil {
		t.Skip("memcached not installed (make test-deps installs it)")
	}
	o := restartOptions{memcached: bin, servers: map[string]bool{"memcached": true}, threads: 1, connLimit: 64,
		sizes: []restartSize{{Items: 20000, MemMB: 64}}, verify: 2000, shmDir: t.TempDir(),
		startTimeout: 20 * time.Second, maxTime: time.Minute}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := &restartRun{o: o, logDir: t.TempDir()}
	require.NoError(t, r.memcached(ctx, o.sizes[0]))
	require.Len(t, r.rows, 2)
	warm, cold := r.rows[0], r.rows[1]
	assert.Equal(t, howSIGUSR1, warm.How)
	assert.Equal(t, uint64(20000), warm.CurrItems, "the warm restart serves every item")
	assert.Equal(t, [3]uint64{2000, 0, 0}, [3]uint64{warm.Present, warm.Missing, warm.Corrupt})
	assert.Positive(t, warm.StopSeconds)
	assert.Equal(t, howKillAfter, cold.How)
	assert.Zero(t, cold.CurrItems, "after kill -9 memcached is cold")
	assert.Equal(t, [3]uint64{0, 2000, 0}, [3]uint64{cold.Present, cold.Missing, cold.Corrupt})
	require.Len(t, r.rss, 2)
	assert.Equal(t, []string{"memcached", "memcached -e"}, []string{r.rss[0].Server, r.rss[1].Server})
	var out bytes.Buffer
	printRestart(&out, o, r.rows, r.rss)
	assert.Contains(t, out.String(), "| memcached -e | 20k | 64 | SIGUSR1 | ")
	assert.Contains(t, out.String(), " | 20000 | 2000/0/0 |\n")
	entries, err := os.ReadDir(o.shmDir)
	require.NoError(t, err)
	assert.Empty(t, entries, "the -e file and its .meta are removed")
}

// The leasecached half, small: every row recovers every item, and no value read back is wrong. It builds
// the daemon (too long for -short).
func TestRestartLeasecached(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the daemon")
	}
	// Built in the root module (this one does not require the daemon's dependencies).
	bin := filepath.Join(t.TempDir(), "leasecached")
	build := exec.Command("go", "build", "-o", bin, "./cmd/leasecached")
	build.Dir = filepath.Join("..", "..", "..")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	o := restartOptions{leasecached: bin, servers: map[string]bool{"leasecached": true},
		threads: 1, connLimit: 64, sizes: []restartSize{{Items: 20000, MemMB: 64}}, verify: 2000,
		midLoad: 300 * time.Millisecond, dataParent: t.TempDir(), startTimeout: 20 * time.Second, maxTime: time.Minute}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := &restartRun{o: o, logDir: t.TempDir()}
	require.NoError(t, r.leasecached(ctx, o.sizes[0], ""))
	require.Len(t, r.rows, 3)
	for i, how := range []string{howSIGTERM, howKillFill, howKillSets} {
		row := r.rows[i]
		assert.Equal(t, "leasecached --data-dir --data-live off", row.Server)
		assert.Equal(t, how, row.How)
		assert.Zero(t, row.Corrupt, how)
		assert.Equal(t, uint64(2000), row.Present, how)
		require.NotNil(t, row.ItemsLoaded, how)
		assert.Equal(t, uint64(20000), *row.ItemsLoaded, how)
		assert.Equal(t, uint64(20000), row.CurrItems, how)
		assert.LessOrEqual(t, row.ServeSeconds, row.LoadedSeconds, how)
	}
	require.Len(t, r.rss, 2)
	assert.Greater(t, r.rss[1].Mem.RssFile, r.rss[0].Mem.RssFile, "the data directory's mapping is file pages")
	entries, err := os.ReadDir(o.dataParent)
	require.NoError(t, err)
	assert.Empty(t, entries, "the data directories are removed")

	// With a live copy: the same rows, and one after the live copy is gone.
	var st syscall.Statfs_t
	if syscall.Statfs("/dev/shm", &st) != nil || st.Type != 0x01021994 {
		t.Skip("no tmpfs at /dev/shm for --data-live")
	}
	liveParent, err := os.MkdirTemp("/dev/shm", "lc-bench-test-")
	require.NoError(t, err)
	defer os.RemoveAll(liveParent)
	r = &restartRun{o: o, logDir: t.TempDir()}
	require.NoError(t, r.leasecached(ctx, o.sizes[0], liveParent))
	require.Len(t, r.rows, 4)
	for i, how := range []string{howSIGTERM, howKillFill, howKillSets, howReboot} {
		row := r.rows[i]
		assert.Equal(t, "leasecached --data-dir --data-live", row.Server)
		assert.Equal(t, how, row.How)
		assert.Zero(t, row.Corrupt, how)
		assert.Equal(t, uint64(2000), row.Present, how)
		assert.Equal(t, uint64(20000), row.CurrItems, how)
	}
	entries, err = os.ReadDir(liveParent)
	require.NoError(t, err)
	assert.Empty(t, entries, "the live roots are removed")
}
