//go:build !linux

package slab

// mapBytes falls back to the Go heap where anonymous mappings are not used.
func mapBytes(n int, _ bool) ([]byte, error) { return make([]byte, n), nil }

// unmapBytes leaves the memory to the garbage collector.
func unmapBytes([]byte) {}
