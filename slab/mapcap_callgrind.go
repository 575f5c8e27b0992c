//go:build callgrind

package slab

// mapLimit caps each of a data directory's file mappings in a build for callgrind (bench/instr.sh), which
// cannot map the 1 TiB the items file's mapping reserves: such a build serves up to -m 8192 with a data
// directory, and is for measuring only.
const mapLimit = 8 << 30
