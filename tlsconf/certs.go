package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// Certs is the server side of TLS: the configuration every TLS listener hands to crypto/tls, built from
// Settings and the files they name. Reload reads the files again; a connection that has finished its
// handshake keeps the certificate it got, and one that starts its handshake after Reload gets the new one
// (Config's GetConfigForClient reads the current configuration at each handshake). A Reload that fails
// keeps what was loaded before. Its methods are safe for concurrent use.
type Certs struct {
	settings Settings
	cur      atomic.Pointer[tls.Config] // the configuration of the last successful load
	loadedAt atomic.Int64               // unix seconds of the last successful load

	handshakeErrors atomic.Uint64 // handshakes that failed (stats ssl_handshake_errors)
	newSessions     atomic.Uint64 // full handshakes while the session cache is on (stats ssl_new_sessions)
}

// New loads the files s names. Its errors are memcached's words for the same failures (see Reload).
func New(s Settings) (*Certs, error) {
	c := &Certs{settings: s}
	if err := c.Reload(); err != nil {
		return nil, err
	}
	return c, nil
}

// Settings returns the settings c was made with.
func (c *Certs) Settings() Settings { return c.settings }

// Config is what a TLS listener serves with: each handshake takes the configuration of the last
// successful load.
func (c *Certs) Config() *tls.Config {
	return &tls.Config{
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return c.cur.Load(), nil },
	}
}

// Reload reads the certificate chain, key and CA file again. On failure the error's text is what
// memcached's refresh_certs answers for the same failure ("Error loading the key: <path> : <reason>"), and
// the configuration loaded before stays in use.
func (c *Certs) Reload() error {
	cfg, err := build(c.settings)
	if err != nil {
		return err
	}
	c.cur.Store(cfg)
	c.loadedAt.Store(time.Now().Unix())
	return nil
}

// LoadedAt is when the certificates in use were loaded (stats time_since_server_cert_refresh).
func (c *Certs) LoadedAt() time.Time { return time.Unix(c.loadedAt.Load(), 0) }

// HandshakeFailed counts a handshake that did not complete.
func (c *Certs) HandshakeFailed() { c.handshakeErrors.Add(1) }

// HandshakeDone counts a completed handshake: a full one is a new session when the session cache is on,
// as memcached counts sessions its cache stores.
func (c *Certs) HandshakeDone(st tls.ConnectionState) {
	if c.settings.SessionCache && !st.DidResume {
		c.newSessions.Add(1)
	}
}

// HandshakeErrors and NewSessions are the counts stats reports.
func (c *Certs) HandshakeErrors() uint64 { return c.handshakeErrors.Load() }
func (c *Certs) NewSessions() uint64     { return c.newSessions.Load() }

// ErrNotEnabled is refresh_certs' answer on a server without TLS, in memcached's words.
var ErrNotEnabled = errors.New("Error TLS not enabled") //nolint:staticcheck // memcached's reply text

// minVersions maps ssl_min_version to crypto/tls's versions.
var minVersions = [...]uint16{tls.VersionTLS10, tls.VersionTLS11, tls.VersionTLS12, tls.VersionTLS13}

// MaxMinVersion is the largest ssl_min_version: 3, TLS 1.3, the newest memcached knows (0 is TLS 1.0).
const MaxMinVersion = len(minVersions) - 1

// build makes the configuration s asks for from the files it names.
func build(s Settings) (*tls.Config, error) {
	chainPEM, err := os.ReadFile(s.ChainCert)
	if err != nil {
		return nil, fmt.Errorf("Error loading the certificate chain: %s : %w", s.ChainCert, err)
	}
	if !hasBlock(chainPEM, isCertificate) {
		return nil, fmt.Errorf("Error loading the certificate chain: %s : no PEM certificate found", s.ChainCert)
	}
	keyPath := s.Key
	if keyPath == "" {
		keyPath = s.ChainCert
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, fmt.Errorf("Error loading the key: %s : %w", keyPath, err)
	}
	if !hasBlock(keyPEM, isPrivateKey) {
		return nil, fmt.Errorf("Error loading the key: %s : no PEM private key found", keyPath)
	}
	pair, err := tls.X509KeyPair(chainPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("Error validating the certificate: %w", err)
	}
	if s.MinVersion < 0 || s.MinVersion >= len(minVersions) {
		return nil, fmt.Errorf("Invalid ssl_min_version %d", s.MinVersion)
	}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{pair},
		MinVersion:   minVersions[s.MinVersion],
		// memcached's session cache is off unless ssl_session_cache is given; Go resumes sessions with
		// tickets, so "off" is tickets off.
		SessionTicketsDisabled: !s.SessionCache,
		// memcached turns renegotiation off (SSL_OP_NO_RENEGOTIATION); a Go server never renegotiates.
	}
	switch s.VerifyMode {
	case VerifyNone:
		cfg.ClientAuth = tls.NoClientCert
	case VerifyPeer:
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	case VerifyRequire, VerifyOnce:
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	default:
		return nil, fmt.Errorf("Invalid ssl_verify_mode %d", s.VerifyMode)
	}
	if s.CACert != "" {
		caPEM, err := os.ReadFile(s.CACert)
		if err != nil {
			return nil, fmt.Errorf("Error loading the CA certificate: %s : %w", s.CACert, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, fmt.Errorf("Error loading the CA certificate: %s : no PEM certificate found", s.CACert)
		}
		cfg.ClientCAs = pool
	}
	if s.Ciphers != "" {
		suites, err := ParseCiphers(s.Ciphers)
		if err != nil {
			return nil, err
		}
		cfg.CipherSuites = suites
	}
	return cfg, nil
}

// hasBlock says whether data holds a PEM block whose type is typ.
func hasBlock(data []byte, typ func(string) bool) bool {
	for {
		var b *pem.Block
		if b, data = pem.Decode(data); b == nil {
			return false
		}
		if typ(b.Type) {
			return true
		}
	}
}

// isCertificate and isPrivateKey are the PEM block types of a certificate and of a private key of any kind.
func isCertificate(t string) bool { return t == "CERTIFICATE" }
func isPrivateKey(t string) bool  { return t == "PRIVATE KEY" || strings.HasSuffix(t, " PRIVATE KEY") }

// cipherNames maps the TLS 1.2 suites crypto/tls implements and does not call insecure to their IANA names
// (crypto/tls's) and OpenSSL's, so that an ssl_ciphers list written for memcached works here.
var cipherNames = func() map[string]uint16 {
	m := make(map[string]uint16)
	for _, cs := range tls.CipherSuites() {
		m[cs.Name] = cs.ID
	}
	openssl := map[string]string{
		"ECDHE-ECDSA-AES128-GCM-SHA256": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
		"ECDHE-RSA-AES128-GCM-SHA256":   "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
		"ECDHE-ECDSA-AES256-GCM-SHA384": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
		"ECDHE-RSA-AES256-GCM-SHA384":   "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
		"ECDHE-ECDSA-CHACHA20-POLY1305": "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
		"ECDHE-RSA-CHACHA20-POLY1305":   "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
		"ECDHE-ECDSA-AES128-SHA":        "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
		"ECDHE-RSA-AES128-SHA":          "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
		"ECDHE-ECDSA-AES256-SHA":        "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
		"ECDHE-RSA-AES256-SHA":          "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
		"AES128-GCM-SHA256":             "TLS_RSA_WITH_AES_128_GCM_SHA256",
		"AES256-GCM-SHA384":             "TLS_RSA_WITH_AES_256_GCM_SHA384",
		"AES128-SHA":                    "TLS_RSA_WITH_AES_128_CBC_SHA",
		"AES256-SHA":                    "TLS_RSA_WITH_AES_256_CBC_SHA",
	}
	for o, iana := range openssl {
		if id, ok := m[iana]; ok {
			m[o] = id
		}
	}
	return m
}()

// ParseCiphers reads an ssl_ciphers list: suite names separated by ':' (OpenSSL's separator) or ','.
// A name crypto/tls does not implement, or calls insecure, is refused with memcached's words.
func ParseCiphers(list string) ([]uint16, error) {
	var ids []uint16
	for _, name := range strings.FieldsFunc(list, func(r rune) bool { return r == ':' || r == ',' }) {
		id, ok := cipherNames[name]
		if !ok {
			return nil, fmt.Errorf("Error setting the provided cipher(s): %s (unknown or insecure suite %q)", list, name)
		}
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("Error setting the provided cipher(s): %s", list)
	}
	return ids, nil
}
