package shard

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// holdReader is one client's read under hold: its Waiter signals wakes on a channel.
type holdReader struct {
	w     *Waiter
	woken chan struct{}
}

func newHoldReader() *holdReader {
	r := &holdReader{woken: make(chan struct{}, 1)}
	r.w = NewWaiter(func() { r.woken <- struct{}{} })
	return r
}

// read is a get of key that may park until hold from now.
func (r *holdReader) read(s *Store, key string, hold time.Duration) (string, MissOutcome) {
	if v, _, ok := s.Get(nil, []byte(key)); ok {
		return string(v), MissHit
	}
	if r.w.Deadline == 0 {
		r.w.Deadline = time.Now().Add(hold).UnixNano()
	}
	noHeader := func(dst, _ []byte, _ uint32, _ int, _ uint64, _ bool) []byte { return dst }
	v, out := s.AppendMiss(nil, []byte(key), HashOf([]byte(key)), false, noHeader, r.w)
	if len(v) > 0 {
		v = v[:len(v)-len(blockTrailer)]
	}
	return string(v), out
}

// wait returns the reason r's parking woke, failing after a bound far above any hold used here.
func (r *holdReader) wait(t *testing.T) uint32 {
	t.Helper()
	select {
	case <-r.woken:
	case <-time.After(10 * time.Second):
		t.Fatal("a parked read never woke")
	}
	st := r.w.State()
	r.w.Reset()
	return st
}

// The rules of hold (doc/leases.md, "Grace and hold"), on the store: the first miss refills, the others
// park and wake for the write that lands the refill, a delete, flush_all or their hold time.
func TestHoldRules(t *testing.T) {
	const long = time.Minute // never reached: the test ends the hold otherwise
	cases := []struct {
		name string
		end  func(s *Store)
		want uint32
		then string // what the woken read reads then
	}{
		{"a set lands the refill", func(s *Store) { set(t, s, "k", "v") }, WokeRetry, "v"},
		{"a lease-set lands the refill", func(s *Store) {
			_, r := s.LeaseGet(nil, []byte("other")) // a token of another key is refused: nothing wakes
			require.Equal(t, NotStored, s.LeaseSet([]byte("k"), r.Token, 0, 0, []byte("x")))
			set(t, s, "k", "v")
		}, WokeRetry, "v"},
		{"a delete answers a miss", func(s *Store) { assert.Equal(t, NotFound, s.Delete([]byte("k"))) }, WokeMiss, ""},
		{"flush_all answers a miss", func(s *Store) { s.FlushAll(0) }, WokeMiss, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newStore(t, Config{Hold: long})
			refiller, parked := newHoldReader(), newHoldReader()
			_, out := refiller.read(s, "k", long)
			require.Equal(t, MissRefill, out)
			_, out = parked.read(s, "k", long)
			require.Equal(t, MissParked, out)
			_, out = newHoldReader().read(s, "unrelated", long)
			require.Equal(t, MissRefill, out, "another key has its own refill")
			tc.end(s)
			assert.Equal(t, tc.want, parked.wait(t))
			if tc.then != "" {
				v, out := parked.read(s, "k", long)
				assert.Equal(t, MissHit, out)
				assert.Equal(t, tc.then, v)
			}
			assert.Zero(t, s.parked.Load())
		})
	}
}

// A parked read whose hold time is up wakes with WokeTimeout; one taken back (its connection closed)
// never wakes; past the bound a read misses at once.
func TestHoldEnds(t *testing.T) {
	s, _ := newStore(t, Config{Hold: 50 * time.Millisecond})
	refiller, r := newHoldReader(), newHoldReader()
	_, out := refiller.read(s, "k", time.Minute)
	require.Equal(t, MissRefill, out)
	_, out = r.read(s, "k", 50*time.Millisecond)
	require.Equal(t, MissParked, out)
	assert.Equal(t, WokeTimeout, r.wait(t))
	assert.Zero(t, s.parked.Load())

	gone := newHoldReader()
	_, out = gone.read(s, "k", time.Minute)
	require.Equal(t, MissParked, out)
	assert.True(t, s.Unpark(gone.w))
	assert.False(t, s.Unpark(gone.w))
	set(t, s, "k", "v")
	select {
	case <-gone.woken:
		t.Fatal("a read taken back was woken")
	default:
	}
	assert.Zero(t, s.parked.Load())

	s.maxParked = 1
	s.Delete([]byte("k"))
	_, out = newHoldReader().read(s, "k", time.Minute)
	require.Equal(t, MissRefill, out)
	_, out = newHoldReader().read(s, "k", time.Minute)
	require.Equal(t, MissParked, out)
	_, out = newHoldReader().read(s, "k", time.Minute)
	assert.Equal(t, MissRefused, out)
}

// Readers parking, writers setting and deleting, and readers giving up (Unpark) all at once: every parked
// read wakes exactly once or is taken back, and nothing stays parked (run with -race).
func TestHoldConcurrent(t *testing.T) {
	s, _ := newStore(t, Config{Hold: 200 * time.Millisecond})
	keys := []string{"a", "b", "c"}
	done := make(chan struct{})
	var writers sync.WaitGroup
	for w := range 2 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				k := []byte(keys[(i+w)%len(keys)])
				if i%3 == 0 {
					s.Delete(k)
				} else {
					s.Store(ModeSet, k, 0, 0, []byte("v"), 0)
				}
				time.Sleep(time.Millisecond)
			}
		}()
	}
	var readers sync.WaitGroup
	for r := range 8 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			hr := newHoldReader()
			for i := range 200 {
				hr.w.Deadline = 0
				if _, out := hr.read(s, keys[(i+r)%len(keys)], 200*time.Millisecond); out != MissParked {
					continue
				}
				if i%5 == 0 && s.Unpark(hr.w) {
					hr.w.Reset()
					continue
				}
				select {
				case <-hr.woken:
					hr.w.Reset()
				case <-time.After(10 * time.Second):
					t.Error("a parked read never woke")
					return
				}
			}
		}()
	}
	readers.Wait()
	close(done)
	writers.Wait()
	assert.Zero(t, s.Parked())
}
