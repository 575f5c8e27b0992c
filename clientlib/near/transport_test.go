package near

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/leasecached/leasecached/clientlib"
	"github.com/leasecached/leasecached/internal/testcert"
	"github.com/stretchr/testify/require"
)

// The watch connection carries the client's own TLS and -Y credentials: a near-cache over a client
// configured for a TLS or -Y server gets its stream (and so its invalidations) with no settings of its
// own. Without them the stream fails (TLS: no handshake) or is refused (-Y: unauthenticated), and the
// copy is never invalidated by a write from another client.
func TestWatchUsesClientTLSAndAuth(t *testing.T) {
	certs := testcert.New(t)
	users := filepath.Join(t.TempDir(), "users")
	require.NoError(t, os.WriteFile(users, []byte("alice:s3cret\n"), 0o600))
	tlsFlags := []string{"-Z", "-o", "ssl_chain_cert=" + certs.Server.CertFile + ",ssl_key=" + certs.Server.KeyFile}
	for _, tc := range []struct {
		name  string
		flags []string
		tls   bool
		user  string
	}{
		{"TLS", tlsFlags, true, ""},
		{"-Y", []string{"-Y", users}, false, "alice"},
		{"TLS and -Y", append(append([]string{}, tlsFlags...), "-Y", users), true, "alice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := startDaemon(t, "leasecached", leasecachedBin(t), func(port int) []string {
				return append(leasecachedArgs(port), tc.flags...)
			}, 0)
			cfg := clientlib.Config{Servers: []clientlib.Server{{Addr: d.Addr}}}
			if tc.tls {
				tlsCfg, err := certs.ClientConfig(nil)
				require.NoError(t, err)
				cfg.TLS = tlsCfg
			}
			if tc.user != "" {
				cfg.Username, cfg.Password = tc.user, "s3cret"
			}
			newCfgClient := func() *clientlib.Client {
				c, err := clientlib.New(cfg)
				require.NoError(t, err)
				t.Cleanup(func() { c.Close() })
				return c
			}
			writer := newCfgClient()
			nc := newNear(t, newCfgClient(), Config{TTL: longTTL, HotReads: 2, HotKeysPoll: -1})
			for i := 0; i < 3; i++ {
				v := "v" + strconv.Itoa(i)
				set(t, writer, "k", v)
				require.Eventually(t, func() bool {
					it, err := nc.Get(t.Context(), "k")
					return err == nil && string(it.Value) == v && copied(nc, "k")
				}, 5*time.Second, time.Millisecond, "a copy of %s", v)
				require.Equal(t, stateFull, nc.watcherOf(d.Addr).state.Load(), "the stream is up, with deletions")
			}
			set(t, writer, "k", "last")
			require.Eventually(t, func() bool { return !copied(nc, "k") }, 5*time.Second, time.Millisecond,
				"the watch line drops the copy")
		})
	}
}

// watcherOf returns nc's watcher of addr, nil if none.
func (nc *Cache) watcherOf(addr string) *watcher {
	nc.mu.Lock()
	defer nc.mu.Unlock()
	return nc.watchers[addr]
}
