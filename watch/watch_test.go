package watch

import (
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseFlags(t *testing.T) {
	cases := []struct {
		args string
		want Flags
		ok   bool
	}{
		{"", Fetchers, true},
		{"fetchers", Fetchers, true},
		{"mutations evictions", Mutations | Evictions, true},
		{"connevents deletions fetchers", ConnEvents | Deletions | Fetchers, true},
		{"sysevents rawcmds proxyreqs proxyevents proxyuser", SysEvents | RawCmds | ProxyReqs | ProxyEvents | ProxyUser, true},
		{"fetchers bogus", 0, false},
		{"noreply", 0, false},
		{"Fetchers", 0, false}, // memcached compares case-sensitively
	}
	for _, c := range cases {
		var args [][]byte
		for _, a := range strings.Fields(c.args) {
			args = append(args, []byte(a))
		}
		got, ok := ParseFlags(args)
		assert.Equal(t, c.ok, ok, c.args)
		assert.Equal(t, c.want, got, c.args)
	}
}

// line logs one line of kind f with body through s.
func line(s *Sink, f Flags, body string) bool {
	b := s.Begin(f)
	if b == nil {
		return false
	}
	s.End(append(append(b, body...), '\n'))
	return true
}

// reader is a watcher's connection in a test: woken, it takes the lines unless stalled.
type reader struct {
	mu      sync.Mutex
	w       *Watcher
	stalled bool
	got     strings.Builder
}

func (r *reader) wake() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.w != nil {
		r.got.Write(r.w.Take(r.stalled))
	}
}

func (r *reader) text() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got.String()
}

func addReader(t *testing.T, h *Hub, f Flags) *reader {
	r := &reader{}
	r.mu.Lock()
	w, err := h.Add(f, r.wake)
	require.NoError(t, err)
	r.w = w
	r.mu.Unlock()
	t.Cleanup(func() { h.Remove(w) })
	return r
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

var prefix = regexp.MustCompile(`^ts=\d+\.\d{1,6} gid=(\d+) `)

// Each watcher sees the kinds it asked for, from the moment it was added, with memcached's prefix; lines logged before it came are not its.
func TestRouting(t *testing.T) {
	h := NewHub()
	s := h.NewSink()
	assert.False(t, h.On(Fetchers))
	line(s, Fetchers, "type=before")
	fetch := addReader(t, h, Fetchers)
	both := addReader(t, h, Fetchers|Mutations)
	assert.True(t, h.On(Fetchers|Mutations))
	assert.False(t, h.On(Evictions))
	line(s, Fetchers, "type=item_get key=a")
	line(h.Shared(), Mutations, "type=item_store key=b")
	waitFor(t, "both lines", func() bool { return strings.Count(both.text(), "\n") == 2 })
	waitFor(t, "the fetch line", func() bool { return strings.Count(fetch.text(), "\n") == 1 })
	assert.NotContains(t, fetch.text(), "before")
	assert.NotContains(t, fetch.text(), "item_store")
	// Lines of different sinks may come out of gid order, as in memcached; each has its own gid.
	gids := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSuffix(both.text(), "\n"), "\n") {
		m := prefix.FindStringSubmatch(l)
		require.NotNil(t, m, l)
		assert.False(t, gids[m[1]], l)
		gids[m[1]] = true
	}
	st := h.Stats()
	assert.Equal(t, 2, st.Watchers)
	assert.EqualValues(t, 3, st.WatcherSent) // one line to fetch, two to both
	assert.EqualValues(t, 3, st.WorkerWritten)
}

// A watcher that cannot keep up loses lines, counted as skipped, and is told how many before the next line
// it gets (memcached's "skipped=N"); its buffer never exceeds WatcherBufSize.
func TestSkipped(t *testing.T) {
	h := NewHub()
	s := h.NewSink()
	r := addReader(t, h, Fetchers)
	r.mu.Lock()
	r.stalled = true
	r.mu.Unlock()
	body := "type=item_get key=" + strings.Repeat("k", 200)
	n := 0
	waitFor(t, "skipped lines", func() bool {
		for range 100 {
			if line(s, Fetchers, body) {
				n++
			}
		}
		return h.Stats().WatcherSkipped > 0
	})
	// Lines differ by a few bytes (the timestamp's digits), so a line may still fit after a skip. This one
	// is longer than the room any skip leaves: the watcher owes a skipped= line for it.
	logged(t, s, "type=item_get key="+strings.Repeat("k", 1500))
	n++
	waitFor(t, "the collector to offer every line", func() bool {
		st := h.Stats()
		return st.WatcherSent+st.WatcherSkipped == uint64(n)
	})
	r.w.mu.Lock()
	assert.LessOrEqual(t, len(r.w.pend), WatcherBufSize)
	r.w.mu.Unlock()
	r.mu.Lock()
	r.stalled = false
	r.mu.Unlock()
	// A line that came while the buffer was still full would be skipped too (as in memcached).
	waitFor(t, "the watcher to take its lines", func() bool { return r.text() != "" && !r.w.pending() })
	logged(t, s, "type=after")
	waitFor(t, "the line after the skips", func() bool { return strings.Contains(r.text(), "type=after") })
	st := h.Stats()
	text := r.text()
	tail := text[max(0, len(text)-2*MaxLine):]
	require.Regexp(t, `(?m)^skipped=\d+\n[^\n]* type=after\n\z`, tail, "no skipped= line before the next line")
	var sent, skipped uint64
	for l := range strings.SplitSeq(strings.TrimSuffix(text, "\n"), "\n") {
		if v, ok := strings.CutPrefix(l, "skipped="); ok {
			k, err := strconv.ParseUint(v, 10, 64)
			require.NoError(t, err, l)
			skipped += k
			continue
		}
		require.Regexp(t, prefix, l)
		sent++
	}
	assert.Equal(t, st.WatcherSkipped, skipped)
	assert.Equal(t, st.WatcherSent, sent)
	assert.EqualValues(t, n+1, st.WatcherSent+st.WatcherSkipped)
}

// logged logs one line of Fetchers through s, retrying while the sink is full (the collector empties it).
func logged(t *testing.T, s *Sink, body string) {
	t.Helper()
	waitFor(t, "room in the sink", func() bool { return line(s, Fetchers, body) })
}

// A sink that nobody empties drops what does not fit, counted as log_worker_dropped, and never grows.
func TestSinkDrops(t *testing.T) {
	h := NewHub()
	s := h.NewSink()
	body := strings.Repeat("x", 100)
	written := 0
	for range 2 * WorkerBufSize / len(body) {
		if line(s, Fetchers, body) {
			written++
		}
	}
	assert.Equal(t, WorkerBufSize, cap(s.buf))
	assert.Positive(t, s.dropped)
	assert.EqualValues(t, written, s.written)
	// The gid counts only the lines written, as memcached takes one only for an entry that fits.
	assert.EqualValues(t, written, h.gid.Load())
}

// At most MaxWatchers watch; a removed watcher gets nothing more, and the collector ends with the last one.
func TestAddRemove(t *testing.T) {
	h := NewHub()
	var ws []*Watcher
	for range MaxWatchers {
		w, err := h.Add(Fetchers, func() {})
		require.NoError(t, err)
		ws = append(ws, w)
	}
	_, err := h.Add(Fetchers, func() {})
	assert.ErrorIs(t, err, ErrTooMany)
	for _, w := range ws {
		h.Remove(w)
	}
	assert.False(t, h.On(Fetchers))
	assert.Zero(t, h.Stats().Watchers)
	waitFor(t, "the collector to end", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return !h.running
	})
}

// Logging a line allocates nothing once the sink has its buffer.
func TestBeginEndAllocatesNothing(t *testing.T) {
	h := NewHub()
	s := h.NewSink()
	log := func() {
		if !line(s, Fetchers, "type=item_get key=k status=found") {
			s.mu.Lock()
			s.buf = s.buf[:0]
			s.mu.Unlock()
		}
	}
	log()
	assert.Zero(t, testing.AllocsPerRun(1000, log))
}

// A line logged while the collector sleeps out a quiet spell wakes it (End kicks it), so it is collected
// at once, not after the collector's longest sleep. The collector may also wake by itself between the
// test seeing it idle and logging: so a few tries, each of which must end with the line collected.
func TestIdleCollectorIsKicked(t *testing.T) {
	h := NewHub()
	s := h.NewSink()
	r := addReader(t, h, Fetchers)
	kicked := false
	for i := 0; i < 20 && !kicked; i++ {
		waitFor(t, "the collector to go idle", h.idle.Load)
		before := h.kicks.Load()
		line(s, Fetchers, "type=item_get key=k"+strconv.Itoa(i))
		kicked = h.kicks.Load() == before+1
		waitFor(t, "the line", func() bool { return strings.Contains(r.text(), "key=k"+strconv.Itoa(i)+"\n") })
	}
	assert.True(t, kicked, "no line logged while the collector was idle woke it")
}
