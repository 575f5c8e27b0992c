package shard

import (
	"runtime/debug"
	"testing"

	"golang.org/x/sys/unix"
)

// A read of an item already fetched, active and visited writes nothing, even seconds later: the header is
// on a read-only page, and any store to it, even of the value already there, faults.
func TestBumpOfBumpedItemWritesNothing(t *testing.T) {
	const now = 1_700_000_000
	page, err := unix.Mmap(-1, 0, unix.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(page)
	b := page[:headerMax]
	b[offState] = kindHead
	bump(b, now)
	bump(b, now) // fetched, visited, active, time now
	if err := unix.Mprotect(page, unix.PROT_READ); err != nil {
		t.Fatal(err)
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("bump of an up-to-date item wrote to it: %v", r)
		}
	}()
	bump(b, now+5)
}
