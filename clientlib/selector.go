package clientlib

import (
	"hash/crc32"

	"github.com/leasecached/leasecached/clientlib/ketama"
)

// ring is an immutable snapshot of the live servers and the rule that maps a key to one of them. The
// client swaps in a new one when a server is ejected or comes back; lookups never lock.
type ring struct {
	live   []*server
	ketama *ketama.Ring // nil under Modulo
}

func newRing(d Distribution, all []*server) *ring {
	r := &ring{}
	for _, s := range all {
		if !s.dead.Load() {
			r.live = append(r.live, s)
		}
	}
	if d == Ketama {
		nodes := make([]ketama.Node, len(r.live))
		for i, s := range r.live {
			nodes[i] = s.node
		}
		r.ketama = ketama.New(nodes)
	}
	return r
}

func (r *ring) pick(key string) (*server, error) {
	switch len(r.live) {
	case 0:
		return nil, ErrNoServers
	case 1:
		return r.live[0], nil
	}
	if r.ketama != nil {
		return r.live[r.ketama.Get(key)], nil
	}
	return r.live[moduloIndex(key, len(r.live))], nil
}

// ieeeTable drives crc32String.
var ieeeTable = crc32.MakeTable(crc32.IEEE)

// moduloIndex is gomemcache's ServerList.PickServer rule: crc32 (IEEE) of the key modulo the number
// of servers.
func moduloIndex(key string, n int) int {
	return int(crc32String(key) % uint32(n))
}

// crc32String is crc32.ChecksumIEEE over a string without copying it to a []byte (which would
// allocate: the library's dispatch through a function value makes its argument escape). Keys are
// short, so the byte-at-a-time table loop costs little.
func crc32String(s string) uint32 {
	crc := ^uint32(0)
	for i := 0; i < len(s); i++ {
		crc = ieeeTable[byte(crc)^s[i]] ^ (crc >> 8)
	}
	return ^crc
}
