//go:build !amd64 && !arm64

package shard

// prefetch is a no-op where we have no prefetch instruction wired up; lookups then take their cache
// misses one at a time, as they would without Store.Prefetch.
func prefetch(addr uintptr) {}

// prefetchItemSpan is a no-op, like prefetch.
func prefetchItemSpan(addr uintptr) {}
