package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"

	"github.com/leasecached/leasecached/server"
	"github.com/leasecached/leasecached/tlsconf"
)

func TestExtendedFlags(t *testing.T) {
	cases := []struct {
		name   string
		values []string
		want   map[string]string
		errHas string
	}{
		{"nothing", nil, map[string]string{}, ""},
		{"every key with a flag", []string{"ssl_chain_cert=c.pem,ssl_key=k.pem,ssl_ca_cert=ca.pem,ssl_verify_mode=2," +
			"ssl_min_version=3,ssl_ciphers=A:B,ssl_wbuf_size=32,ssl_session_cache,idle_timeout=60"},
			map[string]string{flagSSLChainCert: "c.pem", flagSSLKey: "k.pem", flagSSLCACert: "ca.pem",
				flagSSLVerifyMode: "2", flagSSLMinVersion: "3", flagSSLCiphers: "A:B", flagSSLWbufSize: "32",
				flagSSLSessionCache: "true", flagIdleTimeout: "60"}, ""},
		{"-o repeats", []string{"ssl_key=k.pem", "idle_timeout=5"},
			map[string]string{flagSSLKey: "k.pem", flagIdleTimeout: "5"}, ""},
		{"the later value wins", []string{"idle_timeout=5,idle_timeout=6", "idle_timeout=7"},
			map[string]string{flagIdleTimeout: "7"}, ""},
		{"a value may hold =", []string{"ssl_key=a=b"}, map[string]string{flagSSLKey: "a=b"}, ""},
		{"accepted no-ops", []string{"modern,maxconns_fast,inline_ascii_resp,no_inline_ascii_resp,slab_reassign," +
			"no_slab_automove,slab_automove=0,lru_crawler,no_lru_maintainer,no_drop_privileges,read_buf_mem_limit=0," +
			"ssl_keyformat=1,resp_obj_mem_limit=5"}, map[string]string{}, ""},

		{"unknown", []string{"foo"}, nil, `unknown option "foo"`},
		{"unknown with value", []string{"idle_timeout=1,foo=bar"}, nil, `unknown option "foo"`},
		{"case matters", []string{"SSL_KEY=x"}, nil, "unknown option"},
		{"empty", []string{""}, nil, "empty option name"},
		{"empty item", []string{"modern,,modern"}, nil, "empty option name"},
		{"trailing comma", []string{"modern,"}, nil, "empty option name"},
		{"= alone", []string{"="}, nil, "empty option name"},
		{"missing value", []string{"ssl_chain_cert"}, nil, "missing ssl_chain_cert argument"},
		{"empty value", []string{"idle_timeout="}, nil, "missing idle_timeout argument"},
		{"value for a switch", []string{"ssl_session_cache=no"}, nil, "ssl_session_cache takes no value"},
		{"value for a no-op switch", []string{"modern=1"}, nil, "modern takes no value"},
		{"refused", []string{"ssl_kernel_tls"}, nil, "ssl_kernel_tls is not supported: Go's crypto/tls"},
		{"refused extstore", []string{"ext_path=/tmp/x:64m"}, nil, "ext_path is not supported: there is no external storage"},
		{"refused LRU tuning", []string{"hot_lru_pct=10"}, nil, "hot_lru_pct is not supported"},
		{"no-op only for its value", []string{"ssl_keyformat=2"}, nil, "ssl_keyformat other than 1 is not supported"},
		{"slab_automove means 1", []string{"slab_automove"}, nil, "slab_automove other than 0"},
		{"read_buf_mem_limit", []string{"read_buf_mem_limit=64"}, nil, "read_buf_mem_limit other than 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := extendedFlags(tc.values)
			if tc.errHas != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.errHas)
				assert.NotContains(t, err.Error(), "\n")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// Every -o key with a flag names a flag the command line has, spelled as the key with dashes; every other
// key says why it is accepted or refused.
func TestExtOptionsTable(t *testing.T) {
	flags := map[string]cli.Flag{}
	for _, f := range newApp().Flags {
		flags[f.Names()[0]] = f
	}
	for key, o := range extOptions {
		if o.flag != "" {
			assert.Contains(t, flags, o.flag, key)
			assert.Equal(t, key, extKey(o.flag), "the flag of %s is its key with dashes", key)
			assert.Empty(t, o.why, key)
			continue
		}
		assert.NotEmpty(t, o.why, "%s: the reason it is accepted or refused", key)
		assert.False(t, o.acceptValue != "" && !o.accept, key)
		assert.False(t, o.acceptValue != "" && o.noValue, key)
	}
}

// appRun runs the command line through configFrom, with its log lines captured.
func appRun(args ...string) (server.Config, string, error) {
	app := newApp()
	var logged bytes.Buffer
	app.ErrWriter = &logged
	var got server.Config
	app.Action = func(c *cli.Context) error {
		var err error
		got, err = configFrom(c, 0)
		return err
	}
	err := app.Run(append([]string{"leasecached"}, args...))
	return got, logged.String(), err
}

// testCert writes a throwaway PEM file; the command line checks only that it can be read.
func testFile(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte("-----BEGIN CERTIFICATE-----\n"), 0o600))
	return p
}

func TestListenerCommandLine(t *testing.T) {
	cert, key, ca, auth := testFile(t, "cert.pem"), testFile(t, "key.pem"), testFile(t, "ca.pem"), testFile(t, "auth")
	sock := filepath.Join(t.TempDir(), "lc.sock")
	tcp := func(addr string, tls bool) server.Listener {
		return server.Listener{Network: "tcp", Addr: addr, TLS: tls}
	}
	defaultTLS := tlsconf.Settings{MinVersion: tlsconf.DefaultMinVersion, WbufSize: tlsconf.DefaultWbufSize}
	cases := []struct {
		name    string
		args    []string
		check   func(t *testing.T, c server.Config)
		logHas  string // "" : nothing logged
		errHas  string
		errNot1 bool
	}{
		{"default: loopback, on -p", []string{"-p", "2000"}, func(t *testing.T, c server.Config) {
			assert.Equal(t, server.DefaultListen, c.Listen)
			assert.Equal(t, []server.Listener{tcp("127.0.0.1:2000", false)}, c.Listeners)
			assert.Equal(t, server.DefaultUnixMask, c.UnixMask)
			assert.Equal(t, defaultTLS, c.TLS)
			assert.Empty(t, c.AuthFile)
		}, "", "", false},
		{"-l repeats and lists", []string{"-l", "127.0.0.1:1,[::1]:2", "-l", "127.0.0.2"},
			func(t *testing.T, c server.Config) {
				assert.Equal(t, "127.0.0.1:1,[::1]:2,127.0.0.2", c.Listen)
				assert.Equal(t, []server.Listener{tcp("127.0.0.1:1", false), tcp("[::1]:2", false),
					tcp("127.0.0.2:11211", false)}, c.Listeners)
			}, "", "", false},
		{"every interface: one warning line", []string{"-l", "*"}, func(t *testing.T, c server.Config) {
			assert.Equal(t, []server.Listener{tcp(":11211", false)}, c.Listeners)
		}, "WARN listening on *:11211 without TLS or authentication", "", false},
		{"-Y silences the warning", []string{"-l", "0.0.0.0", "-Y", auth}, func(t *testing.T, c server.Config) {
			assert.Equal(t, auth, c.AuthFile)
		}, "", "", false},
		{"-Z: TLS except notls", []string{"-Z", "-o", "ssl_chain_cert=" + cert, "-l", "*:1,notls:127.0.0.1:2"},
			func(t *testing.T, c server.Config) {
				assert.Equal(t, []server.Listener{tcp(":1", true), tcp("127.0.0.1:2", false)}, c.Listeners)
				assert.Equal(t, cert, c.TLS.ChainCert)
				assert.Equal(t, cert, c.TLS.Key, "the key defaults to the chain file")
			}, "", "", false},
		{"-Z: every ssl_* setting by -o", []string{"-Z", "-o", "ssl_chain_cert=" + cert + ",ssl_key=" + key,
			"-o", "ssl_ca_cert=" + ca + ",ssl_verify_mode=3,ssl_min_version=3,ssl_ciphers=X:Y,ssl_wbuf_size=64,ssl_session_cache"},
			func(t *testing.T, c server.Config) {
				assert.Equal(t, tlsconf.Settings{ChainCert: cert, Key: key, CACert: ca, VerifyMode: tlsconf.VerifyOnce,
					MinVersion: 3, Ciphers: "X:Y", WbufSize: 64 << 10, SessionCache: true}, c.TLS)
			}, "", "", false},
		{"-Z: every ssl_* setting by long flag", []string{"--enable-ssl", "--ssl-chain-cert", cert, "--ssl-key", key,
			"--ssl-ca-cert", ca, "--ssl-verify-mode", "1", "--ssl-min-version", "0", "--ssl-ciphers", "X",
			"--ssl-wbuf-size", "1", "--ssl-session-cache"},
			func(t *testing.T, c server.Config) {
				assert.Equal(t, tlsconf.Settings{ChainCert: cert, Key: key, CACert: ca, VerifyMode: tlsconf.VerifyPeer,
					MinVersion: 0, Ciphers: "X", WbufSize: 1 << 10, SessionCache: true}, c.TLS)
			}, "", "", false},
		{"-o idle_timeout", []string{"-o", "idle_timeout=90"}, func(t *testing.T, c server.Config) {
			assert.Equal(t, 90*time.Second, c.IdleTimeout)
		}, "", "", false},
		{"-s: the socket only", []string{"-s", sock, "-a", "0660"}, func(t *testing.T, c server.Config) {
			assert.Equal(t, []server.Listener{{Network: "unix", Addr: sock}}, c.Listeners)
			assert.Equal(t, os.FileMode(0o660), c.UnixMask)
			assert.Empty(t, c.Listen, "inter is NULL, as memcached's")
		}, "", "", false},
		{"-s with -l: -l ignored, said once", []string{"-s", sock, "-l", "0.0.0.0"}, func(t *testing.T, c server.Config) {
			assert.Equal(t, []server.Listener{{Network: "unix", Addr: sock}}, c.Listeners)
			assert.Equal(t, "0.0.0.0", c.Listen)
		}, "WARN -l ignored: with -s, only the unix socket is listened on (as memcached does) listen=0.0.0.0", "", false},

		{"bad -l", []string{"-l", "127.0.0.1:http"}, nil, "", `-l/--listen: "127.0.0.1:http": invalid port number`, false},
		{"empty -l", []string{"-l", ""}, nil, "", "-l/--listen: no address given", false},
		{"notls without -Z", []string{"-l", "notls:127.0.0.1"}, nil, "", "'notls' option is valid only when SSL is enabled", false},
		{"-Z with only notls", []string{"-Z", "-o", "ssl_chain_cert=" + cert, "-l", "notls:127.0.0.1"}, nil, "",
			"no listener would use TLS", false},
		{"-Z without a chain", []string{"-Z"}, nil, "", "-Z: ssl_chain_cert is required", false},
		{"-Z with -s", []string{"-Z", "-s", sock, "-o", "ssl_chain_cert=" + cert}, nil, "",
			"You cannot enable SSL without a TCP port", false},
		{"-Z, unreadable chain", []string{"-Z", "-o", "ssl_chain_cert=/no/such.pem"}, nil, "",
			"ssl_chain_cert: open /no/such.pem", false},
		{"-Z, unreadable key", []string{"-Z", "-o", "ssl_chain_cert=" + cert, "--ssl-key", "/no/key.pem"}, nil, "",
			"ssl_key: open /no/key.pem", false},
		{"-Z, chain is a directory", []string{"-Z", "-o", "ssl_chain_cert=" + t.TempDir()}, nil, "",
			"is a directory", false},
		{"-Z, verification without CAs", []string{"-Z", "-o", "ssl_chain_cert=" + cert + ",ssl_verify_mode=2"}, nil, "",
			"give ssl_ca_cert", false},
		{"ssl_* without -Z", []string{"--ssl-chain-cert", cert}, nil, "", "ssl_chain_cert given without -Z", false},
		{"ssl_* by -o without -Z", []string{"-o", "ssl_session_cache"}, nil, "", "ssl_session_cache given without -Z", false},
		{"both spellings", []string{"-Z", "-o", "ssl_chain_cert=" + cert, "--ssl-chain-cert", cert}, nil, "",
			"ssl_chain_cert: given both as -o ssl_chain_cert and as --ssl-chain-cert", false},
		{"both spellings of idle_timeout", []string{"-o", "idle_timeout=1", "--idle-timeout", "2"}, nil, "",
			"idle_timeout: given both", false},
		{"verify mode out of range", []string{"-Z", "-o", "ssl_chain_cert=" + cert + ",ssl_verify_mode=4"}, nil, "",
			`ssl_verify_mode "4": must be 0`, false},
		{"verify mode not a number", []string{"-Z", "--ssl-chain-cert", cert, "--ssl-verify-mode", "x"}, nil, "",
			`ssl_verify_mode "x"`, false},
		{"min version out of range", []string{"-Z", "-o", "ssl_chain_cert=" + cert + ",ssl_min_version=4"}, nil, "",
			`ssl_min_version "4"`, false},
		{"min version negative", []string{"-Z", "-o", "ssl_chain_cert=" + cert + ",ssl_min_version=-1"}, nil, "",
			`ssl_min_version "-1"`, false},
		{"wbuf zero", []string{"-Z", "-o", "ssl_chain_cert=" + cert + ",ssl_wbuf_size=0"}, nil, "",
			`ssl_wbuf_size "0": must be between 1 and 1024 kilobytes`, false},
		{"wbuf too big", []string{"-Z", "-o", "ssl_chain_cert=" + cert + ",ssl_wbuf_size=1025"}, nil, "",
			`ssl_wbuf_size "1025"`, false},
		{"wbuf not a number", []string{"-Z", "-o", "ssl_chain_cert=" + cert + ",ssl_wbuf_size=16k"}, nil, "",
			`ssl_wbuf_size "16k"`, false},
		{"bad idle_timeout by -o", []string{"-o", "idle_timeout=soon"}, nil, "", "--idle-timeout (-o idle_timeout)", false},
		{"unknown -o", []string{"-o", "foo"}, nil, "", `-o: unknown option "foo"`, false},
		{"bad -a", []string{"-a", "9"}, nil, "", "-a/--unix-mask", false},
		{"-s on a file", []string{"-s", cert}, nil, "", "exists and is not a socket", false},
		{"unreadable -Y", []string{"-Y", "/no/such/auth"}, nil, "", `-Y/--auth-file: could not open "/no/such/auth" for reading`, false},
		{"-Y a directory", []string{"-Y", t.TempDir()}, nil, "", "-Y/--auth-file", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, logged, err := appRun(tc.args...)
			if tc.errHas != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.errHas)
				assert.NotContains(t, err.Error(), "\n", "one line")
				return
			}
			require.NoError(t, err)
			tc.check(t, cfg)
			if tc.logHas == "" {
				assert.Empty(t, logged)
				return
			}
			assert.Contains(t, logged, tc.logHas)
			assert.Equal(t, 1, strings.Count(logged, "\n"), "one line: %q", logged)
		})
	}
}

// A stale socket file passes; the check leaves it for the transport to replace.
func TestUnixSocketStale(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s")
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	cfg, _, err := appRun("-s", sock)
	require.NoError(t, err)
	assert.Equal(t, sock, cfg.Listeners[0].Addr)
	_, err = os.Lstat(sock)
	assert.NoError(t, err)
}
