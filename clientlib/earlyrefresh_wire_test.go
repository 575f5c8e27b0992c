package clientlib

import (
	"bufio"
	"context"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestEarlyRefreshRequests: what GetOrFill sends to read a key, by what the server speaks, with early
// refresh off (exactly what it sent before early refresh existed) and on (the recache flag R; without
// a fill time known, R2: the item's last second). Behind a classic-only server early refresh is off.
func TestEarlyRefreshRequests(t *testing.T) {
	tests := []struct {
		name  string
		speak string // "leases", "meta" or "classic"
		beta  float64
		want  []string
	}{
		{"leases, off", "leases", 0, []string{"lease-get k"}},
		{"leases, on", "leases", 1, []string{"mg k v f c R2"}},
		{"meta, off", "meta", 0, []string{"mg k v f c N7"}},
		{"meta, on", "meta", 1, []string{"mg k v f c N7 R2"}},
		{"classic, off", "classic", 0, []string{"gets k"}},
		{"classic, on", "classic", 1, []string{"gets k"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFakeServer(t)
			var mu sync.Mutex
			var seen []string
			srv.raw = func(line string, r *bufio.Reader, w io.Writer) {
				var reply string
				switch {
				case line == "stats settings" && tt.speak == "leases":
					reply = "STAT lease_window 10s\r\nEND\r\n"
				case line == "stats settings":
					reply = "END\r\n"
				case line == "mn" && tt.speak != "classic":
					reply = "MN\r\n"
				case line == "mn":
					reply = "ERROR\r\n"
				default:
					mu.Lock()
					seen = append(seen, line)
					mu.Unlock()
					switch {
					case strings.HasPrefix(line, "mg "):
						reply = "VA 1 f0 c5\r\nx\r\n"
					default: // lease-get, gets
						reply = "VALUE k 0 1 5\r\nx\r\nEND\r\n"
					}
				}
				_, _ = io.WriteString(w, reply)
			}
			c := newTestClient(t, Config{Fill: FillOptions{EarlyRefresh: tt.beta}}, srv.addr())
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			v, err := c.GetOrFill(ctx, "k", func(context.Context, string) ([]byte, error) {
				t.Error("fill called on a hit")
				return nil, nil
			}, nil)
			require.NoError(t, err)
			require.Equal(t, Value{Data: []byte("x"), Source: SourceCache}, v)
			mu.Lock()
			defer mu.Unlock()
			require.Equal(t, tt.want, seen)
		})
	}
}

// TestRecacheSeconds: R is XFetch's lookahead delta*beta*(-ln(rand)) in whole seconds plus one, never
// below 2 (the item's last second), never above 30 days.
func TestRecacheSeconds(t *testing.T) {
	tests := []struct {
		name       string
		delta      time.Duration
		beta       float64
		lo, hi     int64 // bounds of every draw
		wantAbove2 bool  // some draws above 2 in 2000
	}{
		{"no fill time known", 0, 1, 2, 2, false},
		{"fast fill", 10 * time.Millisecond, 1, 2, 2, false},
		{"slow fill", 2 * time.Second, 1, 2, 60, true},
		{"huge", 1000 * time.Hour, 100, 2, maxRecacheSeconds, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := FillOptions{EarlyRefresh: tt.beta}
			above := false
			for range 2000 {
				r := o.recacheSeconds(tt.delta)
				require.GreaterOrEqual(t, r, tt.lo)
				require.LessOrEqual(t, r, tt.hi)
				above = above || r > 2
			}
			require.Equal(t, tt.wantAbove2, above)
		})
	}
}

// TestMetaLiveValueWithZ: on memcached, a live value another reader won the recache flag for (Z without
// X, not the empty item N creates) is a hit, whether this client refreshes early or not: nobody waits
// while another process refreshes a key early. The empty item N created is still waited for.
func TestMetaLiveValueWithZ(t *testing.T) {
	tests := []struct {
		name      string
		beta      float64
		reply     string // the first mg's reply; later ones are a plain hit "v2"
		wantData  string
		wantWaits bool
	}{
		{"live value, off", 0, "VA 1 f0 c5 Z\r\nx\r\n", "x", false},
		{"live value, on", 1, "VA 1 f0 c5 Z\r\nx\r\n", "x", false},
		{"live value with flags, off", 0, "VA 0 f3 c5 Z\r\n\r\n", "", false},
		{"N's empty item, off", 0, "VA 0 f0 c5 Z\r\n\r\n", "v2", true},
		{"N's empty item, on", 1, "VA 0 f0 c5 Z\r\n\r\n", "v2", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFakeServer(t)
			var mgs atomic.Int64
			srv.raw = func(line string, r *bufio.Reader, w io.Writer) {
				var reply string
				switch {
				case line == "stats settings":
					reply = "END\r\n"
				case line == "mn":
					reply = "MN\r\n"
				case strings.HasPrefix(line, "mg "):
					if mgs.Add(1) == 1 {
						reply = tt.reply
					} else {
						reply = "VA 2 f0 c6\r\nv2\r\n"
					}
				default:
					reply = "ERROR\r\n"
				}
				_, _ = io.WriteString(w, reply)
			}
			c := newTestClient(t, Config{Fill: FillOptions{EarlyRefresh: tt.beta}}, srv.addr())
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			v, err := c.GetOrFill(ctx, "k", func(context.Context, string) ([]byte, error) {
				t.Error("fill called")
				return nil, nil
			}, nil)
			require.NoError(t, err)
			require.Equal(t, tt.wantData, string(v.Data))
			require.Equal(t, SourceCache, v.Source)
			require.Equal(t, tt.wantWaits, c.Stats().HotMissWaits > 0)
		})
	}
}

// TestEarlyRefreshInBackground: the reader that wins an early refresh (W on a live value) returns the
// current value at once; the fill and "ms <key> <len> C<cas> T<ttl> F<flags>" run in the background, and
// Close waits for them. On leasecached (mg without N, then no lease-get) and on memcached alike.
func TestEarlyRefreshInBackground(t *testing.T) {
	for _, speak := range []string{"leases", "meta"} {
		t.Run(speak, func(t *testing.T) {
			srv := newFakeServer(t)
			var mu sync.Mutex
			var writes []string
			srv.raw = func(line string, r *bufio.Reader, w io.Writer) {
				var reply string
				switch {
				case line == "stats settings" && speak == "leases":
					reply = "STAT lease_window 10s\r\nEND\r\n"
				case line == "stats settings":
					reply = "END\r\n"
				case line == "mn":
					reply = "MN\r\n"
				case strings.HasPrefix(line, "mg "):
					reply = "VA 3 f0 c5 W\r\nold\r\n"
				case strings.HasPrefix(line, "ms "):
					n, _ := strconv.Atoi(strings.Fields(line)[2])
					data := make([]byte, n+2)
					_, _ = io.ReadFull(r, data)
					mu.Lock()
					writes = append(writes, line+" "+string(data[:n]))
					mu.Unlock()
					reply = "HD\r\n"
				default:
					reply = "ERROR\r\n"
				}
				_, _ = io.WriteString(w, reply)
			}
			c, err := New(Config{Servers: []Server{{Addr: srv.addr()}}, Fill: FillOptions{EarlyRefresh: 1, TTL: time.Minute}})
			require.NoError(t, err)
			release := make(chan struct{})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			v, err := c.GetOrFill(ctx, "k", func(context.Context, string) ([]byte, error) {
				<-release
				return []byte("new"), nil
			}, nil)
			require.NoError(t, err)
			require.Equal(t, Value{Data: []byte("old"), Source: SourceCache}, v, "the winner gets the current value at once")
			closed := make(chan struct{})
			go func() { c.Close(); close(closed) }()
			select {
			case <-closed:
				t.Fatal("Close returned while the early refresh was filling")
			case <-time.After(100 * time.Millisecond):
			}
			close(release)
			select {
			case <-closed:
			case <-time.After(3 * time.Second):
				t.Fatal("Close did not return after the refresh")
			}
			mu.Lock()
			defer mu.Unlock()
			require.Equal(t, []string{"ms k 3 C5 T60 F0 new"}, writes)
			s := c.Stats()
			require.Equal(t, uint64(1), s.EarlyRefreshes)
			require.Equal(t, uint64(1), s.LeaseSetsStored)
		})
	}
}

// TestFillTimes: a key's own last fill time, else the moving mean of this client's fills, else 0.
func TestFillTimes(t *testing.T) {
	var f fillTimes
	require.Zero(t, f.get("a"), "nothing measured")
	f.put("a", 800*time.Millisecond)
	require.Equal(t, 800*time.Millisecond, f.get("a"))
	require.Equal(t, 800*time.Millisecond, f.get("b"), "another process's key: the mean")
	f.put("c", 0)
	require.Equal(t, 700*time.Millisecond, f.get("b"), "the mean moves by 1/8 of each fill")
	require.Equal(t, 800*time.Millisecond, f.get("a"), "a key keeps its own")
	for i := range maxFillTimes {
		f.put(strconv.Itoa(i), time.Second)
	}
	require.LessOrEqual(t, len(f.m), maxFillTimes)
}
