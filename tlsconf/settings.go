// Package tlsconf turns memcached's TLS settings (-Z and the ssl_* extended options) into a crypto/tls
// server configuration whose certificates can be reloaded while connections are served (SIGHUP and the
// refresh_certs command). See doc/design/listeners.md.
package tlsconf

// Settings are the ssl_* options as memcached 1.6.18 names them (-o ssl_chain_cert=...,...), validated by
// the command line.
type Settings struct {
	ChainCert string // ssl_chain_cert: PEM certificate chain, the server's certificate first
	Key       string // ssl_key: PEM private key (may be the chain file itself)
	CACert    string // ssl_ca_cert: PEM CAs that client certificates are verified against
	// VerifyMode is ssl_verify_mode as given, 0-3: 0 asks for no client certificate, 1 verifies one if the
	// client sends it, 2 requires and verifies one, 3 is 2 checked once per connection (as 2 here: a Go TLS
	// server never renegotiates).
	VerifyMode int
	// MinVersion is ssl_min_version as given: 0 TLS 1.0, 1 TLS 1.1, 2 TLS 1.2 (the default), 3 TLS 1.3.
	MinVersion int
	// Ciphers is ssl_ciphers: a colon-separated list of TLS 1.2 cipher suites in OpenSSL's or IANA's
	// spelling; empty keeps Go's defaults. TLS 1.3 suites are not configurable (in Go or OpenSSL's list).
	Ciphers string
	// WbufSize is ssl_wbuf_size in bytes (memcached: per-connection TLS output buffer, default 16 KiB).
	WbufSize int
	// SessionCache is ssl_session_cache: resumption with session tickets, counted in ssl_new_sessions.
	SessionCache bool
}

// Verify modes (ssl_verify_mode).
const (
	VerifyNone    = 0
	VerifyPeer    = 1
	VerifyRequire = 2
	VerifyOnce    = 3
)

// DefaultMinVersion is ssl_min_version's default, memcached's: TLS 1.2.
const DefaultMinVersion = 2

// DefaultWbufSize is ssl_wbuf_size's default, memcached's: 16 KiB.
const DefaultWbufSize = 16 << 10
