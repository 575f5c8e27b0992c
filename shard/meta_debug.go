package shard

import (
	"github.com/leasecached/leasecached/slab"

	"github.com/leasecached/leasecached/protocol"
)

// MetaDebugInfo is me's line, in memcached's terms ("ME <key> exp=.. la=.. cas=.. fetch=.. cls=..
// size=..").
type MetaDebugInfo struct {
	// Exp is memcached's exp=: now minus the exptime (so negative while the item lives), -1 without
	// an exptime.
	Exp        int64
	LastAccess uint32 // la=: seconds since the last access
	Cas        uint64
	Fetched    bool
	// Class and Size are what memcached would report for this item: its default slab class and
	// ITEM_ntotal. Our own slab layout differs; clients comparing servers should see memcached's.
	Class     int
	Size      int
	KeyBinary bool // the key was stored with b: me shows it in base64
}

// MetaDebug is me: the item's metadata without touching it, false on a miss.
func (s *Store) MetaDebug(key []byte) (MetaDebugInfo, bool) {
	if !validKey(key) {
		return MetaDebugInfo{}, false
	}
	sh, h, now := s.lockKey(key)
	defer sh.mu.Unlock()
	ref, b := sh.find(h, key, now)
	if ref == slab.NilRef {
		sh.countMissCause()
		return MetaDebugInfo{}, false
	}
	info := MetaDebugInfo{
		Exp:        NoTTL,
		LastAccess: s.rel(now) - s.rel(int64(itemTime(b))),
		Cas:        itemCas(b),
		Fetched:    b[offState]&flagFetched != 0,
		KeyBinary:  itemMeta(b)&metaKeyBinary != 0,
	}
	if exp := itemExp(b); exp != 0 {
		info.Exp = int64(int32(s.rel(now) - s.rel(int64(exp))))
	}
	info.Size = protocol.ItemSize(itemKlen(b), itemVlen(b), itemFlags(b))
	info.Class = mcClassOf(info.Size)
	return info, true
}
