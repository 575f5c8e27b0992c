package shard

import (
	"sync/atomic"
	"testing"
	"time"
)

// clock is an injectable Config.Now.
type clock struct{ t atomic.Int64 }

func newClock() *clock             { c := &clock{}; c.t.Store(1_700_000_000); return c }
func (c *clock) now() int64        { return c.t.Load() }
func (c *clock) advance(sec int64) { c.t.Add(sec) }

func newStore(t testing.TB, cfg Config) (*Store, *clock) {
	t.Helper()
	c := newClock()
	if cfg.Now == nil {
		cfg.Now = c.now
	}
	if cfg.NowNano == nil {
		cfg.NowNano = func() int64 { return c.now() * int64(time.Second) }
	}
	if cfg.MemoryLimit == 0 {
		cfg.MemoryLimit = 64 << 20
	}
	if cfg.ReclaimInterval == 0 {
		cfg.ReclaimInterval = -1 // tests drive the reclaimer explicitly
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, c
}

func mustGet(t testing.TB, s *Store, key string) (string, Info) {
	t.Helper()
	v, info, ok := s.Get(nil, []byte(key))
	if !ok {
		t.Fatalf("get %q: miss", key)
	}
	return string(v), info
}

func miss(t testing.TB, s *Store, key string) {
	t.Helper()
	if v, _, ok := s.Get(nil, []byte(key)); ok {
		t.Fatalf("get %q: hit %q, want miss", key, v)
	}
}

func set(t testing.TB, s *Store, key, val string) {
	t.Helper()
	if r := s.Store(ModeSet, []byte(key), 0, 0, []byte(val), 0); r != Stored {
		t.Fatalf("set %q: %v", key, r)
	}
}

// pattern is a deterministic value of n bytes that differs per seed.
func pattern(n, seed int) []byte {
	b := make([]byte, n)
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

func sleepMs(n int) { time.Sleep(time.Duration(n) * time.Millisecond) }
