//go:build !callgrind

package slab

// mapLimit caps each of a data directory's file mappings; a normal build maps them whole
// (mapcap_callgrind.go says why a build may not).
const mapLimit = 1<<63 - 1
