package near

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasecached/leasecached/clientlib"
)

// Cache is a near-cache over a clientlib.Client. It is safe for concurrent use.
type Cache struct {
	c     *clientlib.Client
	cfg   Config
	store *store
	hot   *hotness

	mu       sync.Mutex
	watchers map[string]*watcher
	closed   bool
	stopPoll chan struct{}
	pollDone chan struct{}

	hits, misses, fills, invalidations, flushes atomic.Int64
}

// Stats counts what a Cache did since New.
type Stats struct {
	Hits          int64 // Gets answered from a near copy
	Misses        int64 // Gets that went to the client
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
	now := time.Now()
	hot := nc.hot.read(key, now)
	if it, ok := nc.store.get(key, now); ok {
		nc.hits.Add(1)
		return cloneItem(it), nil
	}
	nc.misses.Add(1)
	if !hot {
		return nc.c.Get(ctx, key)
	}
	addr, err := nc.c.ServerFor(key)
	if err != nil {
		return nc.c.Get(ctx, key)
	}
	// Reserve before checking the stream: a loss after this point flushes the reservation.
	token := nc.store.reserve(key, addr)
	if token != 0 && !nc.fillable(addr) {
		nc.store.release(key, token)
		token = 0
	}
	it, err := nc.c.Get(ctx, key)
	if token == 0 {
		return it, err
	}
	if err != nil {
		nc.store.release(key, token)
		return it, err
	}
	if nc.store.install(token, cloneItem(it), now.Add(nc.cfg.TTL)) {
		nc.fills.Add(1)
	}
	return it, nil
}

// fillable reports whether copies from addr may be filled now, starting its watcher if need be.
func (nc *Cache) fillable(addr string) bool {
	nc.mu.Lock()
	w := nc.watchers[addr]
	if w == nil && !nc.closed {
		w = newWatcher(nc, addr)
		nc.watchers[addr] = w
	}
	nc.mu.Unlock()
	return w != nil && w.state.Load() != stateDown
}

// Set stores it through the client and drops key's near copy before and after, so that no read of
// this process that begins after Set returns sees the old value.
func (nc *Cache) Set(ctx context.Context, it *clientlib.Item) error {
	nc.invalidate(it.Key)
	err := nc.c.Set(ctx, it)
	nc.invalidate(it.Key)
	return err
}

// Delete deletes key through the client, dropping its near copy as Set does.
func (nc *Cache) Delete(ctx context.Context, key string) error {
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
