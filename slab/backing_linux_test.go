//go:build linux

package slab

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/leasecached/leasecached/internal/tmpfstest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// pmdMappedKiB is how much of the mapping holding addr is mapped by huge pages (FilePmdMapped, or
// ShmemPmdMapped on tmpfs), from /proc/self/smaps.
func pmdMappedKiB(t *testing.T, addr uintptr) int {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	require.NoError(t, err)
	defer f.Close()
	in, kib := false, 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if lo, hi, ok := strings.Cut(fields[0], "-"); ok && !strings.HasSuffix(fields[0], ":") {
			a, err1 := strconv.ParseUint(lo, 16, 64)
			b, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 == nil && err2 == nil {
				in = uint64(addr) >= a && uint64(addr) < b
				continue
			}
		}
		if in && (fields[0] == "FilePmdMapped:" || fields[0] == "ShmemPmdMapped:") {
			n, _ := strconv.Atoi(fields[1])
			kib += n
		}
	}
	return kib
}

// kernelMapsHugeFilePages reports whether this kernel and the filesystem of dir map a file's huge pages
// into a shared writable mapping that asks for them (Linux 6.x with large folios on ext4, tmpfs mounted
// with huge=): a file grown to two huge pages, mapped, advised, written.
func kernelMapsHugeFilePages(t *testing.T, dir string) bool {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, "probe"), os.O_RDWR|os.O_CREATE, 0o600)
	require.NoError(t, err)
	defer f.Close()
	const n = 2 * hugePageSize
	require.NoError(t, f.Truncate(n))
	m, err := unix.Mmap(int(f.Fd()), 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	require.NoError(t, err)
	defer unix.Munmap(m)
	if unix.Madvise(m, unix.MADV_HUGEPAGE) != nil {
		return false
	}
	for i := 0; i < n; i += 4096 {
		m[i] = 1
	}
	return pmdMappedKiB(t, uintptr(unsafe.Pointer(&m[0]))) > 0
}

// TestBackingHugePages checks that with huge (-L) the items file ends up on huge pages where the
// kernel can map them for a file, and that without it they stay on ordinary pages.
func TestBackingHugePages(t *testing.T) {
	if !kernelMapsHugeFilePages(t, t.TempDir()) {
		t.Skip("this kernel maps no huge pages of a file on this filesystem")
	}
	for _, huge := range []bool{false, true} {
		t.Run(map[bool]string{false: "ordinary pages", true: "huge pages"}[huge], func(t *testing.T) {
			b, _, err := OpenBacking(t.TempDir(), Identity{Shards: 1, Classes: DefaultClasses()}, BackingOptions{Huge: huge})
			require.NoError(t, err)
			defer b.Close()
			const pages = 6 // three huge pages of items
			for id := range uint32(pages) {
				mem, err := b.page(id, true)
				require.NoError(t, err)
				for i := 0; i < len(mem); i += 4096 {
					mem[i] = 1
				}
			}
			items := pmdMappedKiB(t, uintptr(unsafe.Pointer(&b.itemsMem[0])))
			if !huge {
				require.Zero(t, items, "huge pages without -L")
				return
			}
			// Some, not necessarily all: a huge page can be refused for want of free memory in one piece,
			// and the kernel then uses ordinary pages. Without whole huge pages in the file there are none.
			require.Positive(t, items, "items on huge pages (KiB)")
		})
	}
}

// TestNextAddr checks the prefetch hint against the chunk the next Alloc really uses.
func TestNextAddr(t *testing.T) {
	c := DefaultClasses()
	plain, err := NewArena(4 * PageSize)
	require.NoError(t, err)
	pal := NewAllocator(plain, c, 0)
	r, ok := pal.Alloc(3)
	require.True(t, ok)
	pal.Free(r)
	require.Zero(t, pal.NextAddr(3), "no data directory: no hint")

	b, _, err := OpenBacking(t.TempDir(), Identity{Shards: 1, Classes: c}, BackingOptions{})
	require.NoError(t, err)
	defer b.Close()
	a, err := NewBackedArena(8*PageSize, b)
	require.NoError(t, err)
	al := NewAllocator(a, c, 0)
	for _, id := range []int{0, 3, c.Largest()} {
		require.Zero(t, al.NextAddr(id), "class %d: empty free list", id)
		var refs []Ref
		for range 5 {
			r, ok := al.Alloc(id)
			require.True(t, ok)
			refs = append(refs, r)
		}
		for _, r := range refs[1:4] {
			al.Free(r)
		}
		for range 3 {
			chunk := al.NextAddr(id)
			r, ok := al.Alloc(id)
			require.True(t, ok)
			require.Equal(t, uintptr(unsafe.Pointer(unsafe.SliceData(al.Chunk(r)))), chunk, "class %d chunk", id)
		}
	}
}

// TestBackingFullFileSystem: every block of the meta file that is written through its mapping is
// reserved first, as a page's are, so a full file system refuses a start or a page instead of killing
// the process with SIGBUS: the header at open, a page's record when the page is taken.
func TestBackingFullFileSystem(t *testing.T) {
	id := Identity{Shards: 1, Classes: DefaultClasses()}
	t.Run("header", func(t *testing.T) {
		root := tmpfstest.Small(t, "1m")
		fillFS(t, root)
		var err error
		require.False(t, faults(func() {
			var b *Backing
			if b, _, err = OpenBacking(filepath.Join(root, "dir"), id, BackingOptions{}); err == nil {
				b.Close()
			}
		}), "opening a data directory on a full file system faulted")
		require.ErrorIs(t, err, unix.ENOSPC)
	})
	// Page 512's record is the first of the meta file's third block, a hole so far.
	const page = 512
	for _, tc := range []struct {
		name  string
		room  int64 // bytes the full file system is given back before the page is taken
		check func(t *testing.T, b *Backing)
	}{
		{"no room for the record", 0, func(t *testing.T, b *Backing) {
			// The files do not reach the page: no start reads its record, a hole that would fault on a
			// full tmpfs even to be read.
			assert.LessOrEqual(t, b.itemsSize, int64(page)*PageSize)
		}},
		{"room for the record only", 4096, func(t *testing.T, b *Backing) {
			// The files grow past the page, and the next start discards it (FinishAdopt: its record
			// cleared) on a file system that may still be full.
			require.False(t, faults(func() { b.discard(page) }), "discarding a page never recorded faulted")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := tmpfstest.Small(t, "4m")
			b, _, err := OpenBacking(filepath.Join(root, "dir"), id, BackingOptions{})
			require.NoError(t, err)
			defer b.Close()
			fillFS(t, root)
			if tc.room > 0 {
				filler := filepath.Join(root, "filler")
				st, err := os.Stat(filler)
				require.NoError(t, err)
				require.NoError(t, os.Truncate(filler, st.Size()-tc.room))
			}
			require.False(t, faults(func() {
				if _, err = b.page(page, true); err == nil {
					b.setRecord(page, encodeRecord(0, 0))
				}
			}), "taking and recording a page on a full file system faulted")
			require.ErrorIs(t, err, unix.ENOSPC)
			tc.check(t, b)
		})
	}
}

// TestBackingFullDisk: on each file system whose reservations the server counts on, a store into a page
// it took, or into a page's record, never faults once the file system is full, even where the kernel has
// written the blocks back since (a copy-on-write file system would need new space for the rewrite:
// btrfs holds up only because items is made nocow). items is DIR's own, mapped as with --data-live off;
// meta is written with pwrite.
func TestBackingFullDisk(t *testing.T) {
	for _, tc := range []struct {
		fs  string
		mib int // the image's size: mkfs.xfs takes no less than 300 MiB
	}{{"ext4", 64}, {"xfs", 300}, {"btrfs", 128}} {
		t.Run(tc.fs, func(t *testing.T) {
			mnt := smallImage(t, tc.fs, tc.mib)
			if tc.fs == "btrfs" {
				// Files a build before noCow made: copy-on-write, and too late to change.
				old := filepath.Join(mnt, "old")
				require.NoError(t, os.Mkdir(old, 0o700))
				for _, name := range []string{"meta", "items"} {
					require.NoError(t, os.WriteFile(filepath.Join(old, name), []byte("stored"), 0o600))
				}
				assert.Contains(t, UnkeptReservations(old, ""), "not nocow")
			}
			dir := filepath.Join(mnt, "dir")
			b, _, err := OpenBacking(dir, Identity{Shards: 1, Classes: DefaultClasses()}, BackingOptions{})
			require.NoError(t, err)
			defer b.Close()
			if tc.fs == "btrfs" {
				assert.True(t, isNoCow(filepath.Join(dir, "meta")), "meta is nocow")
				assert.True(t, isNoCow(filepath.Join(dir, "items")), "items is nocow")
				if !kernelAtLeast(6, 17) {
					assert.Contains(t, UnkeptReservations(dir, ""), "before 6.17")
					t.Skip("btrfs faults a store into a nocow file's page on a full disk before Linux 6.17 (the start warns)")
				}
			}
			assert.Empty(t, UnkeptReservations(dir, ""), "the directory's files keep their reservations")
			const pages = 8
			takePages(t, b, pages)
			require.NoError(t, b.Sync()) // written back: a copy-on-write block now needs new space to change
			fillFS(t, mnt)
			require.False(t, faults(func() {
				for id := range uint32(pages) {
					mem, err := b.page(id, false)
					require.NoError(t, err)
					fill(mem, byte(id+100))
					b.setRecord(id, encodeRecord(1, 0))
				}
				b.SetCasHigh(1 << 40)
			}), "a store into a reserved block of a full %s faulted", tc.fs)
			require.Len(t, b.Records(), pages)
			require.NoError(t, b.Sync(), "a write into a reserved block of meta needs no room")
		})
	}
}

// TestLiveCopyFullCowDisk: with a live copy nothing of the data directory is mapped, so a full
// copy-on-write file system under it, which needs new space for every rewrite of a block (btrfs files
// that are not nocow: an older build's, or copied in), cannot stop the server with SIGBUS. A change to
// meta the file system refuses is reported by the next sync, and written again by the first one once
// there is room; the live copy's own items file, on a root that is not a tmpfs, is made nocow.
func TestLiveCopyFullCowDisk(t *testing.T) {
	mnt := smallImage(t, "btrfs", 128)
	id := Identity{Shards: 1, Classes: DefaultClasses()}
	made := t.TempDir()
	b, _, err := OpenBacking(made, id, BackingOptions{})
	require.NoError(t, err)
	require.NoError(t, b.Close())
	hdr, err := os.ReadFile(filepath.Join(made, "meta"))
	require.NoError(t, err)
	dir := filepath.Join(mnt, "dir")
	require.NoError(t, os.Mkdir(dir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "meta"), hdr[:headerBytes], 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "items"), nil, 0o600))

	root := tmpfstest.Small(t, "64m")
	b, reason, err := OpenBacking(dir, id, BackingOptions{Live: root})
	require.NoError(t, err)
	require.Empty(t, reason, "the copied directory's data is used")
	loadLive(t, b)
	require.False(t, isNoCow(filepath.Join(dir, "meta")), "meta stays copy-on-write")
	assert.NotContains(t, mappedPaths(t), filepath.Join(dir, "meta"))
	assert.Contains(t, UnkeptReservations(dir, ""), "not nocow", "mapped without a live copy")
	assert.Empty(t, UnkeptReservations(dir, root), "the live copy is on tmpfs: nothing of dir is mapped")

	const pages = 8
	takePages(t, b, pages)
	require.NoError(t, b.Sync())
	fillFS(t, mnt)
	var syncErr error
	rounds := 0
	require.False(t, faults(func() {
		for ; rounds < 1024; rounds++ { // until btrfs runs out of what it keeps for itself too
			for id := range uint32(pages) {
				b.setRecord(id, encodeRecord(uint8(1+rounds%2), 0))
			}
			b.SetCasHigh(1<<40 + uint64(rounds))
			if syncErr = b.SyncHeader(); syncErr != nil {
				break
			}
		}
	}), "a change to meta on a full copy-on-write file system faulted")
	removeFiller := func() {
		require.NoError(t, os.Remove(filepath.Join(mnt, "filler")))
		syncFS(t, mnt) // btrfs gives a removed file's space back at a commit
	}
	if syncErr == nil {
		// Linux 6.1's btrfs (Debian 12, make vm-tests) takes every rewrite: no failure to recover from.
		t.Logf("btrfs took %d rewrites of meta on a full file system without refusing one", rounds)
		removeFiller()
	} else {
		require.ErrorIs(t, syncErr, unix.ENOSPC, "the full file system refused meta's changes")
		classes := func() (got []int) {
			for _, r := range b.Records() {
				got = append(got, r.Class)
			}
			return got
		}
		want := classes()
		cas := b.CasHigh()

		removeFiller()
		for range 20 { // the space may take more than one commit to come back
			if syncErr = b.Sync(); syncErr == nil {
				break
			}
			syncFS(t, mnt)
		}
		require.NoError(t, syncErr, "with room again, a sync writes meta again")
		require.NoError(t, b.Close())
		b, reason, err = OpenBacking(dir, id, BackingOptions{Live: root})
		require.NoError(t, err)
		require.Empty(t, reason)
		assert.Equal(t, want, classes(), "the records meta holds after the failure")
		assert.Equal(t, cas, b.CasHigh())
	}

	// A live root that is not a tmpfs (here btrfs itself) gets a nocow live file.
	require.NoError(t, b.Close())
	onDisk := filepath.Join(mnt, "live")
	b, _, err = OpenBacking(dir, id, BackingOptions{Live: onDisk})
	require.NoError(t, err)
	loadLive(t, b)
	live, err := liveDirFor(onDisk, dir)
	require.NoError(t, err)
	assert.True(t, isNoCow(filepath.Join(live, "items")), "the live items file on btrfs is nocow")
	if kernelAtLeast(6, 17) {
		assert.Empty(t, UnkeptReservations(dir, onDisk), "the live items file on btrfs is nocow")
	} else {
		assert.Contains(t, UnkeptReservations(dir, onDisk), "before 6.17")
	}
	require.NoError(t, b.Close())
}

// TestUnkeptReservationsOverlay: a data directory in an overlayfs (a container's root) is judged by the
// upper layer's file system, which holds its files; the mount points have spaces, which mountinfo escapes.
func TestUnkeptReservationsOverlay(t *testing.T) {
	mnt := smallImage(t, "btrfs", 128)
	layers := filepath.Join(mnt, "layers of it")
	for _, d := range []string{"lower", "upper", "work"} {
		require.NoError(t, os.MkdirAll(filepath.Join(layers, d), 0o700))
	}
	ovl := filepath.Join(t.TempDir(), "the root")
	require.NoError(t, os.Mkdir(ovl, 0o700))
	opts := fmt.Sprintf("lowerdir=%s/lower,upperdir=%s/upper,workdir=%s/work", layers, layers, layers)
	if err := unix.Mount("overlay", ovl, "overlay", 0, opts); err != nil {
		t.Skipf("mounting an overlayfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(ovl, unix.MNT_DETACH) })
	require.Equal(t, filepath.Join(layers, "upper"), overlayUpper(filepath.Join(ovl, "dir")))

	old := filepath.Join(ovl, "old") // an older build's files: copy-on-write
	require.NoError(t, os.Mkdir(old, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(old, "items"), []byte("stored"), 0o600))
	assert.Equal(t, "overlayfs over btrfs, and its items file is not nocow (made by an older leasecached, or the flag was refused)",
		UnkeptReservations(old, ""))

	dir := filepath.Join(ovl, "dir")
	b, _, err := OpenBacking(dir, Identity{Shards: 1, Classes: DefaultClasses()}, BackingOptions{})
	require.NoError(t, err)
	defer b.Close()
	require.True(t, isNoCow(filepath.Join(layers, "upper", "dir", "items")), "nocow reaches the upper layer's file")
	if kernelAtLeast(6, 17) {
		assert.Empty(t, UnkeptReservations(dir, ""))
	} else {
		assert.Contains(t, UnkeptReservations(dir, ""), "overlayfs over btrfs, on a kernel before 6.17")
	}
	assert.Empty(t, overlayUpper(mnt), "btrfs itself is no overlayfs")
}

// takePages takes pages 0..n-1 of b, fills each with its id+1 and records it in class 0.
func takePages(t *testing.T, b *Backing, n uint32) {
	t.Helper()
	for id := range n {
		mem, err := b.page(id, true)
		require.NoError(t, err)
		fill(mem, byte(id+1))
		b.setRecord(id, encodeRecord(0, 0))
	}
}

// TestOverlayUpperStacked: of two mounts on one mount point, the last one, on top, is the one seen.
func TestOverlayUpperStacked(t *testing.T) {
	base := t.TempDir()
	layers := filepath.Join(base, "layers")
	for _, d := range []string{"lower", "upper", "work"} {
		require.NoError(t, os.MkdirAll(filepath.Join(layers, d), 0o700))
	}
	mp := filepath.Join(base, "mp")
	require.NoError(t, os.Mkdir(mp, 0o700))
	if err := unix.Mount("tmpfs", mp, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("mounting a tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(mp, unix.MNT_DETACH) })
	opts := fmt.Sprintf("lowerdir=%s/lower,upperdir=%s/upper,workdir=%s/work", layers, layers, layers)
	if err := unix.Mount("overlay", mp, "overlay", 0, opts); err != nil {
		t.Skipf("mounting an overlayfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(mp, unix.MNT_DETACH) })
	require.Equal(t, filepath.Join(layers, "upper"), overlayUpper(filepath.Join(mp, "dir")))
}

// syncFS commits the file system at dir.
func syncFS(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Open(dir)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, unix.Syncfs(int(f.Fd())))
}

// mappedPaths lists the files this process maps.
func mappedPaths(t *testing.T) []string {
	t.Helper()
	maps, err := os.ReadFile("/proc/self/maps")
	require.NoError(t, err)
	var out []string
	for _, line := range strings.Split(string(maps), "\n") {
		if f := strings.Fields(line); len(f) >= 6 {
			out = append(out, f[5])
		}
	}
	return out
}

// smallImage mounts a new mib MiB image of file system fs and returns where; unmounted at cleanup. It
// skips where the test cannot: it needs root, loop devices, mkfs.<fs> (make test-deps installs it), mount
// and the kernel's fs.
func smallImage(t *testing.T, fs string, mib int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting an image needs root")
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		t.Skipf("no loop devices: %v", err)
	}
	mkfs, err := exec.LookPath("mkfs." + fs)
	if err != nil {
		t.Skipf("mkfs.%s: %v", fs, err)
	}
	for _, tool := range []string{"mount", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s: %v", tool, err)
		}
	}
	img := filepath.Join(t.TempDir(), "img")
	f, err := os.Create(img)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(int64(mib)<<20))
	require.NoError(t, f.Close())
	force := "-f"
	if fs == "ext4" {
		force = "-F"
	}
	out, err := exec.Command(mkfs, "-q", force, img).CombinedOutput()
	require.NoError(t, err, "mkfs.%s: %s", fs, out)
	mnt := t.TempDir()
	out, err = exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput()
	if err != nil && (strings.Contains(string(out), "unknown filesystem type") || strings.Contains(string(out), "ermission denied")) {
		t.Skipf("mounting a %s image: %s", fs, out) // a kernel without it, or a root without mounts
	}
	require.NoError(t, err, "mount: %s", out)
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Logf("umount %s: %v: %s; detaching it lazily", mnt, err, out)
			_ = exec.Command("umount", "-l", mnt).Run()
		}
	})
	return mnt
}

// UnkeptReservations names the file systems where a reserved block may still need space when a store
// writes it again, and nothing else; TempDir (ext4 or tmpfs here) is not one.
func TestUnkeptReservations(t *testing.T) {
	for _, tc := range []struct {
		magic uint32
		want  string
	}{
		{unix.BTRFS_SUPER_MAGIC, "btrfs"},
		{unix.BCACHEFS_SUPER_MAGIC, "bcachefs"},
		{0x2fc12fc1, "zfs"},
		{unix.EXT4_SUPER_MAGIC, ""},
		{unix.TMPFS_MAGIC, ""},
		{unix.XFS_SUPER_MAGIC, ""},
	} {
		assert.Equal(t, tc.want, unkeptOn(tc.magic), "magic %#x", tc.magic)
	}
	assert.Empty(t, UnkeptReservations(t.TempDir(), ""))
	assert.Empty(t, UnkeptReservations("/no/such/path", ""))
	for in, want := range map[string]string{`/a\040b`: "/a b", `/tab\011x\134`: "/tab\tx\\", `/plain`: "/plain", `/cut\04`: `/cut\04`} {
		assert.Equal(t, want, unescapeMount(in), in)
	}
	assert.True(t, kernelAtLeast(2, 6))
	assert.False(t, kernelAtLeast(99, 0))
}

// TestBackingOlderFormat: a directory of format 4, which kept the seals in a sums file of their own,
// starts empty, saying why, and the sums file is removed (nothing would read or free it again), in the
// directory and in its live copy.
func TestBackingOlderFormat(t *testing.T) {
	id := Identity{Shards: 1, Classes: DefaultClasses()}
	for _, live := range []bool{false, true} {
		t.Run(map[bool]string{false: "mapped", true: "live copy"}[live], func(t *testing.T) {
			dir := t.TempDir()
			opt := BackingOptions{}
			if live {
				opt.Live = liveRoot(t)
			}
			b, _, err := OpenBacking(dir, id, opt)
			require.NoError(t, err)
			require.NoError(t, b.Close())
			meta := filepath.Join(dir, "meta")
			f, err := os.OpenFile(meta, os.O_RDWR, 0)
			require.NoError(t, err)
			hdr := make([]byte, headerBytes)
			_, err = f.ReadAt(hdr, 0)
			require.NoError(t, err)
			binary.LittleEndian.PutUint32(hdr[hdrVersion:], 4)
			binary.LittleEndian.PutUint64(hdr[hdrIdentitySum:], identitySum(hdr))
			_, err = f.WriteAt(hdr, 0)
			require.NoError(t, err)
			require.NoError(t, f.Close())
			sums := []string{filepath.Join(dir, oldSums)}
			if live {
				d, err := liveDirFor(opt.Live, dir)
				require.NoError(t, err)
				sums = append(sums, filepath.Join(d, oldSums))
			}
			for _, p := range sums {
				require.NoError(t, os.WriteFile(p, make([]byte, 8192), 0o600))
			}

			b, reason, err := OpenBacking(dir, id, opt)
			require.NoError(t, err)
			defer b.Close()
			assert.Equal(t, fmt.Sprintf("stored format version 4, this build reads %d", backingVersion), reason)
			for _, p := range sums {
				assert.NoFileExists(t, p)
			}
		})
	}
}

// TestOverlayUpperBeneath: a mount placed beneath an overlayfs (MOVE_MOUNT_BENEATH, Linux 6.5) is listed
// after it, though the overlayfs stays on top: the mount holding a directory is told by its device.
func TestOverlayUpperBeneath(t *testing.T) {
	base := t.TempDir()
	layers := filepath.Join(base, "layers")
	for _, d := range []string{"lower", "upper", "work"} {
		require.NoError(t, os.MkdirAll(filepath.Join(layers, d), 0o700))
	}
	mp, side := filepath.Join(base, "mp"), filepath.Join(base, "side")
	require.NoError(t, os.Mkdir(mp, 0o700))
	require.NoError(t, os.Mkdir(side, 0o700))
	opts := fmt.Sprintf("lowerdir=%s/lower,upperdir=%s/upper,workdir=%s/work", layers, layers, layers)
	if err := unix.Mount("overlay", mp, "overlay", 0, opts); err != nil {
		t.Skipf("mounting an overlayfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(mp, unix.MNT_DETACH) })
	require.NoError(t, unix.Mount("tmpfs", side, "tmpfs", 0, "size=1m"))
	t.Cleanup(func() { _ = unix.Unmount(side, unix.MNT_DETACH) })
	require.NoError(t, unix.Mount("", side, "", unix.MS_PRIVATE, ""))
	require.NoError(t, unix.Mount("", mp, "", unix.MS_PRIVATE, ""))
	fd, err := unix.OpenTree(unix.AT_FDCWD, side, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	require.NoError(t, err)
	defer unix.Close(fd)
	const moveMountBeneath = 0x200 // linux/mount.h; not in x/sys/unix
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, mp, unix.MOVE_MOUNT_F_EMPTY_PATH|moveMountBeneath); err != nil {
		t.Skipf("mounting beneath: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(mp, unix.MNT_DETACH) }) // the one beneath, once the overlayfs is gone
	dir := filepath.Join(mp, "dir")
	require.NoError(t, os.Mkdir(dir, 0o700))
	require.DirExists(t, filepath.Join(layers, "upper", "dir"), "the overlayfs is on top")
	require.Equal(t, filepath.Join(layers, "upper"), overlayUpper(dir))
}

// A page parked while a sync runs waits for the next one: that sync's fsync may have begun before the
// move's copies were written (ParkDrained takes the number of the last Sync begun). And a directory on
// tmpfs parks nothing: a reboot keeps nothing there to protect.
func TestParkedPageWaitsForTheNextSync(t *testing.T) {
	dir := t.TempDir()
	if OnTmpfs(dir) {
		t.Skip("the test's directory is on tmpfs, where pages do not park")
	}
	c := DefaultClasses()
	b, _, err := OpenBacking(dir, Identity{Shards: 1, Classes: c}, BackingOptions{Syncs: true})
	require.NoError(t, err)
	defer b.Close()
	b.Adopted()
	a, err := NewBackedArena(8*PageSize, b)
	require.NoError(t, err)
	al := NewAllocator(a, c, 0)
	require.True(t, al.Parks())
	r, ok := al.Alloc(3)
	require.True(t, ok)
	al.arena.chunkAt(r, StateOffset+1)[StateOffset] = 1 // in use
	park := func() {
		require.NoError(t, al.BeginDrain(r.Page()))
		al.Free(r)
		require.NoError(t, al.ParkDrained())
	}

	n := b.syncsBegun.Add(1) // a Sync has begun, its fsync under way
	park()
	b.setMeta(hdrSyncs, n) // that Sync finishes
	require.Zero(t, al.ReleaseParked(b.SyncsDone()), "released by a sync that began before it was parked")
	require.Equal(t, 1, b.Parked())
	require.NoError(t, b.Sync())
	require.Equal(t, 1, al.ReleaseParked(b.SyncsDone()))
	require.Zero(t, b.Parked())
	require.Equal(t, 0, al.OwnedPages())

	shm, err := os.MkdirTemp("/dev/shm", "lc-park-")
	if err != nil || !OnTmpfs(shm) {
		t.Skip("no tmpfs at /dev/shm")
	}
	defer os.RemoveAll(shm)
	bt, _, err := OpenBacking(shm, Identity{Shards: 1, Classes: c}, BackingOptions{Syncs: true})
	require.NoError(t, err)
	defer bt.Close()
	require.False(t, bt.Parks(), "a data directory on tmpfs")
}
