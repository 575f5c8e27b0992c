// Package shard is leasecached's storage engine: a sharded hash index over
// items kept in slab chunks, with memcached 1.6 item semantics (set, add,
// replace, append, prepend, cas, incr/decr, touch, gat, delete, flush_all,
// lazy expiry) under a hard memory limit.
//
// Contract:
//   - Keys hash (xxhash) to one of N shards. Each shard has its own mutex,
//     hash table and size classes drawing pages lazily from one global page
//     budget (up to a 1/N share each, recomputed when cache_memlimit changes
//     the limit: memlimit.go), so every operation, eviction included, runs
//     under exactly one lock.
//   - The limit is hard: a shard's slab pages and its hash tables together
//     stay within its share of -m (memlimit.go); the lease tables have their
//     own 1/64 of it. Only the Go runtime and connection buffers come on top,
//     a fixed 10 MiB or so: after 20M 100-byte values into -m 1024 RSS is
//     0.982x the limit (memcached 1.036x; 1.187x when the index lived outside
//     the limit), 1.047x at -m 128 with 2.5M values.
//   - Item memory and the index are mapped memory holding no Go pointers
//     (slab's offheap.go): the GC has nothing per item to trace, a cycle
//     costs the same with 100k or 10M items (BenchmarkGCWithItems), and the
//     storage benchmark's fills run without a single GC cycle.
//   - Per item: a 16-27 byte header (item.go says why each field is there),
//     the chunk's rounding (8-byte classes below 256 bytes: slab.FineUpTo)
//     and 8.9-11.1 bytes of index (robin hood at 0.9: index.go). Measured:
//     32.1 bytes over key+value per item where memcached 1.6.18 spends 87.8
//     (1M items, 14-byte keys, 100-byte values, RSS growth; it was 66.8).
//   - Reads copy the value into the caller's buffer under the lock; the
//     caller owns the result. So a store over a live item whose new item
//     needs the same size class rewrites the item's chunk (overwrite,
//     mutate.go) instead of taking a cold one. Steady-state operations
//     allocate nothing.
//   - When memory is short a class evicts with CLOCK (second chance),
//     reclaiming expired/flushed items first. CLOCK rather than memcached's
//     segmented LRU: a hit sets one bit in the item, taking no list lock and
//     touching no neighbour, and the benchmark's Zipf hit ratios are higher
//     than memcached's (0.632 vs 0.608 at s=0.9, 0.897 vs 0.886 at s=1.1,
//     -m 64, key space 10x the memory). Pages follow the workload: a class evicting items much younger
//     than another class's next victim takes a page from it (rebalance.go); a
//     class with no page takes one from the class with the most. A page that
//     moves keeps the items CLOCK would keep, moving them to other chunks of
//     their class (drain.go). Only when neither works does a store fail with
//     NoMemory.
//   - Every change of a shard's key->item mapping goes through shard.mutate
//     (mutate.go), and every rewrite of an item's chunk by a store through
//     overwrite beside it: where leases are invalidated.
package shard

import (
	"fmt"
	"github.com/leasecached/leasecached/lease"
	"github.com/leasecached/leasecached/protocol"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/leasecached/leasecached/slab"
)

const (
	// DefaultMaxItemSize is memcached's default -I.
	DefaultMaxItemSize = protocol.DefaultMaxItemSize
	// MinMaxItemSize and MaxMaxItemSize are memcached's bounds for -I.
	MinMaxItemSize = 1024
	MaxMaxItemSize = 1 << 30
	// DefaultReclaimInterval is how often the background reclaimer runs.
	DefaultReclaimInterval = time.Second
	// MaxShards bounds the automatic and forced shard count.
	MaxShards = 64
	// pagesPerShard is the automatic sizing rule: enough pages per shard that
	// most size classes in use can own a few pages each.
	pagesPerShard = 64
)

// Config configures a Store.
type Config struct {
	MemoryLimit     int64         // bytes (the -m limit)
	MaxItemSize     int           // bytes (the -I limit); 0: DefaultMaxItemSize
	Shards          int           // 0: automatic
	Now             func() int64  // unix seconds; nil: time.Now().Unix
	ReclaimInterval time.Duration // 0: DefaultReclaimInterval; < 0: no reclaimer

	// LeaseWindow is how long a granted lease stays valid (0: lease.DefaultWindow).
	LeaseWindow time.Duration
	// StaleWindow is how long a deleted or expired value is kept for lease-get (0:
	// lease.DefaultStaleWindow; < 0: keep none). Whole seconds, rounded up: item times are seconds.
	StaleWindow time.Duration
	// Grace keeps an expired value this long as a grace copy that plain reads may be answered with
	// while one of them refills the key (doc/leases.md, "Grace and hold"; 0: off). Whole seconds,
	// rounded up.
	Grace time.Duration
	// Hold parks a get-family read of a key being refilled for at most this long, until the refill lands
	// (doc/leases.md, "Grace and hold"; 0: off). See hold.go.
	Hold time.Duration
	// NowNano is the lease clock, unix nanoseconds (nil: time.Now().UnixNano). Lease windows are
	// timed finer than item exptimes so sub-second windows work.
	NowNano func() int64
	// LargePages backs item memory with transparent huge pages (memcached's -L; slab.NewLargePageArena
	// says what it costs; with DataDir, slab.OpenBacking).
	LargePages bool
	// DataDir keeps item memory in files there, so a restart on it comes back warm (persist.go); "": off.
	DataDir string
	// DataSync is how often a data directory is written to disk (0: only when the store is closed).
	DataSync time.Duration
	// DataLive keeps the data directory's items live on tmpfs under this directory, each sync copying
	// what changed into DataDir (slab.BackingOptions.Live); "": the files in DataDir are mapped.
	DataLive string
	// SyncFailed is told each periodic sync that fails (nil: none is told; RestartStats counts them).
	SyncFailed func(error)
	// PagesLost is told when a shard's rebuild could not ready stored pages (no room for them in the files,
	// an I/O error): their items are lost (nil: nothing is told).
	PagesLost func(error)
	// Opened is told what the data directory held once its stored pages are adopted, before any request
	// is served (RestartStats: why it started empty, what it caught up with, what this -m had no room
	// for): in New, or later when New left the opening to finish while the shards wait (persist.go).
	Opened func(RestartStats)
	// Emptying is told why the data directory's stored data cannot be used, before any of it is
	// discarded (not for a directory that holds none, slab.NoStoredData): a process killed right after
	// has said why its next start finds nothing (RestartStats.StartedEmpty says it too).
	Emptying func(reason string)
	// Waiting is told that the data directory is locked by a server that is leaving (killed, exiting or
	// stopping), which New waits for (slab.BackingOptions.Waiting).
	Waiting func(owner string)
	// OpenFailed is told when such a later opening fails: the store can serve nothing, its shards stay
	// locked, and the process must exit (Close would wait for ever; nil: the store panics).
	OpenFailed func(error)

	// beforeFinish, when set, runs before an opening left to finish after New does so (tests).
	beforeFinish func()
	// persistTick is the period of the data directory's loop (0: a second); tests lengthen it to keep
	// its syncs out of the way.
	persistTick time.Duration
}

// Info is an item's metadata as returned by reads.
type Info struct {
	Flags   uint32
	Cas     uint64
	Exptime int64 // absolute unix seconds, 0 = never
	Len     int
}

// Store is the sharded item store. Safe for concurrent use.
type Store struct {
	// nowFn is the clock a Config gave (Now); with none, clock is the default one and now reads it
	// directly: through the function value, a read cost an indirect call and a division, about 30
	// instructions, once or twice per request.
	nowFn       func() int64
	maxItemSize int
	limit       atomic.Int64 // bytes (-m, then cache_memlimit)
	limitMu     sync.Mutex   // serialises SetMemoryLimit and fitRoom calls
	roomPages   int          // the pages fitRoom last shared out, 0 for none (under limitMu)
	started     int64        // memcached's process_started, for flush_all's quirk
	arena       *slab.Arena
	classes     *slab.Classes
	shards      []shard

	nowNano      func() int64
	reclaimNow   func() int64 // the reclaimer's reading of now, which does not keep the default clock ticking
	clock        *coarseClock // the default clock's ticker; nil when the caller supplied the clocks
	tokens       *lease.Tokens
	leaseWindow  time.Duration
	leaseEntries int   // per shard
	staleSecs    int64 // 0: no stale values
	graceSecs    int64 // 0: no grace copies
	hold         time.Duration
	parked       atomic.Int64 // reads parked (hold.go), at most maxParked
	maxParked    int64        // MaxParked; tests lower it

	oldestLive atomic.Int64  // flush_all: items stored at or before it are gone (0 = none)
	oldestCas  atomic.Uint64 // flush_all: items with a smaller CAS are gone (0 = none)

	// cas is the last CAS unique handed out, on a cache line of its own: every store writes it, and every
	// read reads the fields above (dead), so sharing their line made each store on one CPU cost the other
	// CPU's next read a miss (BenchmarkGetSetParallelOwnShards).
	_   [64]byte
	cas atomic.Uint64
	_   [56]byte

	// prefetching counts the Prefetch calls under way (prefetch.go says why), on a cache line of its own:
	// both event loops write it for every batch.
	prefetching atomic.Int64
	_           [56]byte

	evictLog atomic.Pointer[evictionLogBox] // `watch evictions` (watch.go)

	// persist is the data directory (persist.go); nil without one.
	persist *persistence

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// wholeSeconds is d in whole seconds, rounded up (item times are seconds); 0 for d <= 0.
func wholeSeconds(d time.Duration) int64 { return int64((max(d, 0) + time.Second - 1) / time.Second) }

// New builds a Store and starts its reclaimer.
func New(cfg Config) (*Store, error) {
	if cfg.MaxItemSize == 0 {
		cfg.MaxItemSize = DefaultMaxItemSize
	}
	if cfg.MaxItemSize < MinMaxItemSize || cfg.MaxItemSize > MaxMaxItemSize {
		return nil, fmt.Errorf("shard: max item size %d outside [%d, %d]", cfg.MaxItemSize, MinMaxItemSize, MaxMaxItemSize)
	}
	if int64(cfg.MaxItemSize) > cfg.MemoryLimit && cfg.MemoryLimit > 0 {
		return nil, fmt.Errorf("shard: max item size %d exceeds the memory limit %d", cfg.MaxItemSize, cfg.MemoryLimit)
	}
	// Lease bookkeeping lives on the Go heap, so its bound is carved out of -m rather than added to it.
	arenaBytes, leaseBudget := splitMemory(cfg.MemoryLimit)
	newArena := slab.NewArena
	if cfg.LargePages {
		newArena = slab.NewLargePageArena
	}
	arenaPages, err := slab.LimitPages(arenaBytes)
	if err != nil {
		return nil, fmt.Errorf("shard: %w", err)
	}
	n := cfg.Shards
	switch {
	case n < 0 || n > MaxShards:
		return nil, fmt.Errorf("shard: shard count %d outside [0, %d]", n, MaxShards)
	case n == 0:
		n = min(autoShards(int(cfg.MemoryLimit/slab.PageSize)), arenaPages)
	case n > arenaPages:
		return nil, fmt.Errorf("shard: %d shards but only %d pages of memory: each shard needs a page", n, arenaPages)
	}
	classes := slab.DefaultClasses()
	var (
		arena   *slab.Arena
		persist *persistence
	)
	room := 0 // the pages a live copy's tmpfs has room for, when fewer than -m's (fitRoom)
	if cfg.DataDir != "" && cfg.DataLive != "" {
		if pages, ok := slab.LiveRoomPages(cfg.DataLive, cfg.DataDir); ok && pages < arenaPages {
			room = pages
		}
	}
	if cfg.DataDir != "" {
		id := slab.Identity{Shards: n, Classes: classes}
		if cfg.Shards == 0 {
			// A live copy on a tmpfs with room for fewer pages than -m has the shards of that room when
			// it starts empty: -m's would share it out a page or two each (fitRoom). Stored data is kept
			// with a count that fits either.
			if room > 0 {
				id.Shards = min(autoShards(room), arenaPages)
			}
			byRoom := id.Shards
			id.OtherShards = func(stored int) bool {
				return keepsShards(stored, n, arenaPages) || keepsShards(stored, byRoom, arenaPages)
			}
		}
		persist, arena, err = openPersistence(cfg, arenaBytes, id)
		if err == nil {
			n = persist.back.Shards()
		}
	} else {
		arena, err = newArena(arenaBytes)
	}
	if err != nil {
		return nil, fmt.Errorf("shard: %w", err)
	}
	var clock *coarseClock // started after the last error return, so a failed New leaks no goroutine
	if cfg.Now == nil && cfg.NowNano == nil {
		clock = startCoarseClock()
		cfg.Now, cfg.NowNano = clock.seconds, clock.nanos
	}
	if cfg.Now == nil {
		cfg.Now = func() int64 { return time.Now().Unix() }
	}
	if cfg.ReclaimInterval == 0 {
		cfg.ReclaimInterval = DefaultReclaimInterval
	}
	if cfg.NowNano == nil {
		cfg.NowNano = func() int64 { return time.Now().UnixNano() }
	}
	if cfg.LeaseWindow <= 0 {
		cfg.LeaseWindow = lease.DefaultWindow
	}
	if cfg.StaleWindow == 0 {
		cfg.StaleWindow = lease.DefaultStaleWindow
	}
	s := &Store{
		nowFn:        cfg.Now,
		nowNano:      cfg.NowNano,
		reclaimNow:   cfg.Now,
		clock:        clock,
		tokens:       lease.NewTokens(uint64(cfg.NowNano())),
		leaseWindow:  cfg.LeaseWindow,
		staleSecs:    wholeSeconds(cfg.StaleWindow),
		graceSecs:    wholeSeconds(cfg.Grace),
		hold:         max(cfg.Hold, 0),
		maxParked:    MaxParked,
		leaseEntries: int(max(leaseBudget/lease.EntryBytes/int64(n), 1)),
		maxItemSize:  cfg.MaxItemSize,
		arena:        arena,
		persist:      persist,
		classes:      classes,
		shards:       make([]shard, n),
		stop:         make(chan struct{}),
		done:         make(chan struct{}),
	}
	if clock != nil {
		s.reclaimNow = clock.quietSeconds
	}
	s.started = cfg.Now() - processStartSkew
	s.limit.Store(cfg.MemoryLimit)
	for i := range s.shards {
		s.shards[i].init(s, i, byteShare(arenaBytes, n, i))
	}
	if room > 0 {
		// Shared out before the stored pages are adopted: a shard adopts no more than its part, and what
		// the room cannot hold is counted and said (restart.md rule 8), not refused page by page later.
		s.shareRoom(max(room-roomSlack, 1), false)
	}
	if persist != nil {
		s.startRestart()
	}
	if cfg.ReclaimInterval > 0 {
		go s.reclaimLoop(cfg.ReclaimInterval)
	} else {
		close(s.done)
	}
	return s, nil
}

// autoShards is clamp(pages/pagesPerShard, 1, MaxShards) rounded down to a
// power of two: -m 64 gives 1 shard, -m 1024 gives 16.
func autoShards(pages int) int {
	n := pages / pagesPerShard
	n = max(1, min(n, MaxShards))
	return 1 << (bits.Len(uint(n)) - 1)
}

// keepsShards says whether a data directory stored with stored shards is used with them at a start whose
// -m gives auto (restart.md rule 8): within a factor of two of auto either way, and a page each. So a -m
// changed by less than a factor of two keeps what fits, whatever shard count each picks; a shard count
// off by more would cost lock contention (too few) or pages stranded in small shares (too many) for the
// cache's whole life.
func keepsShards(stored, auto, pages int) bool {
	return stored >= 1 && stored <= pages && stored <= MaxShards && stored*2 >= auto && stored <= auto*2
}

// Close stops the background reclaimer. The Store stays usable, except with a data directory: that is
// written to disk and closed, and nothing may use the Store afterwards.
func (s *Store) Close() {
	s.closeOnce.Do(func() {
		defer func() { _ = s.closePersistence() }()
		if s.clock != nil {
			s.clock.close()
		}
		select {
		case <-s.done: // no reclaimer was started
		default:
			close(s.stop)
			<-s.done
		}
	})
}

// Stopping tells the data directory, if any, that this server is stopping: a start on it meanwhile waits
// for the lock instead of being refused (slab.Backing.Stopping).
func (s *Store) Stopping() {
	if s.persist != nil {
		s.persist.back.Stopping()
	}
}

// Shards is the number of shards.
func (s *Store) Shards() int { return len(s.shards) }

// shardOf picks the shard from hash bits 32..47, disjoint from the slot
// bits (low) and tag bits (top) the shard's index uses.
func (s *Store) shardOf(h uint64) *shard {
	return &s.shards[((h>>32)&0xffff)*uint64(len(s.shards))>>16]
}

// Hash is the hash the store files key under.
func Hash(key []byte) uint64 { return xxhash.Sum64(key) }

// Hashed is what the ...Hashed methods take instead of hashing a key again: its Hash, and, from Prefetch,
// where Prefetch saw the key's index entry. It must come from HashOf or Prefetch for the same key: a wrong
// Sum makes the key look absent or files it where lookups will not find it. The slot is only a hint; a
// lookup checks it under the shard lock, and a stale one costs the probe it would have saved.
type Hashed struct {
	Sum  uint64
	slot uint32 // 1 + the slot of the first entry Prefetch found with the key's home and tag; 0: none
}

// HashOf is key's Hashed, with no slot hint.
func HashOf(key []byte) Hashed { return Hashed{Sum: Hash(key)} }

// lockKey is how every keyed operation starts: it hashes key, locks the shard that owns it and reads the
// clock once. The caller unlocks sh.mu.
func (s *Store) lockKey(key []byte) (sh *shard, h uint64, now int64) {
	h = Hash(key)
	sh, now = s.lockHashed(h)
	return sh, h, now
}

// lockHashed is lockKey for a key whose hash h is known.
func (s *Store) lockHashed(h uint64) (sh *shard, now int64) {
	sh = s.shardOf(h)
	now = s.now()
	sh.mu.Lock()
	return sh, now
}
