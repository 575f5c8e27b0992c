package near

import (
	"sync"
	"time"

	"github.com/leasecached/leasecached/clientlib"
)

// store holds the near copies. A read that may fill a copy first reserves the key with a token
// (a pending entry); any invalidation of the key, or a flush of its server, removes the reservation,
// and the read's answer is then not copied. That is what keeps a value read before a write from
// being installed after the write's watch line was handled.
type store struct {
	mu         sync.Mutex
	entries    map[string]*entry
	bytes      int
	maxEntries int
	maxBytes   int
	nextToken  uint64
}

type entry struct {
	token   uint64
	item    *clientlib.Item // nil while pending
	byFill  bool            // made by GetOrFill, and served only to it (see get)
	server  string
	expires time.Time
	size    int
}

func newStore(maxEntries, maxBytes int) *store {
	return &store{entries: make(map[string]*entry), maxEntries: maxEntries, maxBytes: maxBytes}
}

// get returns key's copy when it is installed, unexpired at now, and made by the same call (byFill:
// GetOrFill, else Get): a GetOrFill value has no CAS for Get to return, and a Get item is raw, where
// GetOrFill reads some (a cached "not found") as an answer of its own.
func (s *store) get(key string, now time.Time, byFill bool) (*clientlib.Item, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entries[key]
	if e == nil || e.item == nil || e.byFill != byFill {
		return nil, false
	}
	if !now.Before(e.expires) {
		s.removeLocked(key, e)
		return nil, false
	}
	return e.item, true
}

// reserve marks key as being read from server and returns the token install needs; 0 when another
// read has it reserved already (that read fills it) or the key is copied.
func (s *store) reserve(key, server string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.entries[key]; ok {
		return 0
	}
	s.nextToken++
	e := &entry{token: s.nextToken, server: server, size: len(key)}
	s.entries[key] = e
	s.bytes += e.size
	s.evictLocked()
	return e.token
}

// install copies it under its key if the reservation token still stands; otherwise (invalidated,
// flushed or evicted meanwhile) it does nothing. A value too large for one sixteenth of the byte
// bound is not copied. byFill says GetOrFill made it (see get).
func (s *store) install(token uint64, it *clientlib.Item, expires time.Time, byFill bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entries[it.Key]
	if e == nil || e.token != token || e.item != nil {
		return false
	}
	size := len(it.Key) + len(it.Value)
	if size > s.maxBytes/16 {
		s.removeLocked(it.Key, e)
		return false
	}
	s.bytes += size - e.size
	e.size, e.item, e.expires, e.byFill = size, it, expires, byFill
	s.evictLocked()
	return s.entries[it.Key] == e
}

// release drops key's reservation token (a miss or an error: nothing to copy).
func (s *store) release(key string, token uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.entries[key]; e != nil && e.token == token {
		s.removeLocked(key, e)
	}
}

// invalidate drops key's copy or reservation; it reports whether there was one.
func (s *store) invalidate(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entries[key]
	if e != nil {
		s.removeLocked(key, e)
	}
	return e != nil
}

// flush drops every copy and reservation of server ("" for all); it returns how many.
func (s *store) flush(server string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, e := range s.entries {
		if server == "" || e.server == server {
			s.removeLocked(k, e)
			n++
		}
	}
	return n
}

// retain drops every copy and reservation for which keep(key, server) is false; it returns how many.
func (s *store) retain(keep func(key, server string) bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, e := range s.entries {
		if !keep(k, e.server) {
			s.removeLocked(k, e)
			n++
		}
	}
	return n
}

// len returns the number of entries and their bytes (reservations included).
func (s *store) len() (int, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries), s.bytes
}

func (s *store) removeLocked(key string, e *entry) {
	delete(s.entries, key)
	s.bytes -= e.size
}

// evictLocked removes entries in map order (effectively random) until both bounds hold. Copies live
// a second or so, so an LRU's bookkeeping would buy little over this.
func (s *store) evictLocked() {
	for k, e := range s.entries {
		if len(s.entries) <= s.maxEntries && s.bytes <= s.maxBytes {
			return
		}
		s.removeLocked(k, e)
	}
}
