// Package testcert makes the certificates the TLS tests need, in Go, at test time: a CA, a server
// certificate for the loopback names, a client certificate signed by the CA, and a second, unrelated CA
// with a client certificate of its own (the "wrong CA" cases). Everything is written as PEM files into a
// t.TempDir(), the form memcached (-o ssl_chain_cert=...,ssl_key=...,ssl_ca_cert=...), leasecached,
// openssl s_client and Python's ssl module read.
//
// Nothing is checked in: generated certificates cannot expire under a test suite that outlives them, and
// no private key ever sits in the repository.
//
// Certificates are ECDSA P-256 (quick to generate: a whole Set takes milliseconds) and valid from an hour
// ago (clock skew) for a day. Every certificate has a random serial and a common name of the caller's
// choosing, so a test that reloads a server's certificate can tell from a connection's
// ConnectionState which one it was given.
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Validity of every certificate made here.
const (
	backdate = time.Hour      // NotBefore is this far in the past: tolerates a skewed clock
	lifetime = 24 * time.Hour // NotAfter is this far in the future: longer than any test run
)

// ServerNames are the names a server certificate is valid for: every way the tests dial a loopback
// server.
var (
	ServerDNSNames = []string{"localhost"}
	ServerIPs      = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
)

// Authority is a certificate authority that signs the certificates of a Set.
type Authority struct {
	Cert     *x509.Certificate
	key      *ecdsa.PrivateKey
	CertFile string // the CA certificate, PEM: what ssl_ca_cert and a client's trust store are given
	dir      string
}

// Pair is a certificate with its private key, on disk as two PEM files.
type Pair struct {
	Cert     *x509.Certificate
	CertFile string // the certificate, PEM (ssl_chain_cert)
	KeyFile  string // its private key, PKCS #8 PEM (ssl_key)
	certPEM  []byte
	keyPEM   []byte
}

// Set is everything one TLS test needs, written under Dir.
type Set struct {
	Dir     string
	CA      *Authority // signs Server and Client
	OtherCA *Authority // unrelated to CA: a client certificate it signs must be refused
	Server  *Pair      // CN "server-a", valid for ServerDNSNames and ServerIPs
	Client  *Pair      // CN "client", signed by CA, for client authentication
	// OtherClient is a client certificate signed by OtherCA: a server that verifies against CA refuses it.
	OtherClient *Pair
}

// New makes a Set in a fresh t.TempDir(). It fails the test on any error.
func New(t testing.TB) *Set {
	t.Helper()
	s, err := NewIn(t.TempDir())
	if err != nil {
		t.Fatalf("testcert: %v", err)
	}
	return s
}

// NewIn makes a Set in dir (which must exist).
func NewIn(dir string) (*Set, error) {
	ca, err := NewAuthority(dir, "test-ca")
	if err != nil {
		return nil, err
	}
	other, err := NewAuthority(dir, "other-ca")
	if err != nil {
		return nil, err
	}
	s := &Set{Dir: dir, CA: ca, OtherCA: other}
	if s.Server, err = ca.IssueServer("server-a"); err != nil {
		return nil, err
	}
	if s.Client, err = ca.IssueClient("client"); err != nil {
		return nil, err
	}
	if s.OtherClient, err = other.IssueClient("other-client"); err != nil {
		return nil, err
	}
	return s, nil
}

// NewAuthority makes a self-signed CA named cn and writes its certificate to dir/<cn>.crt.
func NewAuthority(dir, cn string) (*Authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("CA key: %w", err)
	}
	tmpl, err := template(cn)
	if err != nil {
		return nil, err
	}
	tmpl.IsCA = true
	tmpl.BasicConstraintsValid = true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("CA %s: %w", cn, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	a := &Authority{Cert: cert, key: key, CertFile: filepath.Join(dir, cn+".crt"), dir: dir}
	if err := writeFile(a.CertFile, pemBlock("CERTIFICATE", der)); err != nil {
		return nil, err
	}
	return a, nil
}

// IssueServer signs a server certificate named cn, valid for ServerDNSNames and ServerIPs, and writes it
// to dir/<cn>.crt and dir/<cn>.key. A second call with another cn gives a second server certificate (for
// reload tests).
func (a *Authority) IssueServer(cn string) (*Pair, error) {
	return a.issue(cn, x509.ExtKeyUsageServerAuth, func(c *x509.Certificate) {
		c.DNSNames = ServerDNSNames
		c.IPAddresses = ServerIPs
	})
}

// IssueClient signs a client certificate named cn and writes it to dir/<cn>.crt and dir/<cn>.key.
func (a *Authority) IssueClient(cn string) (*Pair, error) {
	return a.issue(cn, x509.ExtKeyUsageClientAuth, func(*x509.Certificate) {})
}

func (a *Authority) issue(cn string, usage x509.ExtKeyUsage, edit func(*x509.Certificate)) (*Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("key for %s: %w", cn, err)
	}
	tmpl, err := template(cn)
	if err != nil {
		return nil, err
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{usage}
	edit(tmpl)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.Cert, &key.PublicKey, a.key)
	if err != nil {
		return nil, fmt.Errorf("sign %s: %w", cn, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	p := &Pair{Cert: cert, certPEM: pemBlock("CERTIFICATE", der), keyPEM: pemBlock("PRIVATE KEY", pkcs8)}
	if err := p.WriteTo(filepath.Join(a.dir, cn+".crt"), filepath.Join(a.dir, cn+".key")); err != nil {
		return nil, err
	}
	return p, nil
}

// WriteTo writes the pair to certFile and keyFile, each replaced atomically (written beside it, then
// renamed over it), so that a server reloading its certificate never reads half a file. The pair's
// CertFile and KeyFile become these paths. A reload test issues a second certificate and writes it over
// the files the server was started with.
func (p *Pair) WriteTo(certFile, keyFile string) error {
	if err := writeFile(certFile, p.certPEM); err != nil {
		return err
	}
	if err := writeFile(keyFile, p.keyPEM); err != nil {
		return err
	}
	p.CertFile, p.KeyFile = certFile, keyFile
	return nil
}

// TLSCertificate is the pair as crypto/tls takes it (a client's Certificates).
func (p *Pair) TLSCertificate() (tls.Certificate, error) {
	return tls.X509KeyPair(p.certPEM, p.keyPEM)
}

// Pool is a certificate pool holding only this CA: a client's RootCAs, a server's ClientCAs.
func (a *Authority) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(a.Cert)
	return p
}

// ClientConfig is a TLS client configuration that trusts s.CA, presents cert when it is not nil, and
// verifies the server as 127.0.0.1 (the address the tests dial).
//
// The certificate is presented whenever the server asks for one, whoever signed it, as OpenSSL's clients
// do: crypto/tls, given it in Certificates, would withhold a certificate whose issuer is not among the CAs
// the server names in its request, and a "certificate from another CA" case would silently become a "no
// certificate" one.
func (s *Set) ClientConfig(cert *Pair) (*tls.Config, error) {
	cfg := &tls.Config{RootCAs: s.CA.Pool(), ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	if cert != nil {
		c, err := cert.TLSCertificate()
		if err != nil {
			return nil, err
		}
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &c, nil }
	}
	return cfg, nil
}

// template is the part every certificate shares: a random 128-bit serial, the common name, the validity.
func template(cn string) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("serial: %w", err)
	}
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"leasecached tests"}},
		NotBefore:    now.Add(-backdate),
		NotAfter:     now.Add(lifetime),
	}, nil
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// writeFile writes b to path through a temporary file and a rename, mode 0600 (a private key).
func writeFile(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".testcert-*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(b)
	cerr := tmp.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), path)
	}
	if werr != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, werr)
	}
	return nil
}
