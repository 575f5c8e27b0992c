package near

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasecached/leasecached/clientlib"
	"github.com/leasecached/leasecached/clientlib/internal/placement"
)

// Cache is a near-cache over a clientlib.Client. It is safe for concurrent use.
type Cache struct {
	c     *clientlib.Client
	cfg   Config
	store *store
	hot   *hotness

	// seen is the client's placement (internal/placement) the copies and watchers were last checked
	// against; a client returns a new one when its server list changes (SetServers), and follow then
	// drops what the change made stale.
	seen atomic.Value // placement.Ring

	mu       sync.Mutex
	watchers map[string]*watcher
	servers  map[string]bool // the client's server list as of seen: only these get a watcher
	closed   bool
	stopPoll chan struct{}
	pollDone chan struct{}

	hits, misses, fills, invalidations, flushes atomic.Int64
}

// Stats counts what a Cache did since New.
type Stats struct {
	Hits          int64 // Gets and GetOrFills answered from a near copy
	Misses        int64 // Gets and GetOrFills that went to the client
	Fills         int64 // near copies installed
	Invalidations int64 // copies dropped by a watch line or a write through the Cache
	Flushes       int64 // whole-server flushes: flush_all, skipped=, a lost stream or a failed reconnect
	Entries       int   // copies and reservations held now
	Bytes         int
}

// New returns a near-cache over c. It starts polling "stats hotkeys" (unless cfg.HotKeysPoll < 0);
// watch connections are opened lazily, for each server once a key it holds is hot.
func New(c *clientlib.Client, cfg Config) (*Cache, error) {
	if c == nil {
		return nil, errors.New("near: nil client")
	}
	cfg = cfg.withDefaults()
	nc := &Cache{c: c, cfg: cfg, store: newStore(cfg.MaxEntries, cfg.MaxBytes),
		hot:      newHotness(cfg.HotReads, cfg.HotWindow, 8*cfg.MaxEntries),
		watchers: make(map[string]*watcher), stopPoll: make(chan struct{}), pollDone: make(chan struct{})}
	nc.seen.Store(placement.Of(c))
	nc.servers = serverSet(c)
	if cfg.HotKeysPoll > 0 {
		go nc.pollHotKeys()
	} else {
		close(nc.pollDone)
	}
	return nc, nil
}

// Get returns key's item: the near copy while it is fresh, else the client's answer, copied for a hot
// key when its server's watch stream is up (or refused: TTL-only). The returned item is the caller's.
func (nc *Cache) Get(ctx context.Context, key string) (*clientlib.Item, error) {
	cp, token, now := nc.lookup(key, false)
	if cp != nil {
		return cloneItem(cp), nil
	}
	it, err := nc.c.Get(ctx, key)
	if token != 0 {
		if err != nil {
			it = nil
		}
		nc.fill(key, token, cloneItem(it), now, false)
	}
	return it, err
}

// GetOrFill is the client's GetOrFill (clientlib.Client.GetOrFill) answered from key's near copy
// while it has a fresh one (Source SourceCache). A hot key's cache hit is copied as Get's answer is;
// a value it filled, a stale or a fallback value, and every error are not: the fill's own write comes
// back on the watch stream and would drop the copy at once, and the others are not the server's
// current value. Each copy answers only the call that made it: a GetOrFill copy has no CAS for Get,
// and a Get copy is a raw item where GetOrFill reads some (a cached "not found") as its own answer; a
// key read both ways is read through by the other until its copy expires or is dropped.
func (nc *Cache) GetOrFill(ctx context.Context, key string, fill clientlib.FillFunc, opts *clientlib.FillOptions) (clientlib.Value, error) {
	cp, token, now := nc.lookup(key, true)
	if cp != nil {
		return clientlib.Value{Data: bytes.Clone(cp.Value), Flags: cp.Flags, Source: clientlib.SourceCache}, nil
	}
	v, err := nc.c.GetOrFill(ctx, key, fill, opts)
	if token != 0 {
		var it *clientlib.Item
		if err == nil && v.Source == clientlib.SourceCache {
			it = &clientlib.Item{Key: key, Value: bytes.Clone(v.Data), Flags: v.Flags}
		}
		nc.fill(key, token, it, now, true)
	}
	return v, err
}

// lookup counts a read of key and returns its near copy made by the same call (byFill: GetOrFill),
// else the reservation token the read from the server may fill the copy with (0: do not fill) and
// the time the read is sent, from which the copy's TTL counts.
func (nc *Cache) lookup(key string, byFill bool) (*clientlib.Item, uint64, time.Time) {
	ring := nc.follow()
	now := time.Now()
	hot := nc.hot.read(key, now)
	if it, ok := nc.store.get(key, now, byFill); ok {
		nc.hits.Add(1)
		return it, 0, now
	}
	nc.misses.Add(1)
	if !hot {
		return nil, 0, now
	}
	addr, err := nc.c.ServerFor(key)
	if err != nil {
		return nil, 0, now
	}
	// Reserve before checking the stream: a loss after this point flushes the reservation. Likewise
	// the server list: a change after the check below is followed by a sync that sees the reservation.
	token := nc.store.reserve(key, addr)
	if token != 0 && (placement.Of(nc.c) != ring || !nc.fillable(addr)) {
		nc.store.release(key, token)
		token = 0
	}
	return nil, token, now
}

// fill installs it (the caller's copy) under token, or releases the reservation when it is nil.
func (nc *Cache) fill(key string, token uint64, it *clientlib.Item, sent time.Time, byFill bool) {
	if it == nil {
		nc.store.release(key, token)
		return
	}
	if nc.store.install(token, it, sent.Add(nc.cfg.TTL), byFill) {
		nc.fills.Add(1)
	}
}

// fillable reports whether copies from addr may be filled now, starting its watcher if need be. A
// server no longer in the client's list gets none (its address came from before a SetServers).
func (nc *Cache) fillable(addr string) bool {
	nc.mu.Lock()
	w := nc.watchers[addr]
	if w == nil && !nc.closed && nc.servers[addr] {
		w = newWatcher(nc, addr)
		nc.watchers[addr] = w
	}
	nc.mu.Unlock()
	return w != nil && w.state.Load() != stateDown
}

// Set stores it through the client and drops key's near copy before and after, so that no read of
// this process that begins after Set returns sees the old value.
func (nc *Cache) Set(ctx context.Context, it *clientlib.Item) error {
	nc.follow()
	nc.invalidate(it.Key)
	err := nc.c.Set(ctx, it)
	nc.invalidate(it.Key)
	return err
}

// Delete deletes key through the client, dropping its near copy as Set does.
func (nc *Cache) Delete(ctx context.Context, key string) error {
	nc.follow()
	nc.invalidate(key)
	err := nc.c.Delete(ctx, key)
	nc.invalidate(key)
	return err
}

// Stats returns the Cache's counts.
func (nc *Cache) Stats() Stats {
	n, b := nc.store.len()
	return Stats{Hits: nc.hits.Load(), Misses: nc.misses.Load(), Fills: nc.fills.Load(),
		Invalidations: nc.invalidations.Load(), Flushes: nc.flushes.Load(), Entries: n, Bytes: b}
}

// Close stops the watchers and the poll and drops every copy. It does not close the client.
func (nc *Cache) Close() error {
	nc.mu.Lock()
	if nc.closed {
		nc.mu.Unlock()
		return nil
	}
	nc.closed = true
	ws := nc.watchers
	nc.watchers = nil
	close(nc.stopPoll)
	nc.mu.Unlock()
	for _, w := range ws {
		w.stop()
	}
	<-nc.pollDone
	nc.store.flush("")
	return nil
}

// follow returns the client's placement, first carrying out a change of its server list since the
// last call (Client.SetServers): one atomic load and a compare when there was none.
func (nc *Cache) follow() placement.Ring {
	r := placement.Of(nc.c)
	if r == nc.seen.Load() {
		return r
	}
	return nc.resync()
}

// resync drops the copies of keys that the new list places elsewhere (a removed server's keys
// included), and stops the watchers of servers no longer listed; new servers get a watcher when a key
// of theirs turns hot. seen is stored last, so a Get that finds it current finds the copies checked.
func (nc *Cache) resync() placement.Ring {
	nc.mu.Lock()
	r := placement.Of(nc.c)
	if r == nc.seen.Load() || nc.closed {
		nc.mu.Unlock()
		return r
	}
	// The list read here may be newer than r; then the next follow syncs again.
	nc.servers = serverSet(nc.c)
	var gone []*watcher
	for addr, w := range nc.watchers {
		if !nc.servers[addr] {
			gone = append(gone, w)
			delete(nc.watchers, addr)
		}
	}
	n := nc.store.retain(func(key, server string) bool {
		addr, err := nc.c.ServerFor(key)
		return err == nil && addr == server
	})
	nc.invalidations.Add(int64(n))
	nc.seen.Store(r)
	nc.mu.Unlock()
	for _, w := range gone {
		w.stop() // its run loop flushes the server's copies, already dropped above
	}
	return r
}

// serverSet is the client's configured server list (ejected servers included).
func serverSet(c *clientlib.Client) map[string]bool {
	list := c.Stats().Servers
	set := make(map[string]bool, len(list))
	for _, s := range list {
		set[s.Addr] = true
	}
	return set
}

// apply carries out one watch line from addr.
func (nc *Cache) apply(addr string, line []byte) {
	switch act, key := parseLine(line); act {
	case actInvalidate:
		nc.invalidate(key)
	case actFlush:
		nc.store.flush(addr)
		nc.flushes.Add(1)
	}
}

func (nc *Cache) invalidate(key string) {
	if nc.store.invalidate(key) {
		nc.invalidations.Add(1)
	}
}

func cloneItem(it *clientlib.Item) *clientlib.Item {
	if it == nil {
		return nil
	}
	c := *it
	c.Value = append([]byte(nil), it.Value...)
	return &c
}
