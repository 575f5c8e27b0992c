//go:build linux

package integration

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// A block device that records every write that reaches it: device-mapper's log-writes target (the
// kernel's Documentation/admin-guide/device-mapper/log-writes.rst). It passes each write to the data
// device and appends it to the log device once a flush covers it (a FUA write at once), so the log is the
// order in which writes became durable, flushes and marks included. Replaying a prefix of it onto a
// zeroed device gives what a disk held at that moment; replaying everything up to a flush and then any
// subset of the writes after it gives what a disk that lost its volatile write cache may hold.

// The log's format (drivers/md/dm-log-writes.c): sector 0 holds the super; from sector 1 on, each entry
// is a sector with its header (and a mark's text), followed by its data sectors unless it is a discard.
// Sectors are the data device's logical block size.
const (
	lwMagic       = 0x6a736677736872
	lwVersion     = 1
	lwFlagFlush   = 1 << 0
	lwFlagFUA     = 1 << 1
	lwFlagDiscard = 1 << 2
	lwFlagMark    = 1 << 3
	lwEntryBytes  = 32 // sector, nr_sectors, flags, data_len: little-endian uint64s
)

// lwEntry is one logged write, flush, discard or mark.
type lwEntry struct {
	sector, sectors uint64 // where on the data device, in sectors
	flags           uint64
	mark            string // a mark's text
	dataOff         int64  // where its data starts in the log
}

// barrier says the entry orders the writes around it: a disk keeps every write logged before a flush,
// and a FUA write is durable once it completes (the file system issues what depends on it after that).
func (e lwEntry) barrier() bool { return e.flags&(lwFlagFlush|lwFlagFUA) != 0 }

// writes says the entry changes the data device.
func (e lwEntry) writes() bool { return e.flags&lwFlagMark == 0 && e.sectors > 0 }

// logWrites is a log-writes device over two loop devices, each backed by a sparse file.
type logWrites struct {
	name       string // the device-mapper name: /dev/mapper/<name>
	data, log  string // the files behind the data and log devices
	size       int64  // the data device's bytes
	loops      []string
	sectorSize int64
}

// requireLogWrites skips where the kernel has no device-mapper or no log-writes target (CI's kernel has
// neither; Debian's has both: `make vm-tests` runs the tests that need it there).
func requireLogWrites(t *testing.T) {
	t.Helper()
	requireLoopMount(t)
	if _, err := exec.LookPath("dmsetup"); err != nil {
		t.Skipf("dmsetup: %v", err)
	}
	_ = exec.Command("modprobe", "dm-log-writes").Run() // the kernel loads it on first use too, where it can
	out, err := exec.Command("dmsetup", "targets").CombinedOutput()
	if err != nil {
		first, _, _ := strings.Cut(string(out), "\n")
		t.Skipf("no device-mapper in this kernel (make vm-tests runs this test on Debian's): dmsetup targets: %v: %s",
			err, first)
	}
	if !strings.Contains(string(out), "log-writes") {
		t.Skipf("this kernel has no log-writes target (make vm-tests runs this test on Debian's): %s", out)
	}
}

// newLogWrites makes a log-writes device of size bytes in dir, logging to a sparse file of logSize bytes;
// it is removed at cleanup unless closed before.
func newLogWrites(t *testing.T, dir string, size, logSize int64) *logWrites {
	t.Helper()
	lw := &logWrites{name: fmt.Sprintf("lc-logwrites-%d", os.Getpid()), data: filepath.Join(dir, "data.img"),
		log: filepath.Join(dir, "log.img"), size: size}
	for _, f := range []struct {
		path string
		size int64
	}{{lw.data, size}, {lw.log, logSize}} {
		require.NoError(t, os.WriteFile(f.path, nil, 0o600))
		require.NoError(t, os.Truncate(f.path, f.size))
		out, err := exec.Command("losetup", "--find", "--show", f.path).CombinedOutput()
		require.NoError(t, err, "losetup %s: %s", f.path, out)
		lw.loops = append(lw.loops, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { lw.close(t) })
	table := fmt.Sprintf("0 %d log-writes %s %s", size/512, lw.loops[0], lw.loops[1])
	mustRun(t, "dmsetup", "create", lw.name, "--table", table)
	return lw
}

// dev is the device to make a file system on.
func (lw *logWrites) dev() string { return "/dev/mapper/" + lw.name }

// mark appends a mark to the log: every write that was durable when it was sent is before it.
func (lw *logWrites) mark(t *testing.T, text string) {
	t.Helper()
	mustRun(t, "dmsetup", "message", lw.name, "0", "mark", text)
}

// flush makes every write to the device so far durable (an fsync of the device: a flush).
func (lw *logWrites) flush(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(lw.dev(), os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.Sync(), "fsync %s", lw.dev())
}

// close removes the device (which logs the writes no flush covered yet) and detaches the loop devices;
// the files stay.
func (lw *logWrites) close(t *testing.T) {
	t.Helper()
	if lw.loops == nil {
		return
	}
	if out, err := exec.Command("dmsetup", "remove", "--retry", lw.name).CombinedOutput(); err != nil {
		t.Logf("dmsetup remove %s: %v: %s", lw.name, err, out)
	}
	for _, l := range lw.loops {
		if out, err := exec.Command("losetup", "-d", l).CombinedOutput(); err != nil {
			t.Logf("losetup -d %s: %v: %s", l, err, out)
		}
	}
	lw.loops = nil
}

// entries reads the log (after close).
func (lw *logWrites) entries(t *testing.T) []lwEntry {
	t.Helper()
	f, err := os.Open(lw.log)
	require.NoError(t, err)
	defer f.Close()
	super := make([]byte, 28)
	_, err = io.ReadFull(f, super)
	require.NoError(t, err)
	le := binary.LittleEndian
	require.Equal(t, uint64(lwMagic), le.Uint64(super), "the log's magic")
	require.Equal(t, uint64(lwVersion), le.Uint64(super[8:]), "the log's version")
	n := le.Uint64(super[16:])
	lw.sectorSize = int64(le.Uint32(super[24:]))
	require.True(t, lw.sectorSize >= 512 && lw.sectorSize&(lw.sectorSize-1) == 0, "sector size %d", lw.sectorSize)
	out := make([]lwEntry, 0, n)
	off := lw.sectorSize
	head := make([]byte, lw.sectorSize)
	for range n {
		_, err := f.ReadAt(head, off)
		require.NoError(t, err, "entry %d at byte %d of the log", len(out), off)
		e := lwEntry{sector: le.Uint64(head), sectors: le.Uint64(head[8:]), flags: le.Uint64(head[16:]),
			dataOff: off + lw.sectorSize}
		if e.flags&lwFlagMark != 0 {
			l := le.Uint64(head[24:])
			require.LessOrEqual(t, l, uint64(lw.sectorSize-lwEntryBytes), "mark length")
			e.mark = string(head[lwEntryBytes : lwEntryBytes+l])
		}
		off = e.dataOff
		if e.flags&(lwFlagDiscard|lwFlagMark) == 0 {
			off += int64(e.sectors) * lw.sectorSize
		}
		require.LessOrEqual(t, int64(e.sector+e.sectors)*lw.sectorSize, lw.size, "entry %d past the device", len(out))
		out = append(out, e)
	}
	return out
}

// apply does entry e to the image img: writes its data, or zeroes what it discards (a discarded range
// may read back as anything; zeros are what this disk would show).
func (lw *logWrites) apply(t *testing.T, img *os.File, log *os.File, e lwEntry, buf *[]byte) {
	t.Helper()
	if !e.writes() {
		return
	}
	at, n := int64(e.sector)*lw.sectorSize, int64(e.sectors)*lw.sectorSize
	if e.flags&lwFlagDiscard != 0 {
		err := unix.Fallocate(int(img.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, at, n)
		require.NoError(t, err, "punching the discard of %d bytes at %d", n, at)
		return
	}
	if int64(cap(*buf)) < n {
		*buf = make([]byte, n)
	}
	b := (*buf)[:n]
	_, err := log.ReadAt(b, e.dataOff)
	require.NoError(t, err, "reading %d bytes of the log at %d", n, e.dataOff)
	_, err = img.WriteAt(b, at)
	require.NoError(t, err)
}

// replayer applies a log to an image, in order, up to an entry.
type replayer struct {
	lw       *logWrites
	img, log *os.File
	next     int // the first entry not applied
	ents     []lwEntry
	buf      []byte
}

// newReplayer makes image path (zeros, the data device's size) to replay lw's log onto.
func newReplayer(t *testing.T, lw *logWrites, ents []lwEntry, path string) *replayer {
	t.Helper()
	img, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	require.NoError(t, err)
	require.NoError(t, img.Truncate(lw.size))
	log, err := os.Open(lw.log)
	require.NoError(t, err)
	t.Cleanup(func() { img.Close(); log.Close() })
	return &replayer{lw: lw, img: img, log: log, ents: ents}
}

// upTo applies the entries before end.
func (r *replayer) upTo(t *testing.T, end int) {
	t.Helper()
	require.LessOrEqual(t, r.next, end, "a replay goes forward only")
	for ; r.next < end; r.next++ {
		r.lw.apply(t, r.img, r.log, r.ents[r.next], &r.buf)
	}
}

// copyWith copies the image to path and applies the entries extra (indexes into the log) to the copy.
func (r *replayer) copyWith(t *testing.T, path string, extra []int) {
	t.Helper()
	mustRun(t, "cp", "--sparse=always", r.img.Name(), path)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	for _, i := range extra {
		r.lw.apply(t, f, r.log, r.ents[i], &r.buf)
	}
}

// requireSameFile fails unless files a and b hold the same bytes (the whole log replayed against the data
// device: the replay is right).
func requireSameFile(t *testing.T, a, b string) {
	t.Helper()
	fa, err := os.Open(a)
	require.NoError(t, err)
	defer fa.Close()
	fb, err := os.Open(b)
	require.NoError(t, err)
	defer fb.Close()
	ba, bb := make([]byte, 1<<20), make([]byte, 1<<20)
	for off := int64(0); ; off += int64(len(ba)) {
		na, ea := io.ReadFull(fa, ba)
		nb, eb := io.ReadFull(fb, bb)
		require.Equal(t, na, nb, "%s and %s differ in length", a, b)
		if !bytes.Equal(ba[:na], bb[:nb]) {
			i := 0
			for ba[i] == bb[i] {
				i++
			}
			require.Failf(t, "replay differs", "%s and %s differ at byte %d", a, b, off+int64(i))
		}
		if ea != nil || eb != nil {
			return
		}
	}
}

// lwSummary counts a log's entries by kind, for the test's log.
func lwSummary(ents []lwEntry) string {
	var writes, flushes, fuas, discards, marks int
	var sectors uint64
	for _, e := range ents {
		switch {
		case e.flags&lwFlagMark != 0:
			marks++
		case e.flags&lwFlagDiscard != 0:
			discards++
		case e.sectors > 0:
			writes++
			sectors += e.sectors
		}
		if e.flags&lwFlagFlush != 0 {
			flushes++
		}
		if e.flags&lwFlagFUA != 0 {
			fuas++
		}
	}
	return fmt.Sprintf("%d entries: %d writes (%d sectors), %d flushes, %d FUA, %d discards, %d marks",
		len(ents), writes, sectors, flushes, fuas, discards, marks)
}
