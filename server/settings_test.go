package server

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leasecached/leasecached/shard"
	"github.com/leasecached/leasecached/tlsconf"
)

// settingsOf is `stats settings` of a server with cfg, by name.
func settingsOf(t *testing.T, cfg Config) map[string]string {
	t.Helper()
	store, err := shard.New(shard.Config{MemoryLimit: 64 << 20, ReclaimInterval: -1})
	require.NoError(t, err)
	t.Cleanup(store.Close)
	cfg.Threads, cfg.ConnLimit, cfg.MaxItemSize, cfg.MemoryLimit = 1, 10, 1<<20, 64<<20
	cfg.Logger = slog.New(slog.DiscardHandler)
	got, _ := feed(newConn(New(cfg, store), nil), &fakeConn{}, "stats settings\r\n")
	values := map[string]string{}
	for _, l := range strings.Split(strings.TrimSuffix(got, "END\r\n"), "\r\n") {
		if f := strings.SplitN(l, " ", 3); len(f) == 3 {
			values[f[1]] = f[2]
		}
	}
	return values
}

// The listener, -Y and ssl_* lines show the command line's settings as memcached 1.6.18 prints its own
// (the expected values are memcached's output for the same settings, e.g. memcached -Z -a 0644
// -o ssl_verify_mode=2,ssl_min_version=3,ssl_wbuf_size=32,ssl_session_cache,...).
func TestSettingsListenersAndTLS(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		want map[string]string
	}{
		{"defaults: memcached's lines with TLS and -Y off", Config{Listen: "127.0.0.1", Port: 11211,
			Listeners: []Listener{{Network: "tcp", Addr: "127.0.0.1:11211"}},
			TLS:       tlsconf.Settings{MinVersion: tlsconf.DefaultMinVersion, WbufSize: tlsconf.DefaultWbufSize}},
			map[string]string{"inter": "127.0.0.1", "tcpport": "11211", "domain_socket": "NULL", "umask": "700",
				"auth_enabled_ascii": "no", "ssl_enabled": "no", "ssl_chain_cert": "(null)", "ssl_key": "(null)",
				"ssl_verify_mode": "0", "ssl_keyformat": "1", "ssl_ciphers": "NULL", "ssl_ca_cert": "NULL",
				"ssl_wbuf_size": "16384", "ssl_session_cache": "no", "ssl_kernel_tls": "no",
				"ssl_min_version": "tlsv1.2"}},
		{"unix socket, -a, -Y", Config{Port: 11211, UnixMask: 0o644, AuthFile: "/etc/lc/auth",
			Listeners: []Listener{{Network: "unix", Addr: "/run/lc.sock"}}},
			map[string]string{"inter": "NULL", "domain_socket": "/run/lc.sock", "umask": "644",
				"auth_enabled_ascii": "/etc/lc/auth", "ssl_enabled": "no"}},
		{"TLS with everything set", Config{Listen: "127.0.0.1:1,notls:127.0.0.1:2", Port: 29021,
			Listeners: []Listener{{Network: "tcp", Addr: "127.0.0.1:1", TLS: true}, {Network: "tcp", Addr: "127.0.0.1:2"}},
			TLS: tlsconf.Settings{ChainCert: "cert.pem", Key: "key.pem", CACert: "ca.pem", VerifyMode: tlsconf.VerifyRequire,
				MinVersion: 3, Ciphers: "ECDHE-RSA-AES128-GCM-SHA256", WbufSize: 32 << 10, SessionCache: true}},
			map[string]string{"inter": "127.0.0.1:1,notls:127.0.0.1:2", "tcpport": "29021", "ssl_enabled": "yes",
				"ssl_chain_cert": "cert.pem", "ssl_key": "key.pem", "ssl_verify_mode": "3",
				"ssl_ciphers": "ECDHE-RSA-AES128-GCM-SHA256", "ssl_ca_cert": "ca.pem", "ssl_wbuf_size": "32768",
				"ssl_session_cache": "yes", "ssl_min_version": "tlsv1.3"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := settingsOf(t, tc.cfg)
			for k, v := range tc.want {
				assert.Equal(t, v, got[k], k)
			}
		})
	}
}

// ssl_verify_mode is printed as the OpenSSL flags memcached sets for each mode; ssl_min_version as
// memcached's ssl_proto_text names the version.
func TestSettingsTLSEncodings(t *testing.T) {
	for mode, want := range map[int]int{tlsconf.VerifyNone: 0, tlsconf.VerifyPeer: 1, tlsconf.VerifyRequire: 3,
		tlsconf.VerifyOnce: 7} {
		assert.Equal(t, want, openSSLVerifyFlags(mode), "mode %d", mode)
	}
	for v, want := range map[int]string{0: "tlsv1.0", 1: "tlsv1.1", 2: "tlsv1.2", 3: "tlsv1.3", 4: "unknown", -1: "unknown"} {
		assert.Equal(t, want, sslProtoText(v), "version %d", v)
	}
}
