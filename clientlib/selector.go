package clientlib

import (
	"hash/crc32"

	"github.com/leasecached/leasecached/clientlib/internal/placement"
	"github.com/leasecached/leasecached/clientlib/ketama"
)

// ring is an immutable snapshot of the live servers and the rule that maps a key to one of them. The
// client swaps in a new one when a server is ejected or comes back; lookups never lock.
type ring struct {
	live   []*server
	ketama *ketama.Ring // nil under Modulo
}

func newRing(d Distribution, all []*server) *ring {
	return buildRing(d, all, false)
}

// newPlacement is the ring over every server of the list, ejected or not: where keys belong whatever
// this process's view of their health (internal/placement; subpackages only).
func newPlacement(d Distribution, all []*server) *ring {
	return buildRing(d, all, true)
}

func buildRing(d Distribution, all []*server, withDead bool) *ring {
	r := &ring{}
	for _, s := range all {
		if withDead || !s.dead.Load() {
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

// Addr and Servers make a ring a placement.Ring. A placement ring is never empty: New and SetServers
// refuse an empty list.
func (r *ring) Addr(key string) string {
	s, err := r.pick(key)
	if err != nil {
		return ""
	}
	return s.addr
}

func (r *ring) Servers() int { return len(r.live) }

func init() {
	placement.Of = func(c any) placement.Ring { return c.(*Client).placed.Load() }
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
