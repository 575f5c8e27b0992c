//go:build !amd64

package slab

import "sync/atomic"

// StoreSeal stores a seal (shard/persist.go) after every store before it: a release store, since other
// processors may make plain stores visible out of order. p must be 4-byte aligned.
func StoreSeal(p *uint32, v uint32) { atomic.StoreUint32(p, v) }
