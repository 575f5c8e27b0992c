package main

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/leasecached/leasecached/tlsconf"
)

// Limits on the ssl_* values, as memcached 1.6.18 takes them.
const (
	// ssl_wbuf_size is in kilobytes. memcached takes any 32-bit number; a TLS record is at most 16 KiB, so
	// a buffer above 1 MiB per connection only holds memory, and 0 could hold no record at all.
	minSSLWbufKB = 1
	maxSSLWbufKB = 1 << 10
)

// extKey is the -o key a long flag is another spelling of (--ssl-key: ssl_key).
func extKey(flag string) string { return strings.ReplaceAll(flag, "-", "_") }

// extendedUsage is -o's help: the keys that set a long flag, from extOptions.
func extendedUsage() string {
	var keys []string
	for k, o := range extOptions {
		if o.flag != "" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return strings.Join(keys, ", ") + " each set the long flag of that name (ssl_key: --ssl-key); " +
		"memcached's other keys are accepted where leasecached always does what they ask, and refused otherwise"
}

// tlsSettings reads the ssl_* settings (each an -o key or a long flag, through opt) and checks them
// against -Z (tlsOn): with -Z, ssl_chain_cert is required and the files must be readable (their contents
// are checked when the server loads them: tlsconf); without -Z, giving any of them is refused, since
// the user would believe connections encrypted that are not.
func tlsSettings(opt func(flag string) (string, bool, error), tlsOn bool) (tlsconf.Settings, error) {
	var (
		st    tlsconf.Settings
		given []string
		err   error
	)
	get := func(flag string) string {
		v, set, e := opt(flag)
		if e != nil && err == nil {
			err = e
		}
		if set {
			given = append(given, extKey(flag))
		}
		return v
	}
	st.ChainCert = get(flagSSLChainCert)
	st.Key = get(flagSSLKey)
	st.CACert = get(flagSSLCACert)
	st.Ciphers = get(flagSSLCiphers)
	verify, minVersion, wbuf, cache := get(flagSSLVerifyMode), get(flagSSLMinVersion), get(flagSSLWbufSize),
		get(flagSSLSessionCache)
	if err != nil {
		return st, err
	}
	if st.VerifyMode, err = intIn(verify, tlsconf.VerifyNone, tlsconf.VerifyOnce); err != nil {
		return st, fmt.Errorf("ssl_verify_mode %q: must be 0 (none), 1 (request), 2 (require) or 3 (once)", verify)
	}
	if st.MinVersion, err = intIn(minVersion, 0, tlsconf.MaxMinVersion); err != nil {
		return st, fmt.Errorf("ssl_min_version %q: must be 0 (TLS 1.0), 1 (TLS 1.1), 2 (TLS 1.2) or 3 (TLS 1.3)", minVersion)
	}
	kb, err := intIn(wbuf, minSSLWbufKB, maxSSLWbufKB)
	if err != nil {
		return st, fmt.Errorf("ssl_wbuf_size %q: must be between %d and %d kilobytes", wbuf, minSSLWbufKB, maxSSLWbufKB)
	}
	st.WbufSize = kb << 10
	if st.SessionCache, err = strconv.ParseBool(cache); err != nil {
		return st, fmt.Errorf("ssl_session_cache %q: want true or false", cache)
	}

	if !tlsOn {
		if len(given) > 0 {
			return st, fmt.Errorf("%s given without -Z: TLS is off; add -Z, or leave the ssl_* settings out",
				strings.Join(given, ", "))
		}
		return st, nil
	}
	if st.ChainCert == "" {
		return st, errors.New("-Z: ssl_chain_cert is required: give -o ssl_chain_cert=FILE or --ssl-chain-cert FILE (PEM)")
	}
	if st.Key == "" {
		// memcached's help says ssl_key is needed only "if not part of the ssl_chain_cert", but 1.6.18
		// fails to start without it ("Error loading the key: (null)"); the help's promise is kept here.
		st.Key = st.ChainCert
	}
	if st.VerifyMode != tlsconf.VerifyNone && st.CACert == "" {
		// memcached starts, and then no client certificate verifies (OpenSSL has no CA to trust).
		return st, fmt.Errorf("ssl_verify_mode %d verifies client certificates: give ssl_ca_cert, the CAs to trust", st.VerifyMode)
	}
	for _, f := range []struct{ key, path string }{
		{"ssl_chain_cert", st.ChainCert}, {"ssl_key", st.Key}, {"ssl_ca_cert", st.CACert},
	} {
		if f.path == "" {
			continue
		}
		if err := checkReadable(f.path); err != nil {
			return st, fmt.Errorf("%s: %w", f.key, err)
		}
	}
	return st, nil
}

// intIn reads a decimal integer between lo and hi.
func intIn(s string, lo, hi int) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, err
	}
	if n < lo || n > hi {
		return 0, fmt.Errorf("%d out of range", n)
	}
	return n, nil
}

// checkReadable says whether path can be opened for reading (a file the server loads later).
func checkReadable(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	f.Close()
	if err == nil && st.IsDir() {
		return fmt.Errorf("open %s: is a directory", path)
	}
	return err
}
