package near

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scripted is a fake server for the watch connection: each accepted connection is handed to the
// test through conns, after the server has answered its watch commands with replies in turn.
type scripted struct {
	ln    net.Listener
	conns chan net.Conn
}

func newScripted(t *testing.T, replies ...string) *scripted {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &scripted{ln: ln, conns: make(chan net.Conn, 16)}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r := bufio.NewReader(c)
			for _, rep := range replies {
				if _, err := r.ReadString('\n'); err != nil {
					break
				}
				_, _ = c.Write([]byte(rep + "\r\n"))
			}
			s.conns <- c
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return s
}

func (s *scripted) next(t *testing.T) net.Conn {
	t.Helper()
	select {
	case c := <-s.conns:
		t.Cleanup(func() { c.Close() })
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("the watcher did not connect")
		return nil
	}
}

// bareCache has no client: its watchers dial the scripted server with a plain net.Dialer.
func bareCache() *Cache {
	cfg := Config{DialContext: (&net.Dialer{}).DialContext}.withDefaults()
	return &Cache{cfg: cfg, store: newStore(cfg.MaxEntries, cfg.MaxBytes)}
}

func waitState(t *testing.T, w *watcher, want int32) {
	t.Helper()
	require.Eventually(t, func() bool { return w.state.Load() == want }, 5*time.Second, time.Millisecond)
}

func TestWatcherModes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		replies []string
		want    int32
	}{
		{"deletions accepted", []string{"OK"}, stateFull},
		{"deletions refused, as memcached 1.6.18", []string{"ERROR", "OK"}, stateMutations},
		{"watch refused", []string{"ERROR", "ERROR"}, stateTTLOnly},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newScripted(t, tc.replies...)
			w := newWatcher(bareCache(), srv.ln.Addr().String())
			defer w.stop()
			waitState(t, w, tc.want)
		})
	}
}

func TestWatcherLines(t *testing.T) {
	srv := newScripted(t, "OK")
	nc := bareCache()
	addr := srv.ln.Addr().String()
	w := newWatcher(nc, addr)
	defer w.stop()
	conn := srv.next(t)
	waitState(t, w, stateFull)
	exp := time.Now().Add(time.Hour)

	for _, tc := range []struct {
		name  string
		line  string
		after []string // keys still copied after the line
	}{
		{"set of one key", "ts=1.1 gid=1 type=item_store key=a%3Ab status=stored cmd=set ttl=0 clsid=1 cfd=9 size=1", []string{"c", "other"}},
		{"delete of one key", "ts=1.1 gid=2 type=deleted key=c cmd=delete clsid=1 size=1", []string{"a:b", "other"}},
		{"skipped lines", "skipped=7", []string{"other"}},
		{"flush_all", "ts=1.1 gid=3 type=flush_all delay=0 cfd=9", []string{"other"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc.store.flush("")
			for _, k := range []string{"a:b", "c"} {
				require.True(t, fill(nc.store, addr, k, "v", exp))
			}
			require.True(t, fill(nc.store, "elsewhere:1", "other", "v", exp))
			_, err := conn.Write([]byte(tc.line + "\r\n"))
			require.NoError(t, err)
			require.Eventually(t, func() bool { n, _ := nc.store.len(); return n == len(tc.after) },
				5*time.Second, time.Millisecond)
			for _, k := range tc.after {
				_, ok := nc.store.get(k, time.Now(), false)
				assert.True(t, ok, k)
			}
			assert.Equal(t, stateFull, w.state.Load(), "the stream stays up")
		})
	}
}

func TestWatcherLossFlushesAndReconnects(t *testing.T) {
	srv := newScripted(t, "OK")
	nc := bareCache()
	addr := srv.ln.Addr().String()
	w := newWatcher(nc, addr)
	defer w.stop()
	exp := time.Now().Add(time.Hour)
	for round := 0; round < 3; round++ {
		conn := srv.next(t)
		waitState(t, w, stateFull)
		nc.store.invalidate("other")
		require.True(t, fill(nc.store, addr, "k", "v", exp))
		require.True(t, fill(nc.store, "elsewhere:1", "other", "v", exp))
		require.NoError(t, conn.Close())
		require.Eventually(t, func() bool { _, ok := nc.store.get("k", time.Now(), false); return !ok },
			5*time.Second, time.Millisecond, "round %d: the lost stream's copies are flushed", round)
		_, ok := nc.store.get("other", time.Now(), false)
		assert.True(t, ok, "another server's copies stay")
	}
	srv.next(t) // and it reconnects again
	waitState(t, w, stateFull)
}
