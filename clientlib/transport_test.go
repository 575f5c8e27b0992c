package clientlib_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/leasecached/leasecached/clientlib"
	"github.com/leasecached/leasecached/internal/testcert"
	"github.com/leasecached/leasecached/internal/testdaemon"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The client over TLS (Config.TLS, or a Config.DialContext that returns TLS connections) and over Unix sockets (an address that is a path), against memcached
// 1.6.18 (-Z, -s) and leasecached started the same way.

// transportBackends start a server with extra arguments; ready, when not nil, replaces the check that the
// TCP port accepts (a server on a Unix socket only).
var transportBackends = []struct {
	name  string
	start func(t testing.TB, ready func(string) error, extra ...string) *proc
}{
	{"memcached", func(t testing.TB, ready func(string) error, extra ...string) *proc {
		bin := requireBinary(t, "memcached")
		return startSpec(t, testdaemon.Spec{Name: "memcached", Path: bin, Ready: ready, Args: func(port int) []string {
			return append([]string{"-u", memcachedUser(), "-l", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "0", "-m", serverMemMB}, extra...)
		}})
	}},
	{"leasecached", func(t testing.TB, ready func(string) error, extra ...string) *proc {
		bin := leasecachedBinary(t)
		return startSpec(t, testdaemon.Spec{Name: "leasecached", Path: bin, Ready: ready, Args: func(port int) []string {
			return append([]string{"-p", strconv.Itoa(port), "-l", "127.0.0.1", "-m", serverMemMB, "-t", "2"}, extra...)
		}})
	}},
}

// memcachedUser is who memcached runs as: the test's certificates and sockets live in t.TempDir(), mode
// 0700, which "nobody" cannot enter; memcached refuses root unless named.
func memcachedUser() string {
	if os.Geteuid() == 0 {
		return "root"
	}
	return "nobody" // ignored by memcached when not started as root
}

func startSpec(t testing.TB, spec testdaemon.Spec) *proc {
	t.Helper()
	spec.Output, spec.StartTimeout = os.Stderr, startTimeout
	d, err := testdaemon.Start(context.Background(), spec)
	require.NoError(t, err)
	p := &proc{Addr: d.Addr, Port: d.Port, d: d}
	t.Cleanup(p.Kill)
	return p
}

// socketReady is a readiness check for a server on the Unix socket sock.
func socketReady(sock string) func(string) error {
	return func(string) error {
		c, err := net.DialTimeout("unix", sock, time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	}
}

// startMemcachedSocket starts memcached serving only the Unix socket sock; Addr is the socket's path.
func startMemcachedSocket(t testing.TB, sock string) *proc {
	t.Helper()
	p := transportBackends[0].start(t, socketReady(sock), "-s", sock)
	p.Addr = sock
	return p
}

// Mutual TLS (ssl_verify_mode=2): the client with a certificate signed by the server's CA works, values
// larger than a TLS record included; without a certificate, or trusting another CA, it fails on the
// connection (not with a server error), and the reason is visible to errors.As.
func TestTLSTransport(t *testing.T) {
	certs := testcert.New(t)
	flags := []string{"-Z", "-o", "ssl_chain_cert=" + certs.Server.CertFile + ",ssl_key=" + certs.Server.KeyFile +
		",ssl_ca_cert=" + certs.CA.CertFile + ",ssl_verify_mode=2"}
	for _, be := range transportBackends {
		t.Run(be.name, func(t *testing.T) {
			p := be.start(t, nil, flags...)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()

			t.Run("client certificate", func(t *testing.T) {
				cfg, err := certs.ClientConfig(certs.Client)
				require.NoError(t, err)
				// ServerName is left for the client to take from the address: with none, crypto/tls refuses
				// to verify the server at all.
				cfg.ServerName = ""
				c := newClient(t, clientlib.Config{TLS: cfg}, p.Addr)
				exerciseTransport(t, ctx, c)
			})
			t.Run("DialContext", func(t *testing.T) {
				// A custom dialer that speaks TLS itself (gomemcache's Client.DialContext), Config.TLS nil.
				cfg, err := certs.ClientConfig(certs.Client)
				require.NoError(t, err)
				c := newClient(t, clientlib.Config{DialContext: (&tls.Dialer{Config: cfg}).DialContext}, p.Addr)
				exerciseTransport(t, ctx, c)
				v, err := c.GetOrFill(ctx, "filled", func(context.Context, string) ([]byte, error) { return []byte("f"), nil }, nil)
				require.NoError(t, err)
				require.Equal(t, "f", string(v.Data))
				require.NoError(t, c.Ping(ctx))
			})
			t.Run("no client certificate", func(t *testing.T) {
				cfg, err := certs.ClientConfig(nil)
				require.NoError(t, err)
				c := newClient(t, clientlib.Config{TLS: cfg}, p.Addr)
				err = c.Set(ctx, &clientlib.Item{Key: "k", Value: []byte("v")})
				require.Error(t, err)
				assert.NotErrorIs(t, err, clientlib.ErrServerError, "the connection failed; no server reply")
			})
			t.Run("server from an unknown CA", func(t *testing.T) {
				cfg, err := certs.ClientConfig(certs.Client)
				require.NoError(t, err)
				cfg.RootCAs = certs.OtherCA.Pool()
				c := newClient(t, clientlib.Config{TLS: cfg}, p.Addr)
				err = c.Set(ctx, &clientlib.Item{Key: "k", Value: []byte("v")})
				var unknown x509.UnknownAuthorityError
				require.ErrorAs(t, err, &unknown, "the dial error carries the verification failure: %v", err)
			})
			t.Run("plaintext client", func(t *testing.T) {
				c := newClient(t, clientlib.Config{Timeout: 300 * time.Millisecond}, p.Addr)
				_, err := c.Get(ctx, "k")
				require.Error(t, err, "a plaintext client on a TLS port gets no reply")
			})
		})
	}
}

// A Unix socket (-s PATH -a 0700): the client dials the path, and ServerFor names it.
func TestUnixSocketTransport(t *testing.T) {
	for _, be := range transportBackends {
		t.Run(be.name, func(t *testing.T) {
			sock := filepath.Join(t.TempDir(), "mc.sock")
			be.start(t, socketReady(sock), "-s", sock, "-a", "0700")
			c := newClient(t, clientlib.Config{}, sock)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			exerciseTransport(t, ctx, c)
			addr, err := c.ServerFor("any")
			require.NoError(t, err)
			assert.Equal(t, sock, addr)
		})
	}
}

// Placement over a mix of TCP and socket servers depends only on the addresses: two clients agree, and
// the socket's point on the ring is its path's (ketama.NodeName), not a resolved address.
func TestUnixSocketPlacementStable(t *testing.T) {
	servers := []clientlib.Server{{Addr: "/run/a.sock"}, {Addr: "10.0.0.1:11211"}, {Addr: "/run/b.sock"}}
	a, err := clientlib.New(clientlib.Config{Servers: servers})
	require.NoError(t, err)
	defer a.Close()
	reversed := []clientlib.Server{servers[2], servers[1], servers[0]}
	b, err := clientlib.New(clientlib.Config{Servers: reversed})
	require.NoError(t, err)
	defer b.Close()
	counts := map[string]int{}
	for i := range 3000 {
		key := "key:" + strconv.Itoa(i)
		sa, err := a.ServerFor(key)
		require.NoError(t, err)
		sb, err := b.ServerFor(key)
		require.NoError(t, err)
		require.Equal(t, sa, sb, "placement of %s depends on the order servers are listed in", key)
		counts[sa]++
	}
	for _, s := range servers {
		assert.Greater(t, counts[s.Addr], 600, "every server takes a share: %v", counts)
	}
}

// exerciseTransport runs a few operations whose replies cross record and buffer boundaries.
func exerciseTransport(t *testing.T, ctx context.Context, c *clientlib.Client) {
	t.Helper()
	big := bytes.Repeat([]byte("0123456789abcdef"), 40000) // 640000 bytes: many TLS records
	require.NoError(t, c.Set(ctx, &clientlib.Item{Key: "small", Value: []byte("1"), Flags: 7}))
	require.NoError(t, c.Set(ctx, &clientlib.Item{Key: "big", Value: big}))
	it, err := c.Get(ctx, "small")
	require.NoError(t, err)
	assert.Equal(t, "1", string(it.Value))
	assert.Equal(t, uint32(7), it.Flags)
	n, err := c.Increment(ctx, "small", 41)
	require.NoError(t, err)
	assert.Equal(t, uint64(42), n)
	got, err := c.GetMulti(ctx, []string{"small", "big", "missing"})
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.True(t, bytes.Equal(big, got["big"].Value), "the large value comes back intact")
	_, err = c.Get(ctx, "missing")
	assert.True(t, errors.Is(err, clientlib.ErrCacheMiss), "%v", err)
}
