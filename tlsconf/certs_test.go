package tlsconf

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leasecached/leasecached/internal/testcert"
)

// Each setting becomes the crypto/tls field it names.
func TestSettingsMapToConfig(t *testing.T) {
	set := testcert.New(t)
	base := Settings{ChainCert: set.Server.CertFile, Key: set.Server.KeyFile, MinVersion: DefaultMinVersion}
	for _, tc := range []struct {
		name  string
		edit  func(*Settings)
		check func(*testing.T, *tls.Config)
	}{
		{"defaults", func(*Settings) {}, func(t *testing.T, c *tls.Config) {
			assert.Equal(t, uint16(tls.VersionTLS12), c.MinVersion)
			assert.Equal(t, tls.NoClientCert, c.ClientAuth)
			assert.True(t, c.SessionTicketsDisabled, "memcached's session cache is off by default")
			assert.Nil(t, c.CipherSuites)
		}},
		{"min version 3", func(s *Settings) { s.MinVersion = 3 }, func(t *testing.T, c *tls.Config) {
			assert.Equal(t, uint16(tls.VersionTLS13), c.MinVersion)
		}},
		{"min version 0", func(s *Settings) { s.MinVersion = 0 }, func(t *testing.T, c *tls.Config) {
			assert.Equal(t, uint16(tls.VersionTLS10), c.MinVersion)
		}},
		{"verify 1", func(s *Settings) { s.VerifyMode, s.CACert = VerifyPeer, set.CA.CertFile }, func(t *testing.T, c *tls.Config) {
			assert.Equal(t, tls.VerifyClientCertIfGiven, c.ClientAuth)
			assert.NotNil(t, c.ClientCAs)
		}},
		{"verify 2", func(s *Settings) { s.VerifyMode, s.CACert = VerifyRequire, set.CA.CertFile }, func(t *testing.T, c *tls.Config) {
			assert.Equal(t, tls.RequireAndVerifyClientCert, c.ClientAuth)
		}},
		{"verify 3", func(s *Settings) { s.VerifyMode, s.CACert = VerifyOnce, set.CA.CertFile }, func(t *testing.T, c *tls.Config) {
			assert.Equal(t, tls.RequireAndVerifyClientCert, c.ClientAuth)
		}},
		{"session cache", func(s *Settings) { s.SessionCache = true }, func(t *testing.T, c *tls.Config) {
			assert.False(t, c.SessionTicketsDisabled)
		}},
		{"key in the chain file", func(s *Settings) {
			both := filepath.Join(set.Dir, "both.pem")
			chain, err := os.ReadFile(set.Server.CertFile)
			require.NoError(t, err)
			key, err := os.ReadFile(set.Server.KeyFile)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(both, append(chain, key...), 0o600))
			s.ChainCert, s.Key = both, ""
		}, func(t *testing.T, c *tls.Config) { assert.Len(t, c.Certificates, 1) }},
		{"ciphers", func(s *Settings) {
			s.Ciphers = "ECDHE-ECDSA-AES128-GCM-SHA256:TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"
		},
			func(t *testing.T, c *tls.Config) {
				assert.Equal(t, []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
					tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256}, c.CipherSuites)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := base
			tc.edit(&s)
			c, err := New(s)
			require.NoError(t, err)
			cfg, err := c.Config().GetConfigForClient(nil)
			require.NoError(t, err)
			tc.check(t, cfg)
		})
	}
}

// A file that does not load is refused in memcached's words, naming the file; a Reload that fails keeps
// the configuration loaded before.
func TestLoadErrors(t *testing.T) {
	set := testcert.New(t)
	junk := filepath.Join(set.Dir, "junk.pem")
	require.NoError(t, os.WriteFile(junk, []byte("junk\n"), 0o600))
	missing := filepath.Join(set.Dir, "missing.pem")
	good := Settings{ChainCert: set.Server.CertFile, Key: set.Server.KeyFile, MinVersion: DefaultMinVersion}
	for _, tc := range []struct {
		name string
		edit func(*Settings)
		want string
	}{
		{"no chain file", func(s *Settings) { s.ChainCert = missing }, "Error loading the certificate chain: " + missing + " : "},
		{"chain not PEM", func(s *Settings) { s.ChainCert = junk }, "Error loading the certificate chain: " + junk + " : "},
		{"no key file", func(s *Settings) { s.Key = missing }, "Error loading the key: " + missing + " : "},
		{"key not PEM", func(s *Settings) { s.Key = junk }, "Error loading the key: " + junk + " : "},
		{"key of another certificate", func(s *Settings) { s.Key = set.Client.KeyFile }, "Error validating the certificate: "},
		{"no CA file", func(s *Settings) { s.CACert = missing }, "Error loading the CA certificate: " + missing + " : "},
		{"CA not PEM", func(s *Settings) { s.CACert = junk }, "Error loading the CA certificate: " + junk + " : "},
		{"unknown cipher", func(s *Settings) { s.Ciphers = "RC4-MD5" }, "Error setting the provided cipher(s): RC4-MD5"},
		{"empty cipher list", func(s *Settings) { s.Ciphers = ":" }, "Error setting the provided cipher(s): :"},
		{"min version 4", func(s *Settings) { s.MinVersion = 4 }, "Invalid ssl_min_version 4"},
		{"verify mode 4", func(s *Settings) { s.VerifyMode = 4 }, "Invalid ssl_verify_mode 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := good
			tc.edit(&s)
			_, err := New(s)
			require.Error(t, err)
			assert.True(t, strings.HasPrefix(err.Error(), tc.want), "got %q, want a prefix %q", err, tc.want)
			assert.NotContains(t, err.Error(), "\n")
		})
	}

	c, err := New(good)
	require.NoError(t, err)
	before, _ := c.Config().GetConfigForClient(nil)
	c.settings.Key = junk
	require.Error(t, c.Reload())
	after, _ := c.Config().GetConfigForClient(nil)
	assert.Same(t, before, after, "a failed Reload keeps the configuration loaded before")
}
