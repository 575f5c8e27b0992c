package testcert

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The chains verify as the servers and clients under test will verify them: the server certificate for
// every loopback name the tests dial, the client certificate for client authentication, and neither
// against the other CA.
func TestChainsVerify(t *testing.T) {
	s := New(t)
	cases := []struct {
		name  string
		cert  *x509.Certificate
		roots *x509.CertPool
		dns   string
		usage x509.ExtKeyUsage
		ok    bool
	}{
		{"server for 127.0.0.1", s.Server.Cert, s.CA.Pool(), "127.0.0.1", x509.ExtKeyUsageServerAuth, true},
		{"server for ::1", s.Server.Cert, s.CA.Pool(), "::1", x509.ExtKeyUsageServerAuth, true},
		{"server for localhost", s.Server.Cert, s.CA.Pool(), "localhost", x509.ExtKeyUsageServerAuth, true},
		{"server not for another name", s.Server.Cert, s.CA.Pool(), "example.com", x509.ExtKeyUsageServerAuth, false},
		{"server not under the other CA", s.Server.Cert, s.OtherCA.Pool(), "127.0.0.1", x509.ExtKeyUsageServerAuth, false},
		{"client", s.Client.Cert, s.CA.Pool(), "", x509.ExtKeyUsageClientAuth, true},
		{"client is no server", s.Client.Cert, s.CA.Pool(), "", x509.ExtKeyUsageServerAuth, false},
		{"other client not under CA", s.OtherClient.Cert, s.CA.Pool(), "", x509.ExtKeyUsageClientAuth, false},
		{"other client under its own CA", s.OtherClient.Cert, s.OtherCA.Pool(), "", x509.ExtKeyUsageClientAuth, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.cert.Verify(x509.VerifyOptions{Roots: tc.roots, DNSName: tc.dns,
				KeyUsages: []x509.ExtKeyUsage{tc.usage}})
			if tc.ok {
				assert.NoError(t, err)
			} else {
				assert.Error(t, err)
			}
		})
	}
}

// The files on disk are the certificates in memory, in the PEM forms crypto/tls loads.
func TestFilesLoad(t *testing.T) {
	s := New(t)
	for _, p := range []*Pair{s.Server, s.Client, s.OtherClient} {
		c, err := tls.LoadX509KeyPair(p.CertFile, p.KeyFile)
		require.NoError(t, err, p.CertFile)
		require.Equal(t, p.Cert.Raw, c.Certificate[0])
		info, err := os.Stat(p.KeyFile)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "a private key is private")
	}
	pool := x509.NewCertPool()
	b, err := os.ReadFile(s.CA.CertFile)
	require.NoError(t, err)
	require.True(t, pool.AppendCertsFromPEM(b))
	_, err = s.Server.Cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: "127.0.0.1"})
	require.NoError(t, err)
}

// OpenSSL (what memcached, openssl s_client and Python's ssl module use) accepts the files as well.
func TestOpenSSLVerifies(t *testing.T) {
	path, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("openssl is not installed")
	}
	s := New(t)
	out, err := exec.Command(path, "verify", "-CAfile", s.CA.CertFile, "-purpose", "sslserver", s.Server.CertFile).CombinedOutput()
	require.NoError(t, err, "%s", out)
	out, err = exec.Command(path, "verify", "-CAfile", s.CA.CertFile, "-purpose", "sslclient", s.Client.CertFile).CombinedOutput()
	require.NoError(t, err, "%s", out)
	out, err = exec.Command(path, "verify", "-CAfile", s.CA.CertFile, s.OtherClient.CertFile).CombinedOutput()
	require.Error(t, err, "the other CA's client must not verify: %s", out)
	out, err = exec.Command(path, "pkey", "-in", s.Server.KeyFile, "-noout").CombinedOutput()
	require.NoError(t, err, "%s", out)
}

// A mutual-TLS handshake over loopback with the Set's own configurations: the server sees the client's
// certificate and the client the server's.
func TestHandshake(t *testing.T) {
	s := New(t)
	srvCert, err := s.Server.TLSCertificate()
	require.NoError(t, err)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{srvCert},
		ClientCAs: s.CA.Pool(), ClientAuth: tls.RequireAndVerifyClientCert})
	require.NoError(t, err)
	defer ln.Close()
	peer := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			peer <- err.Error()
			return
		}
		defer c.Close()
		tc := c.(*tls.Conn)
		_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
		if err := tc.Handshake(); err != nil {
			peer <- err.Error()
			return
		}
		peer <- tc.ConnectionState().PeerCertificates[0].Subject.CommonName
	}()
	cfg, err := s.ClientConfig(s.Client)
	require.NoError(t, err)
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ln.Addr().String(), cfg)
	require.NoError(t, err)
	defer c.Close()
	assert.Equal(t, "server-a", c.ConnectionState().PeerCertificates[0].Subject.CommonName)
	select {
	case got := <-peer:
		assert.Equal(t, "client", got)
	case <-time.After(5 * time.Second):
		t.Fatal("server side of the handshake did not finish")
	}
}

// A second server certificate is distinguishable from the first (common name and serial), and WriteTo
// puts it where the first was: what a reload test does.
func TestSecondServerReplacesFirst(t *testing.T) {
	s := New(t)
	b, err := s.CA.IssueServer("server-b")
	require.NoError(t, err)
	assert.Equal(t, "server-b", b.Cert.Subject.CommonName)
	assert.NotEqual(t, s.Server.Cert.SerialNumber, b.Cert.SerialNumber)
	certFile, keyFile := s.Server.CertFile, s.Server.KeyFile
	require.NoError(t, b.WriteTo(certFile, keyFile))
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	require.NoError(t, err)
	assert.Equal(t, b.Cert.Raw, c.Certificate[0])
	left, err := filepath.Glob(filepath.Join(s.Dir, ".testcert-*"))
	require.NoError(t, err)
	assert.Empty(t, left, "no temporary file is left behind")
}
