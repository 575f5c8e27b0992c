//go:build amd64 || arm64

package shard

// prefetch asks the CPU to start loading the cache line at addr. It is a hint: it never faults, even
// on an address that is not mapped, and it returns before the line arrives.
func prefetch(addr uintptr)

// prefetchItemSpan is prefetch of every 64-byte cache line that [addr, addr+192) touches, in one call (a loop
// of prefetch calls cost as many instructions as a get's whole index probe). 192 bytes hold the largest item
// header (27 bytes), a 14-byte key and a 100-byte value with its "\r\n".
func prefetchItemSpan(addr uintptr)
