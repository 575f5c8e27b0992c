package main

import (
	"net"
	"strconv"
	"strings"
	"testing"
)

// FuzzParseListen: any -l value either is refused with one line or gives listeners whose addresses are
// host:port with a port in range, each once, TLS only with -Z and never on a notls: entry.
func FuzzParseListen(f *testing.F) {
	for _, s := range []string{"127.0.0.1", "*:1,[::1]:2;notls:10.0.0.1:3", "[fe80::1%eth0]:5", "::1", "notls:",
		"proto[ascii]:x", "a.b.c:65535,a.b.c", "[::1", "0.0.0.0:7,127.0.0.1:7", ",,"} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, value string, tls bool) {
		inter, entries, err := parseListen([]string{value}, 11211, tls)
		if err != nil {
			if strings.Contains(err.Error(), "\n") && !strings.Contains(value, "\n") {
				t.Fatalf("%q: error of more than one line: %q", value, err)
			}
			return
		}
		if inter != value {
			t.Fatalf("%q: inter %q", value, inter)
		}
		seen := map[string]bool{}
		for i, l := range tcpListeners(entries, tls) {
			host, port, err := net.SplitHostPort(l.Addr)
			if err != nil {
				t.Fatalf("%q: listener address %q: %v", value, l.Addr, err)
			}
			if n, err := strconv.Atoi(port); err != nil || n < minPort || n > maxPort {
				t.Fatalf("%q: port %q", value, port)
			}
			if host != entries[i].host || seen[canonicalAddr(entries[i])] {
				t.Fatalf("%q: listener %q from %+v (twice: %v)", value, l.Addr, entries[i], seen[l.Addr])
			}
			seen[canonicalAddr(entries[i])] = true
			if l.TLS && (!tls || entries[i].notls) {
				t.Fatalf("%q: TLS on %+v", value, entries[i])
			}
		}
		_ = exposedWarning(entries, tls, false)
	})
}

// FuzzExtendedFlags: any -o value is refused with one line or sets only flags the -o table names.
func FuzzExtendedFlags(f *testing.F) {
	for _, s := range []string{"ssl_chain_cert=a,ssl_key=b", "modern", "ssl_session_cache", "foo=bar", "=", ",",
		"idle_timeout=1,idle_timeout=", "ssl_keyformat=1", "slab_automove", "ext_path=/x:1G"} {
		f.Add(s)
	}
	flags := map[string]bool{}
	for _, o := range extOptions {
		flags[o.flag] = o.flag != ""
	}
	f.Fuzz(func(t *testing.T, value string) {
		got, err := extendedFlags([]string{value})
		if err != nil {
			if strings.Contains(err.Error(), "\n") && !strings.Contains(value, "\n") {
				t.Fatalf("%q: error of more than one line: %q", value, err)
			}
			return
		}
		for flag, v := range got {
			if !flags[flag] {
				t.Fatalf("%q: set %q, not a flag of the -o table", value, flag)
			}
			if v == "" || strings.Contains(v, extSeparator) {
				t.Fatalf("%q: %s = %q", value, flag, v)
			}
		}
	})
}
