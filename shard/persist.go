package shard

import (
	"cmp"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/zeebo/xxh3"

	"github.com/leasecached/leasecached/slab"
)

// A data directory (Config.DataDir, doc/design/restart.md): item memory is a shared file mapping, so what
// was stored survives the process, and a restart rebuilds the index from it. What this file adds to the
// store:
//   - Every item is sealed once whole: its seal (sealAt, after the value) is a checksum of what a reader is
//     given (key, value, flags, exptime, CAS, layout); mutate seals every item it links. Nothing sealed
//     changes without a sealed copy: a change in place (a store that keeps the item's class, an incr, a
//     touch, an md I) first copies the item to the shard's undo chunk (undo.go); any other change writes a
//     new chunk, and the old item stays sealed until the new one is sealed and linked. A restart keeps only
//     items whose seal matches, so an item being written when the process died is dropped, never served
//     torn, and the value it was replacing is kept.
//   - Time fields are absolute unix seconds already, so expiry stays honest across the downtime.
//   - The CAS high-water mark is stored ahead of the counter (casReserve), so CAS uniques keep growing
//     across restarts; flush_all's marks are stored when set, so flushed items stay gone.
//   - Leases, stale values and grace copies are not kept: a restart drops ghosts, and lease tokens live
//     on the Go heap, so no token from a previous run is ever accepted.

// casReserve is how far ahead of the CAS counter the stored high-water mark is kept. The mark is renewed
// once a second (persistLoop) when the counter is within half of it: no server hands out 2^31 CAS values
// a second.
const casReserve = 1 << 32

// persistence is a Store's data directory and what its restart found.
type persistence struct {
	back       *slab.Backing
	syncEvery  time.Duration
	syncFailed func(error)  // Config.SyncFailed; nil: failures are only counted
	pagesLost  func(error)  // Config.PagesLost
	syncFn     func() error // back.Sync; tests make it fail

	syncs        atomic.Uint64 // periodic syncs done (stats data_syncs)
	syncFailures atomic.Uint64 // and failed (data_sync_failures)
	syncedAt     atomic.Int64  // unix seconds of the last one done (data_last_sync), 0 before it
	// markSynced is the CAS mark last written to disk (syncMark): by the rebuild, then by persistLoop.
	markSynced atomic.Uint64
	// kept is how many versions the shards keep until a sync (keep.go), keptDropped how many they freed
	// before it (data_kept_versions, data_kept_dropped).
	kept        atomic.Int64
	keptDropped atomic.Int64

	loading    atomic.Bool  // the index is being rebuilt (some shards are still locked by recover)
	loaded     atomic.Int64 // items indexed by the rebuild
	dropped    atomic.Int64 // items found and not kept
	rolledBack atomic.Int64 // of those indexed, kept versions taken back (RestartStats.RolledBack)
	nanos      atomic.Int64 // how long the restart took: the opening left to finish after New (if any) and the rebuild
	started    time.Time    // when it began; set before the store is shared
	// reason is why the stored data was not used ("" when it was), pagesLeft how many stored pages this
	// -m had no room for and itemsLeft how many items they held; all set before opened is closed (and
	// any shard unlocked), and read only after it.
	reason    string
	pagesLeft int
	itemsLeft int64
	opened    chan struct{}

	tick         time.Duration      // Config.persistTick
	openedFn     func(RestartStats) // Config.Opened
	openFailed   func(error)        // Config.OpenFailed
	beforeFinish func()             // Config.beforeFinish

	stop chan struct{}
	done sync.WaitGroup
}

// RestartStats is what a restart from a data directory did, and how its syncs since went, for stats
// (memcached has no such lines).
type RestartStats struct {
	Enabled bool
	Loading bool
	Loaded  int64
	Dropped int64
	// RolledBack is how many of the Loaded items are kept versions a start after a reboot took back
	// (keep.go): keys whose change the disk lacked, back as they were before it.
	RolledBack int64
	Seconds    float64 // how long the restart took; while Loading, how long it has run so far
	// StartedEmpty to ItemsLeft are what the opening found, zero until it has (Config.Opened).
	StartedEmpty string // why the stored data was not used; "" when it was, or there was none
	CaughtUp     string // the live copy written into the data directory first (slab.Backing.CaughtUp); "" if none
	PagesLeft    int    // stored pages a smaller -m had no room for
	ItemsLeft    int64  // the items they held, dropped (counted in Dropped too)
	Syncs        uint64 // periodic syncs done
	SyncFailures uint64 // periodic syncs failed
	SyncedAt     int64  // unix seconds of the last sync done; 0 before the first
	ParkedPages  int    // pages a move emptied, out of use until a sync (restart.md rule 9)
	KeptVersions int64  // versions changes replaced, kept until a sync (restart.md rule 9)
	KeptDropped  int64  // kept versions freed before that sync: by a page move or for memory
}

// RestartStats reports the restart; Enabled is false without a data directory.
func (s *Store) RestartStats() RestartStats {
	p := s.persist
	if p == nil {
		return RestartStats{}
	}
	rs := RestartStats{Enabled: true, Loading: p.loading.Load(), Loaded: p.loaded.Load(),
		Dropped: p.dropped.Load(), RolledBack: p.rolledBack.Load(), Seconds: float64(p.nanos.Load()) / 1e9, Syncs: p.syncs.Load(),
		SyncFailures: p.syncFailures.Load(), SyncedAt: p.syncedAt.Load(), ParkedPages: p.back.Parked(),
		KeptVersions: p.kept.Load(), KeptDropped: p.keptDropped.Load()}
	if rs.Loading {
		rs.Seconds = time.Since(p.started).Seconds() // so far
	}
	select {
	case <-p.opened: // what the opening found is set before opened is closed
		rs.StartedEmpty, rs.CaughtUp, rs.PagesLeft, rs.ItemsLeft = p.reason, p.back.CaughtUp(), p.pagesLeft, p.itemsLeft
	default:
	}
	return rs
}

// seal marks the whole item at r (head chunk b) as stored, and its chunks as written for a
// live copy's sync; without a data directory it does nothing. The seal is stored after every byte of the
// item (slab.StoreSeal), so a process killed in between never leaves it over half-written bytes.
func (sh *shard) seal(r slab.Ref, b []byte) {
	if sh.sums != nil {
		at, seal := sh.sealFor(b)
		slab.StoreSeal(sealPtr(b, at), seal)
		sh.al.Wrote(r, len(b))
		if itemChained(b) {
			for part := readRef(b[chainOff(b):]); part != slab.NilRef; {
				c := sh.chunk(part)
				sh.al.Wrote(part, len(c))
				part = readRef(c[offPartNext:])
			}
		}
	}
}

// itemSeal is head chunk b's seal (sealAt), 4-byte aligned.
func itemSeal(b []byte) *uint32 { return sealPtr(b, sealAt(b)) }

// sealPtr is the seal at offset at of head chunk b (sealAt or sealOf's at).
func sealPtr(b []byte, at int) *uint32 { return (*uint32)(unsafe.Pointer(&b[at : at+sealLen][0])) }

// room is the chunk room an item of n bytes (header, key and value) takes: with its seal in a data
// directory.
func (sh *shard) room(n int) int {
	if sh.sums != nil {
		return sealedLen(n)
	}
	return n
}

// prefetchNew starts fetching the chunk a store of an item of n bytes with its seal will take (the head of
// its class's free list): with a data directory a store of an item over undoRoom writes a new chunk, whose
// lines, unlike those of the item it replaces, nothing has fetched (undo.go). Issued before the index
// probe, the misses overlap.
func (sh *shard) prefetchNew(n int) {
	if n <= undoRoom {
		return
	}
	if id, ok := sh.st.classes.For(n); ok {
		if chunk := sh.al.NextAddr(id); chunk != 0 {
			prefetchItemSpan(chunk)
		}
	}
}

// sealOf is the seal head chunk b must carry, and where it is kept (sealAt), under the directory's seal key
// key: never 0, which means "no seal". A chained item's parts are read through its links (al), which the
// caller has checked (recoverHead) or written, and hashed with d.
//
// What it covers is one XXH3 hash of the header's fields from exptime on, the key and the value, which
// follow one another in the chunk (a chained head's link, which a page move rewrites in place, is left
// out), then the CAS and the bytes that say how to read them (layout, key length, chained) mixed in:
// everything a reader is given, and nothing a read changes (doc/design/restart.md rule 1). XXH3, not the
// index's xxhash: its vector code does a 4 KiB value in about a quarter of the time, and one call over one
// span costs a store least (doc/design/restart-costs.md). The seal key is mixed with the CAS
// inside the last mix, so that no one who does not know it can compute a seal: a client's value can hold
// the bytes of an item, and a page read with another class's geometry puts chunk starts inside values
// (slab.Backing.SealKey).
func sealOf(key uint64, b []byte, al *slab.Allocator, d *xxh3.Hasher) (at int, seal uint32) {
	m, st := b[offMeta], b[offState]
	var x uint64
	if st&flagChained == 0 {
		_, vlen, data := valueFields(b)
		x = xxh3.Hash(b[offExp : data+vlen])
		at = sealedLen(data+vlen) - sealLen
	} else {
		d.Reset()
		_, _ = d.Write(b[offExp:chainOff(b)])
		_, _ = d.Write(itemKey(b))
		r := newValueReader(al, b)
		for s := r.segment(); s != nil; s = r.segment() {
			_, _ = d.Write(s)
		}
		x = d.Sum64()
		at = valueEnd(b)
	}
	shape := uint64(m&(metaLayout|metaKeyBinary)) | uint64(b[offKlen])<<8 | uint64(st&flagChained)<<16
	h := mix64(x ^ shape ^ mix64(le.Uint64(b[offCas:])^key))
	return at, max(uint32(h)^uint32(h>>32), 1)
}

// sealFor is sealOf in this shard's directory.
func (sh *shard) sealFor(b []byte) (at int, seal uint32) {
	return sealOf(sh.sealKey, b, sh.al, sh.sums)
}

// mix64 is a 64-bit finaliser (splitmix64's): every input bit changes about half the output bits.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 27
	x *= 0x94D049BB133111EB
	return x ^ x>>31
}

// openPersistence opens cfg.DataDir for a store of id.Shards shards (or the stored count it accepts) and
// builds the arena in it. The opening may be left to finish in startRestart (slab.BackingOptions.Defer).
func openPersistence(cfg Config, arenaBytes int64, id slab.Identity) (*persistence, *slab.Arena, error) {
	back, reason, err := slab.OpenBacking(cfg.DataDir, id,
		slab.BackingOptions{Huge: cfg.LargePages, Live: cfg.DataLive, Syncs: cfg.DataSync > 0, Defer: true,
			Emptying: cfg.Emptying, Waiting: cfg.Waiting})
	if err != nil {
		return nil, nil, err
	}
	arena, err := slab.NewBackedArena(arenaBytes, back)
	if err != nil {
		back.Close()
		return nil, nil, err // New says "shard:"
	}
	return &persistence{back: back, syncEvery: cfg.DataSync, syncFailed: cfg.SyncFailed, pagesLost: cfg.PagesLost, syncFn: back.Sync,
		reason: reason, tick: cfg.persistTick, openedFn: cfg.Opened, openFailed: cfg.OpenFailed, beforeFinish: cfg.beforeFinish,
		opened: make(chan struct{}), stop: make(chan struct{})}, arena, nil
}

// startRestart adopts the stored pages and starts rebuilding the index from them. It runs in New, before
// the store is shared: it locks every shard, and the rebuild unlocks each once its items are indexed, so
// a request for a key of a shard not yet rebuilt waits for it rather than missing (restart.md rule 7).
// The adoption runs after New returns too, the shards locked all along, so that the listener opens at
// once: it reads every page a smaller -m leaves out, to count its items (restart.md rule 7), and
// the opening left pending (a newer live copy to write into the directory first, which takes as long as
// writing -m to disk) runs before it (restart-live.md). What changes the store without a shard's lock
// first waits for it (waitOpened).
func (s *Store) startRestart() {
	p := s.persist
	p.started = time.Now()
	for i := range s.shards {
		s.shards[i].mu.Lock()
	}
	p.loading.Store(true)
	pending := p.back.Pending()
	p.done.Add(1)
	go func() {
		defer p.done.Done()
		if pending && !s.finishOpen() {
			return // the shards stay locked: nothing can be served from a directory that is not open
		}
		s.adoptStored()
		p.done.Add(1)
		go func() {
			defer p.done.Done()
			s.persistLoop()
		}()
		s.rebuild()
	}()
}

// finishOpen finishes the data directory's opening that New left pending; false when it failed
// (Config.OpenFailed is told).
func (s *Store) finishOpen() bool {
	p := s.persist
	if p.beforeFinish != nil {
		p.beforeFinish()
	}
	reason, err := p.back.FinishOpen()
	if err != nil {
		err = fmt.Errorf("shard: %w", err)
		if p.openFailed == nil {
			panic(err)
		}
		p.openFailed(err)
		return false
	}
	p.reason = reason
	return true
}

// adoptStored sets the store up from the open data directory: flush_all's marks, the CAS counter, each
// shard's seal key and the stored pages. The shards are locked; Config.Opened is told what it found.
func (s *Store) adoptStored() {
	p := s.persist
	p.back.SetQuiesce(s.quiesce)
	oldestLive, oldestCas := p.back.Flushed()
	s.oldestLive.Store(oldestLive)
	s.oldestCas.Store(oldestCas)
	s.cas.Store(p.back.CasHigh())
	if p.reason != "" && p.reason != slab.NoStoredData {
		// The stored mark is gone with the data it belonged to, but clients may still hold CAS values
		// from before: start above any a server could have handed out before now (fewer than 10^9 a
		// second since 1970), as lease tokens do.
		s.cas.Store(uint64(time.Now().UnixNano()))
	}
	p.back.SetCasHigh(s.cas.Load() + casReserve)
	for i := range s.shards {
		s.shards[i].sealKey = p.back.SealKey()
	}
	if p.reason == "" {
		p.pagesLeft, p.itemsLeft = s.adoptPages()
		p.dropped.Add(p.itemsLeft)
	}
	s.arena.FinishAdopt()
	p.back.Adopted()
	close(p.opened)
	if p.openedFn != nil {
		p.openedFn(s.RestartStats())
	}
}

// waitOpened returns once the data directory is open and its pages adopted (at once without one): for
// what changes the store's state without a shard's lock first.
func (s *Store) waitOpened() {
	if s.persist != nil {
		<-s.persist.opened
	}
}

// adoptPages hands every stored page to the shard that owned it, up to what this -m allows the shard (a
// smaller -m keeps what fits); the pages left over are emptied by FinishAdopt. It returns how many pages
// it left and how many item heads they held, each read as the rebuild reads it (recoverItems counts every
// head it does not keep as dropped, and so are these).
func (s *Store) adoptPages() (pages int, items int64) {
	for _, r := range s.persist.back.Records() {
		if r.Owner >= len(s.shards) || r.Class >= s.classes.Count() {
			continue // a damaged record: FinishAdopt empties the page
		}
		al := s.shards[r.Owner].al
		if al.OwnedPages() >= al.MaxPages() || al.Adopt(r.ID, r.Class) != nil {
			pages++
			al.StoredChunks(r, func(b []byte) {
				if b[offState]&kindMask == kindHead {
					items++
				}
			})
		}
	}
	// Pages the last server parked stay parked until this one's first sync, where pages park (their
	// moves' copies may not be on disk yet: slab.Backing.ParkedRecords), taken after the pages in use
	// and beyond the budget if need be: they go at that sync. Elsewhere FinishAdopt empties them: the
	// opening synced the copies (slab.Backing.open), or a live copy's sync writes them before any page
	// it moved (restart-live.md rule 12).
	for _, r := range s.persist.back.ParkedRecords() {
		if r.Owner < len(s.shards) && r.Class < s.classes.Count() && s.shards[r.Owner].al.Parks() {
			_ = s.shards[r.Owner].al.AdoptParked(r.ID, r.Class) // an error: a damaged record, emptied
		}
	}
	return pages, items
}

// rebuild indexes every shard's stored items, on as many goroutines as there are CPUs, unlocking each
// shard when it is done.
func (s *Store) rebuild() {
	p := s.persist
	now := s.now()
	var next atomic.Int64
	var maxCas atomic.Uint64
	// The counter starts at the mark on disk, and only a store, under its shard's lock, moves it: the new
	// mark is written to disk (syncMark, rule 5) before any shard is unlocked, while the shards are indexed,
	// not before the listener opens (after a kill -9 a sync may first wait for the file system to write back
	// what it holds: 0.1-0.2 s after 10M items). The files' names are made durable there too.
	marked := make(chan struct{})
	go func() {
		defer close(marked)
		p.back.SyncNames()
		p.syncMark()
	}()
	var wg sync.WaitGroup
	var heldMu sync.Mutex
	var held []*shard // shards whose pages could not be recorded as in the live copy (ShardLoaded)
	for range min(runtime.GOMAXPROCS(0), len(s.shards)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < len(s.shards); i = int(next.Add(1) - 1) {
				sh := &s.shards[i]
				// A live copy being made from the directory (a start after a reboot) gets the shard's pages
				// first; one that cannot be read holds no item, and its items are dropped.
				if err := sh.al.LoadPages(); err != nil && p.pagesLost != nil {
					p.pagesLost(err)
				}
				loaded, dropped, rolledBack, mc := sh.recoverItems(i, now)
				p.loaded.Add(loaded)
				p.dropped.Add(dropped)
				p.rolledBack.Add(rolledBack)
				raiseTo(&maxCas, mc)
				<-marked
				if err := p.back.ShardLoaded(i); err != nil {
					// A start after a kill would read this shard's pages from DIR again, without what it
					// changed since: it changes nothing until the copy is whole (LiveLoaded).
					if p.syncFailed != nil {
						p.syncFailed(err)
					}
					heldMu.Lock()
					held = append(held, sh)
					heldMu.Unlock()
					continue
				}
				sh.mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := p.back.LiveLoaded(); err != nil && p.syncFailed != nil {
		// No origin: a start after a kill resumes the copy, reading the shards not listed in it (held
		// ones too, unlocked below all the same) from DIR, as of the last sync.
		p.syncFailed(err)
	}
	for _, sh := range held {
		sh.mu.Unlock()
	}
	// No item's CAS should be above the stored mark (a client cannot choose one in memcached 1.6.18); were
	// one there, from a directory written by another build, larger ones are handed out from now on.
	raiseTo(&s.cas, maxCas.Load())
	s.renewCasMark()
	s.fitRoom()
	p.nanos.Store(int64(time.Since(p.started)))
	p.loading.Store(false)
}

// quiesce returns once every shard has left the critical section it was in when called: whatever an
// owner wrote to its chunks before then is in memory for a live copy's sync (slab.Backing.SetQuiesce).
func (s *Store) quiesce() {
	for i := range s.shards {
		s.shards[i].mu.Lock()
		s.shards[i].mu.Unlock() //nolint:staticcheck // an empty critical section is the point
	}
}

// raiseTo makes a at least v.
func raiseTo(a *atomic.Uint64, v uint64) {
	for c := a.Load(); v > c && !a.CompareAndSwap(c, v); c = a.Load() {
	}
}

// persistLoop keeps the CAS mark ahead of the counter and syncs the data directory every syncEvery.
func (s *Store) persistLoop() {
	p := s.persist
	tick := time.NewTicker(cmp.Or(p.tick, time.Second))
	defer tick.Stop()
	lastSync, lastOK := time.Now(), true
	for {
		select {
		case <-p.stop:
			return
		case <-tick.C:
		}
		s.renewCasMark()
		// A page parked by a page move waits for a sync (drain.go), and the class it was moved for waits
		// with it: the next tick makes one, as long as syncs succeed.
		if p.syncEvery > 0 && (time.Since(lastSync) >= p.syncEvery || lastOK && p.back.Parked() > 0) {
			lastOK = p.sync()
			s.releaseSynced()
			lastSync = time.Now()
		} else if p.back.CasHigh() != p.markSynced.Load() {
			p.syncMark()
		}
	}
}

// releaseSynced gives back what the last sync has made safe to reuse: the pages parked by page moves
// (drain.go), whose items are on disk elsewhere now, and the versions kept until a sync (keep.go).
func (s *Store) releaseSynced() {
	p := s.persist
	if p.back.Parked() == 0 && p.kept.Load() == 0 {
		return // no shard to lock
	}
	done := p.back.SyncsDone()
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		if sh.al.ParkedPages() > 0 {
			sh.al.ReleaseParked(done)
		}
		if sh.kept != nil {
			sh.releaseKept(done)
		}
		sh.mu.Unlock()
	}
}

// sync writes the data directory to disk and counts the outcome (false: it failed). A failure (a full or failing disk) loses
// only what a machine reboot would keep, so the server goes on serving; Config.SyncFailed is told.
func (p *persistence) sync() bool {
	if !p.synced(p.syncFn) {
		return false
	}
	p.syncs.Add(1)
	p.syncedAt.Store(time.Now().Unix())
	return true
}

// syncMark writes the stored CAS mark to disk, for rule 5 across a machine reboot, where only what was
// synced counts and the next run starts its counter at the mark it finds: at start, before any CAS is
// handed out (rebuild), and within a second of each raise (renewCasMark raises it while the counter is
// still 2^31 below the mark on disk). --data-sync 0 included.
func (p *persistence) syncMark() { p.synced(p.back.SyncHeader) }

// synced runs fn, a sync that writes the header, and records the CAS mark it wrote (markSynced); a failure
// is counted and Config.SyncFailed told.
func (p *persistence) synced(fn func() error) bool {
	mark := p.back.CasHigh()
	if err := fn(); err != nil {
		p.syncFailures.Add(1)
		if p.syncFailed != nil {
			p.syncFailed(err)
		}
		return false
	}
	p.markSynced.Store(mark)
	return true
}

// renewCasMark keeps the stored CAS mark at least casReserve/2 ahead of the counter (rule 5): once a
// second, after the rebuild raised the counter, and before flush_all's marks are stored, so that a stored
// oldest CAS is never above the stored mark (slab.OpenBacking checks it).
func (s *Store) renewCasMark() {
	p := s.persist
	if c := s.cas.Load(); c+casReserve/2 > p.back.CasHigh() {
		p.back.SetCasHigh(c + casReserve)
	}
}

// flushed stores flush_all's marks in the data directory.
func (s *Store) flushed() {
	if s.persist != nil {
		s.renewCasMark()
		s.persist.back.SetFlushed(s.oldestLive.Load(), s.oldestCas.Load())
	}
}

// closePersistence waits for the rebuild, stores the CAS mark, syncs and closes the data directory.
// Nothing may use the store's items afterwards.
func (s *Store) closePersistence() error {
	p := s.persist
	if p == nil {
		return nil
	}
	close(p.stop)
	p.done.Wait()
	p.back.SetCasHigh(s.cas.Load() + 1)
	return p.back.Close()
}
