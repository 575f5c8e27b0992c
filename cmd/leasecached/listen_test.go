package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leasecached/leasecached/server"
)

func TestParseListenEntry(t *testing.T) {
	cases := []struct {
		in     string
		want   listenEntry // when errHas is ""
		errHas string
	}{
		{"127.0.0.1", listenEntry{host: "127.0.0.1", port: 11211}, ""},
		{"127.0.0.1:12345", listenEntry{host: "127.0.0.1", port: 12345}, ""},
		{"localhost", listenEntry{host: "localhost", port: 11211}, ""},
		{"cache-1.example.com:1", listenEntry{host: "cache-1.example.com", port: 1}, ""},
		{"*", listenEntry{host: "", port: 11211}, ""},
		{"*:2000", listenEntry{host: "", port: 2000}, ""},
		{"[::1]", listenEntry{host: "::1", port: 11211}, ""},
		{"[::1]:65535", listenEntry{host: "::1", port: 65535}, ""},
		{"::1", listenEntry{host: "::1", port: 11211}, ""},
		{"fe80::1:2:3", listenEntry{host: "fe80::1:2:3", port: 11211}, ""}, // memcached: no brackets, no port
		{"[fe80::1%lo]:5", listenEntry{host: "fe80::1%lo", port: 5}, ""},
		{"notls:127.0.0.1:99", listenEntry{host: "127.0.0.1", port: 99, notls: true}, ""},
		{"notls:[::1]", listenEntry{host: "::1", port: 11211, notls: true}, ""},
		{"notls:*", listenEntry{host: "", port: 11211, notls: true}, ""},
		{"0.0.0.0", listenEntry{host: "0.0.0.0", port: 11211}, ""},

		{"", listenEntry{}, "empty address"},
		{":11211", listenEntry{}, "empty address"},
		{"127.0.0.1:", listenEntry{}, "empty port"},
		{"127.0.0.1:abc", listenEntry{}, "invalid port number"},
		{"127.0.0.1:0", listenEntry{}, "invalid port number"},
		{"127.0.0.1:65536", listenEntry{}, "invalid port number"},
		{"127.0.0.1:-1", listenEntry{}, "invalid port number"},
		{"[::1", listenEntry{}, "invalid IPv6 address"},
		{"[::1]x", listenEntry{}, "after the IPv6 address"},
		{"[::1]:", listenEntry{}, "empty port"},
		{"[127.0.0.1]", listenEntry{}, "not an IPv6 address"},
		{"[host]:1", listenEntry{}, "not an IPv6 address"},
		{"1:2:3", listenEntry{}, "not an IPv6 address"},
		{"::%]0", listenEntry{}, "not an IPv6 address"}, // found by FuzzParseListen: netip takes any zone
		{"[::1%a:b]:1", listenEntry{}, "not an IPv6 address"},
		{"bad host", listenEntry{}, "neither an IP address nor a host name"},
		{"-bad.example", listenEntry{}, "neither an IP address nor a host name"},
		{"notls", listenEntry{host: "notls", port: 11211}, ""}, // a host named notls: memcached's prefix needs its colon here
		{"notls:", listenEntry{}, "empty address"},
		{"proto[ascii]:127.0.0.1", listenEntry{}, "text protocol only"},
		{"tag[a]:127.0.0.1", listenEntry{}, "proxy"},
		{"notls:tag[a]:127.0.0.1", listenEntry{}, "proxy"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseListenEntry(tc.in, 11211)
			if tc.errHas != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.errHas)
				assert.Contains(t, err.Error(), `"`+tc.in+`"`, "the reason names the entry")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestParseListen(t *testing.T) {
	cases := []struct {
		name      string
		values    []string
		tls       bool
		wantInter string
		want      []server.Listener
		errHas    string
	}{
		{"one", []string{"127.0.0.1"}, false, "127.0.0.1",
			[]server.Listener{{Network: "tcp", Addr: "127.0.0.1:11211"}}, ""},
		{"list, both separators", []string{"127.0.0.1:1;[::1]:2,*:3"}, false, "127.0.0.1:1;[::1]:2,*:3",
			[]server.Listener{{Network: "tcp", Addr: "127.0.0.1:1"}, {Network: "tcp", Addr: "[::1]:2"},
				{Network: "tcp", Addr: ":3"}}, ""},
		{"repeats are joined with commas", []string{"127.0.0.1:1", "[::1]:2"}, false, "127.0.0.1:1,[::1]:2",
			[]server.Listener{{Network: "tcp", Addr: "127.0.0.1:1"}, {Network: "tcp", Addr: "[::1]:2"}}, ""},
		{"a repeated value is given once", []string{"127.0.0.1", "127.0.0.1"}, false, "127.0.0.1",
			[]server.Listener{{Network: "tcp", Addr: "127.0.0.1:11211"}}, ""},
		{"a prefix of an earlier value is kept (memcached drops it)", []string{"127.0.0.1:1", "127.0.0.1"}, false,
			"127.0.0.1:1,127.0.0.1",
			[]server.Listener{{Network: "tcp", Addr: "127.0.0.1:1"}, {Network: "tcp", Addr: "127.0.0.1:11211"}}, ""},
		{"one address spelled twice is one listener", []string{"[::1]:5,[0:0::1]:5,::1"}, false, "[::1]:5,[0:0::1]:5,::1",
			[]server.Listener{{Network: "tcp", Addr: "[::1]:5"}, {Network: "tcp", Addr: "[::1]:11211"}}, ""},
		{"empty entries are skipped", []string{",127.0.0.1,,"}, false, ",127.0.0.1,,",
			[]server.Listener{{Network: "tcp", Addr: "127.0.0.1:11211"}}, ""},
		{"-Z: TLS except notls", []string{"127.0.0.1:1,notls:127.0.0.1:2"}, true, "127.0.0.1:1,notls:127.0.0.1:2",
			[]server.Listener{{Network: "tcp", Addr: "127.0.0.1:1", TLS: true}, {Network: "tcp", Addr: "127.0.0.1:2"}}, ""},
		{"notls without -Z", []string{"notls:127.0.0.1"}, false, "", nil, "valid only when SSL is enabled"},
		{"same address with and without notls", []string{"127.0.0.1", "notls:127.0.0.1"}, true, "", nil,
			"both with and without notls"},
		{"nothing", []string{""}, false, "", nil, "no address"},
		{"only separators", []string{",;"}, false, "", nil, "no address"},
		{"* overlaps any address on its port", []string{"*:7,127.0.0.1:7"}, false, "", nil, "overlap"},
		{"* overlaps a host name on its port", []string{"localhost:7,*:7"}, false, "", nil, "overlap"},
		{"0.0.0.0 overlaps IPv4", []string{"127.0.0.1:7,0.0.0.0:7"}, false, "", nil, "overlap"},
		{":: overlaps IPv6", []string{"[::]:7,[::1]:7"}, false, "", nil, "overlap"},
		{"0.0.0.0 and ::1 do not", []string{"0.0.0.0:7,[::1]:7"}, false, "0.0.0.0:7,[::1]:7",
			[]server.Listener{{Network: "tcp", Addr: "0.0.0.0:7"}, {Network: "tcp", Addr: "[::1]:7"}}, ""},
		{"* on other ports does not", []string{"*:7,127.0.0.1:8"}, false, "*:7,127.0.0.1:8",
			[]server.Listener{{Network: "tcp", Addr: ":7"}, {Network: "tcp", Addr: "127.0.0.1:8"}}, ""},
		{"a bad entry among good ones", []string{"127.0.0.1,[::1"}, false, "", nil, "invalid IPv6"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			inter, entries, err := parseListen(tc.values, 11211, tc.tls)
			if tc.errHas != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.errHas)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.wantInter, inter)
			assert.Equal(t, tc.want, tcpListeners(entries, tc.tls))
		})
	}
}

func TestParseUnixMask(t *testing.T) {
	for in, want := range map[string]os.FileMode{"700": 0o700, "0700": 0o700, "0644": 0o644, "777": 0o777, "1": 1} {
		got, err := parseUnixMask(in)
		if assert.NoError(t, err, in) {
			assert.Equal(t, want, got, in)
		}
	}
	for _, in := range []string{"", "abc", "8", "0800", "1777", "-1", "0", "00", "0x1ff", " 700"} {
		_, err := parseUnixMask(in)
		assert.Error(t, err, in)
	}
}

func TestCheckUnixSocketPath(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, []byte("keep me"), 0o600))
	sock := filepath.Join(dir, "stale.sock")
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close() // the socket file stays: a stale socket, as a killed daemon leaves it
	link := filepath.Join(dir, "link")
	require.NoError(t, os.Symlink(sock, link))

	cases := []struct {
		path   string
		errHas string
	}{
		{filepath.Join(dir, "new.sock"), ""},
		{sock, ""},
		{"relative.sock", ""},
		{file, "is not a socket"},
		{dir, "is not a socket"},
		{link, "is not a socket"},
		{filepath.Join(dir, "missing", "x.sock"), "directory"},
		{filepath.Join(file, "x.sock"), "not a directory"},
		{"", "empty"},
		{"@abstract", "abstract"},
		{"/" + strings.Repeat("x", maxUnixPath), "longer than"},
	}
	for _, tc := range cases {
		err := checkUnixSocketPath(tc.path)
		if tc.errHas == "" {
			assert.NoError(t, err, tc.path)
			continue
		}
		if assert.Error(t, err, tc.path) {
			assert.Contains(t, err.Error(), tc.errHas, tc.path)
		}
	}
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, "keep me", string(b), "a check never touches the file")
}

func TestExposedWarning(t *testing.T) {
	parse := func(s string, tls bool) []listenEntry {
		_, e, err := parseListen([]string{s}, 11211, tls)
		require.NoError(t, err)
		return e
	}
	cases := []struct {
		name    string
		listen  string
		tls     bool
		auth    bool
		wantHas []string // "" : no warning
	}{
		{"loopback", "127.0.0.1,[::1],localhost,127.0.0.2", false, false, nil},
		{"every interface", "*", false, false, []string{"*:11211", "-Z", "-Y", "firewall"}},
		{"0.0.0.0 and ::", "0.0.0.0:1,[::]:2", false, false, []string{"0.0.0.0:1, [::]:2"}},
		{"a LAN address", "10.1.2.3", false, false, []string{"10.1.2.3:11211"}},
		{"a host name", "cache.example.com", false, false, []string{"cache.example.com:11211"}},
		{"with -Y", "*", false, true, nil},
		{"with -Z", "*", true, false, nil},
		{"with -Z, a notls one", "*:1,notls:10.0.0.1:2", true, false, []string{"10.0.0.1:2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := exposedWarning(parse(tc.listen, tc.tls), tc.tls, tc.auth)
			if tc.wantHas == nil {
				assert.Empty(t, w)
				return
			}
			assert.NotContains(t, w, "\n")
			for _, s := range tc.wantHas {
				assert.Contains(t, w, s)
			}
			if tc.name == "with -Z, a notls one" {
				assert.NotContains(t, w, "*:1")
			}
		})
	}
}
