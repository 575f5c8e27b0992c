//go:build linux

package slab

import "syscall"

// mapBytes maps n zeroed bytes of anonymous memory. The kernel backs them lazily, so a page that is
// never written costs no resident memory. Without hugeOK transparent huge pages are refused: a slab
// page is carved lazily, and a 2 MiB huge page behind a half-carved 1 MiB slab page would be resident
// memory holding nothing.
func mapBytes(n int, hugeOK bool) ([]byte, error) {
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, err
	}
	if !hugeOK {
		_ = syscall.Madvise(b, syscall.MADV_NOHUGEPAGE) // advice only: failure costs memory, not correctness
	}
	return b, nil
}

// unmapBytes gives memory from mapBytes back to the kernel at once.
func unmapBytes(b []byte) {
	if err := syscall.Munmap(b); err != nil {
		panic("slab: unmapping memory: " + err.Error()) // only a bad slice can cause this: a programming error
	}
}
