package near

import (
	"fmt"
	"testing"
	"time"

	"github.com/leasecached/leasecached/clientlib"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func item(key, value string) *clientlib.Item {
	return &clientlib.Item{Key: key, Value: []byte(value)}
}

func fill(s *store, server, key, value string, expires time.Time) bool {
	tok := s.reserve(key, server)
	if tok == 0 {
		return false
	}
	return s.install(tok, item(key, value), expires, false)
}

func TestStoreReservation(t *testing.T) {
	now := time.Now()
	later := now.Add(time.Second)
	for _, tc := range []struct {
		name    string
		between func(s *store)
		want    bool
	}{
		{"untouched", func(*store) {}, true},
		{"invalidated", func(s *store) { s.invalidate("k") }, false},
		{"server flushed", func(s *store) { s.flush("a") }, false},
		{"all flushed", func(s *store) { s.flush("") }, false},
		{"other server flushed", func(s *store) { s.flush("b") }, true},
		{"other key invalidated", func(s *store) { s.invalidate("j") }, true},
		{"invalidated and reserved again", func(s *store) { s.invalidate("k"); s.reserve("k", "a") }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(10, 1<<20)
			tok := s.reserve("k", "a")
			require.NotZero(t, tok)
			assert.Zero(t, s.reserve("k", "a"), "a second reader does not reserve")
			tc.between(s)
			assert.Equal(t, tc.want, s.install(tok, item("k", "v"), later, false))
			it, ok := s.get("k", now, false)
			assert.Equal(t, tc.want, ok)
			if ok {
				assert.Equal(t, "v", string(it.Value))
			}
		})
	}
}

func TestStoreExpiry(t *testing.T) {
	s := newStore(10, 1<<20)
	now := time.Now()
	require.True(t, fill(s, "a", "k", "v", now.Add(time.Second)))
	_, ok := s.get("k", now.Add(999*time.Millisecond), false)
	assert.True(t, ok)
	_, ok = s.get("k", now.Add(time.Second), false)
	assert.False(t, ok)
	n, b := s.len()
	assert.Zero(t, n)
	assert.Zero(t, b)
}

func TestStoreBounds(t *testing.T) {
	exp := time.Now().Add(time.Hour)
	for _, tc := range []struct {
		name                  string
		maxEntries, maxBytes  int
		keys, valueLen        int
		wantMaxN, wantMaxSize int
	}{
		{"entries", 8, 1 << 20, 100, 10, 8, 1 << 20},
		{"bytes", 1000, 16 * 100, 100, 90, 1000, 16 * 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(tc.maxEntries, tc.maxBytes)
			for i := 0; i < tc.keys; i++ {
				key := fmt.Sprintf("k%03d", i)
				fill(s, "a", key, string(make([]byte, tc.valueLen)), exp)
				n, b := s.len()
				require.LessOrEqual(t, n, tc.wantMaxN)
				require.LessOrEqual(t, b, tc.wantMaxSize)
			}
			n, _ := s.len()
			assert.Positive(t, n)
		})
	}
}

func TestStoreRefusesLargeValue(t *testing.T) {
	s := newStore(10, 1600)
	assert.False(t, fill(s, "a", "k", string(make([]byte, 100)), time.Now().Add(time.Hour)))
	n, b := s.len()
	assert.Zero(t, n)
	assert.Zero(t, b)
}
