//go:build amd64 || arm64

package shard

// prefetch asks the CPU to start loading the cache line at addr. It is a hint: it never faults, even
// on an address that is not mapped, and it returns before the line arrives.
func prefetch(addr uintptr)
