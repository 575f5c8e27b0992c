package load

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/leasecached/leasecached/tools/bench/rawio"
	"golang.org/x/sys/unix"
)

// TLS in the generator. A load run's connections are raw nonblocking sockets driven by epoll (transport.go);
// crypto/tls wants a net.Conn. tlsSocket is that net.Conn over the raw socket, in two modes:
//   - while dialing (a deadline is set), reads and writes wait in poll(2): the handshake, and a first
//     exchange that takes in the session tickets a TLS 1.3 server sends after it, run before the measured
//     window, as blocking code;
//   - during the run, a read that finds no data returns errWouldBlock, a temporary net.Error, which
//     crypto/tls passes up without poisoning the connection (it keeps a partial record for the next read),
//     and a write only appends the records to out, which the thread's event loop writes to the socket as it
//     writes a plaintext batch, with EPOLLOUT when the socket is full. crypto/tls makes every write error
//     permanent, so a write must never fail with EAGAIN.

// How requests go into records. A batch is written in as few records as it can be without a record ending
// inside a request (writeRecords): records of up to 16 KB, each holding whole requests. memcached 1.6.18
// needs the second: it reads a set's value past its read buffer straight from the TLS connection, and what
// is left of that record behind the value stays in OpenSSL's buffer, where its event loop, waiting for the
// socket, does not see it until more bytes arrive. A closed-loop client, waiting for those replies, then
// waits for ever (128 pipelined 4 KB sets in 16 KB records hung it; the same sets cut at request
// boundaries did not). A client that encrypts each request on its own (one record per request) would
// never meet that, but pays a record per request on both sides.

// maxRecordPlain is the most plaintext a TLS record carries (2^14 bytes, RFC 8446).
const maxRecordPlain = 16 << 10

// writeRecords writes the requests in b, which end at the offsets ends (ascending; the last is len(b)), in
// as few records of at most maxRecordPlain bytes as whole requests allow; a request larger than that is
// cut by crypto/tls.
func writeRecords(tc *tls.Conn, b []byte, ends []int) error {
	start, last := 0, 0
	for _, e := range ends {
		if e-start > maxRecordPlain && last > start {
			if _, err := tc.Write(b[start:last]); err != nil {
				return err
			}
			start = last
		}
		last = e
	}
	if start < len(b) {
		_, err := tc.Write(b[start:])
		return err
	}
	return nil
}

// writeBatch writes the requests in b (ending at ends) to conn, a TLS one with writeRecords.
func writeBatch(conn net.Conn, b []byte, ends []int) error {
	if tc, ok := conn.(*tls.Conn); ok {
		return writeRecords(tc, b, ends)
	}
	_, err := conn.Write(b)
	return err
}

// TLSOptions ask a run to speak TLS. The zero value is plaintext.
type TLSOptions struct {
	Enabled bool `json:"enabled"`
	// CAFile holds the PEM certificates the server's chain is verified against (the system roots when empty).
	CAFile string `json:"ca_file,omitempty"`
	// SkipVerify accepts any server certificate.
	SkipVerify bool `json:"skip_verify,omitempty"`
	// ServerName is checked against the certificate (default: the host of the address).
	ServerName string `json:"server_name,omitempty"`
	// Version is "1.3" (the default) or "1.2": the only version offered.
	Version string `json:"version,omitempty"`
	// Resume lets a run's connections resume each other's sessions (a shared client session cache). Off by
	// default: every connection does a full handshake, as a fleet of independent clients does; either way
	// the handshakes are outside the measured window.
	Resume bool `json:"resume,omitempty"`
}

// TLSState is what a connection negotiated, for the result.
type TLSState struct {
	Version string `json:"version"`
	Cipher  string `json:"cipher"`
	Resumed bool   `json:"resumed,omitempty"`
}

func (s TLSState) String() string { return s.Version + " " + s.Cipher }

// clientConfig builds the crypto/tls configuration for connections to addr; nil when TLS is off.
func (o TLSOptions) clientConfig(addr string) (*tls.Config, error) {
	if !o.Enabled {
		return nil, nil
	}
	c := &tls.Config{
		ServerName:         o.ServerName,
		InsecureSkipVerify: o.SkipVerify,
		// Go starts each connection with small records and grows them after 128 KB (dynamic record
		// sizing, for browsers' first paint). OpenSSL-based clients write one full record per write: so
		// does the generator, from the first batch of every run (each run dials anew).
		DynamicRecordSizingDisabled: true,
	}
	switch o.Version {
	case "", "1.3":
		c.MinVersion, c.MaxVersion = tls.VersionTLS13, tls.VersionTLS13
	case "1.2":
		c.MinVersion, c.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
	default:
		return nil, fmt.Errorf("-tls-version %q: want 1.2 or 1.3", o.Version)
	}
	if c.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("tls: server name from %q: %w", addr, err)
		}
		c.ServerName = host
	}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls: no PEM certificate in %s", o.CAFile)
		}
	}
	if o.Resume {
		c.ClientSessionCache = tls.NewLRUClientSessionCache(0)
	}
	return c, nil
}

func stateOf(cs tls.ConnectionState) TLSState {
	return TLSState{Version: tls.VersionName(cs.Version), Cipher: tls.CipherSuiteName(cs.CipherSuite),
		Resumed: cs.DidResume}
}

// dialConn opens a blocking connection for the net.Conn-based modes (fill, verify, hitratio, stats, ping),
// with a TLS handshake when tc is not nil.
func dialConn(addr string, timeout time.Duration, tc *tls.Config) (net.Conn, error) {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil || tc == nil {
		return conn, err
	}
	tconn := tls.Client(conn, tc)
	if err := tconn.SetDeadline(time.Now().Add(timeout)); err != nil {
		conn.Close()
		return nil, err
	}
	if err := tconn.Handshake(); err != nil {
		conn.Close()
		return nil, fmt.Errorf("tls handshake: %w", err)
	}
	return tconn, tconn.SetDeadline(time.Time{})
}

// wouldBlock is errWouldBlock's type: a temporary net.Error, so crypto/tls keeps the connection usable.
type wouldBlock struct{}

func (wouldBlock) Error() string   { return "no data yet" }
func (wouldBlock) Timeout() bool   { return true }
func (wouldBlock) Temporary() bool { return true }

// errWouldBlock is what a run-mode read of an empty socket returns; a zero-size value, so returning it
// allocates nothing.
var errWouldBlock net.Error = wouldBlock{}

// tlsSocket is the net.Conn under a generator connection's tls.Conn (see the top of this file).
type tlsSocket struct {
	fd int
	// deadline, when set, is dial mode: reads and writes wait for the socket until then.
	deadline time.Time
	// out holds records crypto/tls wrote in run mode and the event loop has not yet written.
	out []byte
}

func (s *tlsSocket) Read(p []byte) (int, error) {
	for {
		n, err := rawio.Read(s.fd, p)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			if s.deadline.IsZero() {
				return 0, errWouldBlock
			}
			if err := s.wait(unix.POLLIN); err != nil {
				return 0, err
			}
			continue
		case err != nil:
			return 0, err
		case n == 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

func (s *tlsSocket) Write(p []byte) (int, error) {
	if s.deadline.IsZero() {
		s.out = append(s.out, p...)
		return len(p), nil
	}
	for off := 0; off < len(p); {
		n, err := rawio.Write(s.fd, p[off:])
		switch {
		case err == unix.EINTR:
		case err == unix.EAGAIN:
			if err := s.wait(unix.POLLOUT); err != nil {
				return off, err
			}
		case err != nil:
			return off, err
		default:
			off += n
		}
	}
	return len(p), nil
}

// wait polls the socket for events until the dial deadline.
func (s *tlsSocket) wait(events int16) error {
	for {
		left := time.Until(s.deadline)
		if left <= 0 {
			return os.ErrDeadlineExceeded
		}
		pfd := []unix.PollFd{{Fd: int32(s.fd), Events: events}}
		n, err := unix.Poll(pfd, rawio.CeilMsec(left))
		if err == unix.EINTR || (err == nil && n == 0) {
			continue
		}
		return err
	}
}

// The rest of net.Conn: the socket belongs to its generator thread, which closes it; crypto/tls asks for
// nothing else of it on the client side.
func (s *tlsSocket) Close() error                     { return nil }
func (s *tlsSocket) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (s *tlsSocket) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (s *tlsSocket) SetDeadline(time.Time) error      { return nil }
func (s *tlsSocket) SetReadDeadline(time.Time) error  { return nil }
func (s *tlsSocket) SetWriteDeadline(time.Time) error { return nil }

// startTLS does the handshake on a freshly connected raw socket, then one "version" exchange, which takes
// in whatever the server sends after the handshake (TLS 1.3 session tickets) and warms both sides' record
// paths; all of it before the measured window. On return the socket is in run mode.
func startTLS(fd int, cfg *tls.Config, timeout time.Duration) (*tls.Conn, *tlsSocket, error) {
	sock := &tlsSocket{fd: fd, deadline: time.Now().Add(timeout)}
	tc := tls.Client(sock, cfg)
	if err := tc.Handshake(); err != nil {
		return nil, nil, fmt.Errorf("tls handshake: %w", err)
	}
	if _, err := tc.Write([]byte("version\r\n")); err != nil {
		return nil, nil, fmt.Errorf("tls: version: %w", err)
	}
	l, err := newReplyReader(tc).line()
	if err != nil {
		return nil, nil, fmt.Errorf("tls: version: %w", err)
	}
	if len(l) < 8 || string(l[:8]) != "VERSION " {
		return nil, nil, fmt.Errorf("tls: version reply %q", l)
	}
	sock.deadline = time.Time{}
	return tc, sock, nil
}

// tlsRead is one run-mode read of plaintext: errWouldBlock when nothing has arrived, io.EOF when the server
// closed the connection.
func tlsRead(tc *tls.Conn, p []byte) (int, error) {
	n, err := tc.Read(p)
	if n > 0 {
		return n, nil // an error after data (a close_notify behind it) shows on the next read
	}
	if errors.Is(err, errWouldBlock) {
		return 0, errWouldBlock
	}
	return 0, err
}

// WriteSelfSignedCert writes a new self-signed ECDSA P-256 certificate for 127.0.0.1, ::1 and localhost,
// valid for a day, and its key (PKCS #8), as cert.pem and key.pem in dir: what make bench gives every TLS
// server, and its clients as the CA (-tls-ca). The equivalent of `openssl req -x509 -newkey ec -pkeyopt
// ec_paramgen_curve:prime256v1`, without needing openssl.
func WriteSelfSignedCert(dir string) (certFile, keyFile string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))
	if err != nil {
		return "", "", err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "leasecached-bench"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", err
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}), 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}
