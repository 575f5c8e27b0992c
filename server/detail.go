package server

import (
	"bytes"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
)

// prefixDelimiter is memcached's default stat_key_prefix: "user:42" counts under prefix "user".
const prefixDelimiter = ':'

// maxPrefixes bounds `stats detail` bookkeeping; keys with new prefixes beyond it are not counted, so a
// client inventing prefixes cannot grow the server without limit.
const maxPrefixes = 4096

// prefixStats is `stats detail`: per key-prefix counts of gets, hits, sets and deletes, recorded only
// while detail is on (off by default, as in memcached, so the hot path pays one atomic load).
type prefixStats struct {
	on       atomic.Bool
	mu       sync.Mutex
	prefixes map[string]*prefixCounts
}

type prefixCounts struct{ get, hit, set, del uint64 }

type prefixOp uint8

const (
	prefixGet prefixOp = iota
	prefixSet
	prefixDel
)

// record counts op (and a hit for a get) for key's prefix when detail is on. It is small enough to be
// inlined into every get and set, where detail is nearly always off: as a call it cost about 25
// instructions a key (callgrind, 10-key gets).
func (p *prefixStats) record(key []byte, op prefixOp, hit bool) {
	if p.on.Load() {
		p.count(key, op, hit)
	}
}

// count is record's work when detail is on.
func (p *prefixStats) count(key []byte, op prefixOp, hit bool) {
	i := bytes.IndexByte(key, prefixDelimiter)
	if i < 0 {
		return // memcached counts only keys that have a prefix
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.prefixes == nil {
		p.prefixes = make(map[string]*prefixCounts)
	}
	c := p.prefixes[string(key[:i])]
	if c == nil {
		if len(p.prefixes) >= maxPrefixes {
			return
		}
		c = &prefixCounts{}
		p.prefixes[string(key[:i])] = c
	}
	switch op {
	case prefixGet:
		c.get++
		if hit {
			c.hit++
		}
	case prefixSet:
		c.set++
	case prefixDel:
		c.del++
	}
}

// appendDump writes memcached's "PREFIX <p> get <n> hit <n> set <n> del <n>" lines.
func (p *prefixStats) appendDump(dst []byte) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	names := make([]string, 0, len(p.prefixes))
	for name := range p.prefixes {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		c := p.prefixes[name]
		dst = append(dst, "PREFIX "...)
		dst = append(dst, name...)
		dst = append(dst, " get "...)
		dst = strconv.AppendUint(dst, c.get, 10)
		dst = append(dst, " hit "...)
		dst = strconv.AppendUint(dst, c.hit, 10)
		dst = append(dst, " set "...)
		dst = strconv.AppendUint(dst, c.set, 10)
		dst = append(dst, " del "...)
		dst = strconv.AppendUint(dst, c.del, 10)
		dst = append(dst, "\r\n"...)
	}
	return dst
}

func (p *prefixStats) reset() {
	p.mu.Lock()
	p.prefixes = nil
	p.mu.Unlock()
}
