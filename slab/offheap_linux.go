//go:build linux

package slab

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Mappings are made and removed by address (unix.MmapPtr, unix.MunmapPtr), not with syscall.Mmap, whose
// bookkeeping only unmaps a slice it returned whole: a huge-page region is mapped oversized and trimmed,
// and its pages are unmapped one at a time.

// mapBytes maps n zeroed bytes of anonymous memory (small hash tables, and the mappings mapAligned trims).
// The kernel backs them lazily, so a page that is never written costs no resident memory.
func mapBytes(n int) ([]byte, error) {
	p, err := unix.MmapPtr(-1, 0, nil, uintptr(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(p), n), nil
}

// hugePageSize is the size of a transparent huge page on x86-64 and (with 4 KiB base pages) arm64.
const hugePageSize = 2 << 20

// mapHugeRegion maps hugePageSize zeroed bytes aligned to hugePageSize. With huge it is advised to be
// backed by a huge page from its first touch; without, advised not to be, so that only what is written
// becomes resident, until collapseRegion. Without transparent huge page support the advice fails, and the
// region is ordinary memory.
func mapHugeRegion(huge bool) ([]byte, error) {
	r, err := mapAligned(hugePageSize)
	if err != nil {
		return nil, err
	}
	advice := unix.MADV_NOHUGEPAGE
	if huge {
		advice = unix.MADV_HUGEPAGE
	}
	_ = unix.Madvise(r, advice) // advice only: without it the pages are ordinary ones
	return r, nil
}

// mapTable maps n zeroed bytes for a hash table (Words). A table of at least hugePageSize starts on a
// huge-page boundary and is advised to be backed by huge pages: a lookup lands anywhere in it, and on
// ordinary pages a table of millions of slots costs a TLB miss, and under a VM a nested page walk, on
// nearly every probe. Only the whole huge pages inside the mapping can be huge; its tail stays in ordinary
// pages, so a table costs no memory beyond its own, and a smaller table is an ordinary mapping. A table is
// written all over once it is built, so a huge page from the first touch makes nothing resident that would
// not be anyway. 5M items in 16 shards (tables of 2.7 MiB, 2 MiB of each on a huge page), 90/10 at
// pipeline 16, six interleaved pairs: the prefetch of index lines 63-101 against 122-190 ns a request,
// server user time 699 against 771 ns a request (medians).
func mapTable(n int) ([]byte, error) {
	if n < hugePageSize {
		return mapBytes(n)
	}
	r, err := mapAligned(n)
	if err != nil {
		return nil, err
	}
	_ = unix.Madvise(r, unix.MADV_HUGEPAGE) // advice only: without it the pages are ordinary ones
	return r[:n:n], nil
}

// mapAligned maps n zeroed bytes, rounded up to whole base pages, starting on a hugePageSize boundary.
func mapAligned(n int) ([]byte, error) {
	return mapAnonAligned(n, unix.PROT_READ|unix.PROT_WRITE, 0)
}

// mapAnonAligned maps n bytes of anonymous memory with prot and the extra flags, rounded up to whole base
// pages, starting on a hugePageSize boundary. It maps hugePageSize more and unmaps the misaligned ends: the
// kernel aligns an anonymous mapping only to the base page.
func mapAnonAligned(n, prot, flags int) ([]byte, error) {
	p, err := unix.MmapPtr(-1, 0, nil, uintptr(n+hugePageSize), prot, unix.MAP_PRIVATE|unix.MAP_ANON|flags)
	if err != nil {
		return nil, err
	}
	b := unsafe.Slice((*byte)(p), n+hugePageSize)
	lead := int((hugePageSize - uintptr(p)%hugePageSize) % hugePageSize)
	if lead > 0 {
		unmapBytes(b[:lead:lead])
	}
	pg := unix.Getpagesize()
	end := lead + (n+pg-1)/pg*pg
	if tail := b[end:]; len(tail) > 0 {
		unmapBytes(tail)
	}
	return b[lead:end:end], nil
}

// collapseRegion asks the kernel to back a region (of mapHugeRegion(false), or two pages of a live copy on
// tmpfs), all of it resident, with one huge page now (MADV_COLLAPSE, Linux 6.1 and later), then, unless
// huge says the memory is advised onto huge pages anyway, advises it back against them: a region the advice
// covers would get a huge page, and a compaction stall, at its next fault, and the advice splits the
// mapping, which the second call lets the kernel merge again. The contents do not change.
// errCollapseUnsupported means the kernel cannot do it at all.
func collapseRegion(r []byte, huge bool) error {
	if err := unix.Madvise(r, unix.MADV_HUGEPAGE); err != nil {
		return errCollapseUnsupported
	}
	err := unix.Madvise(r, unix.MADV_COLLAPSE)
	if !huge {
		_ = unix.Madvise(r, unix.MADV_NOHUGEPAGE)
	}
	switch err {
	case unix.EINVAL, unix.EPERM, unix.ENOSYS:
		return errCollapseUnsupported // a kernel before 6.1, huge pages disabled, or madvise filtered
	}
	return err // EAGAIN or ENOMEM: no huge page to be had now
}

// unmapBytes gives memory from mapBytes or mapHugeRegion (all of it, or any page-aligned part) back to
// the kernel at once.
func unmapBytes(b []byte) {
	// munmap takes any page-aligned range, in use or not: check what syscall.Munmap used to.
	if uintptr(unsafe.Pointer(unsafe.SliceData(b)))%uintptr(unix.Getpagesize()) != 0 || len(b) != cap(b) {
		panic("slab: unmapping a slice that is not whole pages of a mapping") // a programming error
	}
	if err := unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(b)), uintptr(len(b))); err != nil {
		panic("slab: unmapping memory: " + err.Error()) // only a bad slice can cause this: a programming error
	}
}

// discardBytes gives the memory of b (from mapBytes) back to the kernel while keeping it mapped: the next
// access finds zeroed pages.
func discardBytes(b []byte) {
	if err := unix.Madvise(b, unix.MADV_DONTNEED); err != nil {
		panic("slab: discarding memory: " + err.Error()) // only a bad slice can cause this: a programming error
	}
}
