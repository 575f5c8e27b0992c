//go:build !linux

package slab

// mapBytes falls back to the Go heap where anonymous mappings are not used.
func mapBytes(n int) ([]byte, error) { return make([]byte, n), nil }

// mapTable is mapBytes: there are no huge pages to ask for here.
func mapTable(n int) ([]byte, error) { return mapBytes(n) }

// unmapBytes leaves the memory to the garbage collector.
func unmapBytes([]byte) {}

// discardBytes keeps the memory: the garbage collector takes it once nothing refers to it.
func discardBytes([]byte) {}

// hugePageSize is the region mapHugeRegion returns.
const hugePageSize = 2 << 20

// mapHugeRegion has no huge pages to ask for here: it is ordinary memory of the same size.
func mapHugeRegion(bool) ([]byte, error) { return mapBytes(hugePageSize) }

// collapseRegion has no huge pages to ask for.
func collapseRegion([]byte, bool) error { return errCollapseUnsupported }
