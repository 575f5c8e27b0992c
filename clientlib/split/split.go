package split

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasecached/leasecached/clientlib"
	"github.com/leasecached/leasecached/clientlib/internal/placement"
)

// Client splits hot keys over a clientlib.Client. Keys it does not split pass straight through. It is
// safe for concurrent use.
type Client struct {
	c   *clientlib.Client
	cfg Config

	cur atomic.Pointer[table]
	mu  sync.Mutex          // serialises table rebuilds
	hot map[string]struct{} // keys the last poll found hot; guarded by mu

	stopPoll chan struct{}
	pollDone chan struct{}
	stopOnce sync.Once

	replicaReads, fallbacks, copied, failedCopies atomic.Int64
}

// Stats counts what a Client did since New.
type Stats struct {
	SplitKeys    int   // keys split now
	ReplicaReads int64 // reads sent to a replica (copy 1..N-1) rather than to the key itself
	Fallbacks    int64 // Gets whose replica missed or failed and were answered by the key itself
	Copied       int64 // replicas a Get wrote back from the key after they missed
	FailedCopies int64 // copies a Set, Delete or Touch did not reach (a miss is not a failure)
}

// New returns a Client over c. It starts polling "stats hotkeys" when cfg.HotKeysPoll is positive.
// A key of cfg.Keys that is not a valid key, or too long to name its copies, is an error.
func New(c *clientlib.Client, cfg Config) (*Client, error) {
	cfg = cfg.withDefaults()
	for _, k := range cfg.Keys {
		if _, err := c.ServerFor(k); errors.Is(err, clientlib.ErrMalformedKey) {
			return nil, fmt.Errorf("split: key %q: %w", k, err)
		}
		if len(k)+len(Suffix)+len(fmt.Sprint(maxCandidates)) > clientlib.MaxKeyLength {
			return nil, fmt.Errorf("split: key %q is too long to name its copies", k)
		}
		if baseOf(k) != k {
			return nil, fmt.Errorf("split: key %q is named as a copy of %q", k, baseOf(k))
		}
	}
	s := &Client{c: c, cfg: cfg, stopPoll: make(chan struct{}), pollDone: make(chan struct{})}
	s.cur.Store(buildTable(placement.Of(c), cfg.Copies, cfg.Keys, nil))
	if cfg.HotKeysPoll > 0 {
		go s.pollHotKeys()
	} else {
		close(s.pollDone)
	}
	return s, nil
}

// Close stops the hot-keys poll. It does not close the client.
func (s *Client) Close() error {
	s.stopOnce.Do(func() { close(s.stopPoll) })
	<-s.pollDone
	return nil
}

// table returns the current table, rebuilt first if the client's server list changed.
func (s *Client) table() *table {
	t := s.cur.Load()
	if r := placement.Of(s.c); t.ring != r {
		s.mu.Lock()
		if t = s.cur.Load(); t.ring != r {
			t = buildTable(r, s.cfg.Copies, s.cfg.Keys, s.hot)
			s.cur.Store(t)
		}
		s.mu.Unlock()
	}
	return t
}

// lookup returns key's copies, or nil when key is not split.
func (s *Client) lookup(key string) *entry { return s.table().keys[key] }

// Copies returns the names of key's copies, the key itself first: just the key when it is not split.
func (s *Client) Copies(key string) []string {
	if e := s.lookup(key); e != nil {
		return append([]string(nil), e.names...)
	}
	return []string{key}
}

// Stats returns the Client's counts.
func (s *Client) Stats() Stats {
	return Stats{
		SplitKeys:    len(s.table().keys),
		ReplicaReads: s.replicaReads.Load(),
		Fallbacks:    s.fallbacks.Load(),
		Copied:       s.copied.Load(),
		FailedCopies: s.failedCopies.Load(),
	}
}

// pick returns the copy a read goes to: one at random, so a process's reads of the key spread over
// every copy (a fixed copy per process would leave the spread to the number of processes).
func (s *Client) pick(e *entry) int {
	i := rand.IntN(len(e.names))
	if i > 0 {
		s.replicaReads.Add(1)
	}
	return i
}

// replicaTTL is the TTL a replica is written with for a write of ttl (0: never expires).
func (s *Client) replicaTTL(e *entry, ttl time.Duration) time.Duration {
	limit := s.cfg.ReplicaTTL
	if limit <= 0 && e.hot {
		limit = DefaultReplicaTTL
	}
	if limit > 0 && (ttl <= 0 || ttl > limit) {
		return limit
	}
	return ttl
}

// Get returns key's item from one of its copies. A replica that misses or fails is answered by the
// key itself (Stats.Fallbacks); a miss there is ErrCacheMiss. A replica that missed gets the key's
// value back with add (never over a value a writer stored meanwhile), living ReplicaTTL (default
// DefaultReplicaTTL): Get does not know how long the value has left, nor can it see a delete that
// raced with it, so the copy it makes lives briefly. The item's Key is key and, for a split key, its
// CAS is 0: a CAS value of one copy means nothing for the others.
func (s *Client) Get(ctx context.Context, key string) (*clientlib.Item, error) {
	e := s.lookup(key)
	if e == nil {
		return s.c.Get(ctx, key)
	}
	i := s.pick(e)
	it, err := s.c.Get(ctx, e.names[i])
	if i > 0 && err != nil && ctx.Err() == nil {
		s.fallbacks.Add(1)
		missed := errors.Is(err, clientlib.ErrCacheMiss)
		it, err = s.c.Get(ctx, key)
		if err == nil && missed {
			ttl := s.cfg.ReplicaTTL
			if ttl <= 0 {
				ttl = DefaultReplicaTTL
			}
			cp := clientlib.Item{Key: e.names[i], Value: it.Value, Flags: it.Flags, TTL: ttl}
			if s.c.Add(ctx, &cp) == nil {
				s.copied.Add(1)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	it.Key, it.CAS = key, 0
	return it, nil
}

// GetOrFill is clientlib's GetOrFill over one of key's copies. A replica is filled, under its own
// lease, from GetOrFill of the key itself with fill and opts: the fleet calls fill once per expiry of
// the key itself, and each replica reads the key once per expiry of the replica. A value read through
// a replica may therefore be up to its TTL older than the key's (doc/design/key-splitting.md), it
// carries opts' Flags, and its Source is that of the copy read (SourceFill for a replica filled from
// the key, although the source was not called).
func (s *Client) GetOrFill(ctx context.Context, key string, fill clientlib.FillFunc, opts *clientlib.FillOptions) (clientlib.Value, error) {
	e := s.lookup(key)
	if e == nil {
		return s.c.GetOrFill(ctx, key, fill, opts)
	}
	i := s.pick(e)
	if i == 0 {
		return s.c.GetOrFill(ctx, key, fill, opts)
	}
	ropts := opts
	if limit := s.replicaTTL(e, 0); limit > 0 {
		o := clientlib.FillOptions{}
		if opts != nil {
			o = *opts
		}
		if o.TTL <= 0 || o.TTL > limit {
			o.TTL = limit
		}
		ropts = &o
	}
	fromBase := func(ctx context.Context, _ string) ([]byte, error) {
		v, err := s.c.GetOrFill(ctx, key, fill, opts)
		return v.Data, err
	}
	return s.c.GetOrFill(ctx, e.names[i], fromBase, ropts)
}

// Set writes it to every copy of its key, the key itself first (replicas with their TTL capped as
// Config.ReplicaTTL says). A copy that fails does not stop the others; the error joins each failure.
func (s *Client) Set(ctx context.Context, it *clientlib.Item) error {
	e := s.lookup(it.Key)
	if e == nil {
		return s.c.Set(ctx, it)
	}
	return s.each(e, func(i int, name string) error {
		cp := *it
		cp.Key, cp.CAS = name, 0
		if i > 0 {
			cp.TTL = s.replicaTTL(e, it.TTL)
		}
		return s.c.Set(ctx, &cp)
	}, false)
}

// Delete deletes every copy of key. It returns ErrCacheMiss only when no copy was there.
func (s *Client) Delete(ctx context.Context, key string) error {
	e := s.lookup(key)
	if e == nil {
		return s.c.Delete(ctx, key)
	}
	return s.each(e, func(_ int, name string) error { return s.c.Delete(ctx, name) }, true)
}

// Touch sets the TTL of every copy of key. A replica's miss is no error (it is filled from the key
// itself when read); the key's own miss is ErrCacheMiss.
func (s *Client) Touch(ctx context.Context, key string, ttl time.Duration) error {
	e := s.lookup(key)
	if e == nil {
		return s.c.Touch(ctx, key, ttl)
	}
	return s.each(e, func(i int, name string) error {
		if i == 0 {
			return s.c.Touch(ctx, name, ttl)
		}
		if err := s.c.Touch(ctx, name, s.replicaTTL(e, ttl)); !errors.Is(err, clientlib.ErrCacheMiss) {
			return err
		}
		return nil
	}, false)
}

// each runs op on every copy in order and joins the failures, naming each copy. ErrCacheMiss is an
// answer, not a failure: with allMiss, it is returned when every copy missed; otherwise a miss of
// copy 0 is returned as is.
func (s *Client) each(e *entry, op func(i int, name string) error, allMiss bool) error {
	var errs []error
	misses := 0
	for i, name := range e.names {
		err := op(i, name)
		switch {
		case err == nil:
		case errors.Is(err, clientlib.ErrCacheMiss):
			misses++
			if !allMiss && i == 0 {
				errs = append(errs, err)
			}
		default:
			s.failedCopies.Add(1)
			errs = append(errs, fmt.Errorf("split: copy %d (%s): %w", i, name, err))
		}
	}
	if allMiss && misses == len(e.names) {
		return clientlib.ErrCacheMiss
	}
	if len(errs) == 1 {
		return errs[0]
	}
	return errors.Join(errs...)
}

// CompareAndSwap is the client's, refused with ErrSplitKey for a split key.
func (s *Client) CompareAndSwap(ctx context.Context, it *clientlib.Item) error {
	if s.lookup(it.Key) != nil {
		return ErrSplitKey
	}
	return s.c.CompareAndSwap(ctx, it)
}

// Increment is the client's, refused with ErrSplitKey for a split key.
func (s *Client) Increment(ctx context.Context, key string, delta uint64) (uint64, error) {
	if s.lookup(key) != nil {
		return 0, ErrSplitKey
	}
	return s.c.Increment(ctx, key, delta)
}

// Decrement is the client's, refused with ErrSplitKey for a split key.
func (s *Client) Decrement(ctx context.Context, key string, delta uint64) (uint64, error) {
	if s.lookup(key) != nil {
		return 0, ErrSplitKey
	}
	return s.c.Decrement(ctx, key, delta)
}
