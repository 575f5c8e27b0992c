package load

import (
	"crypto/tls"
	"encoding/binary"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// testCerts writes a certificate and key into a temporary directory: the client's options (verifying
// against it) and a server configuration.
func testCerts(t testing.TB) (TLSOptions, *tls.Config) {
	t.Helper()
	certFile, keyFile, err := WriteSelfSignedCert(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	return TLSOptions{Enabled: true, CAFile: certFile}, &tls.Config{Certificates: []tls.Certificate{pair}}
}

// tlsPair connects a generator connection (cfg) over TLS to a Go TLS server on the other end of a socket
// pair, both in run mode after the handshake and the version exchange; the test plays the server.
func tlsPair(t testing.TB, cfg *Config) (*genConn, *genThread, *tls.Conn, *tlsSocket) {
	t.Helper()
	opts, scfg := testCerts(t)
	ccfg, err := opts.clientConfig("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	ks, _ := newKeySpace(0, cfg.Keys, cfg.KeySize)
	vs, _ := newValueSource(cfg.ValueSize)
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fds[1]) })
	ssock := &tlsSocket{fd: fds[1], deadline: time.Now().Add(5 * time.Second)}
	srv := tls.Server(ssock, scfg)
	done := make(chan error, 1)
	go func() { // the server's side of startTLS: handshake, then answer "version"
		if err := srv.Handshake(); err != nil {
			done <- err
			return
		}
		l, err := newReplyReader(srv).line()
		if err == nil && string(l) != "version" {
			t.Errorf("server got %q, want version", l)
		}
		if err == nil {
			_, err = srv.Write([]byte("VERSION 1.0\r\n"))
		}
		done <- err
	}()
	c, err := newGenConn(cfg, ks, vs, 0, fds[0])
	if err != nil {
		t.Fatal(err)
	}
	if c.tls, c.sock, err = startTLS(fds[0], ccfg, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	c.ends = make([]int, 0, cfg.Pipeline)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ssock.deadline = time.Time{}
	th, err := newGenThread(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := th.add(c); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(th.close)
	return c, th, srv, ssock
}

// serveBatch is the test server's turn: it takes a whole batch (requests) and answers each with hit or set.
func serveBatch(t testing.TB, c *genConn, srv *tls.Conn, ssock *tlsSocket, req, reply []byte, hit, set string) []byte {
	for got := 0; got < len(c.wbuf); {
		n, err := srv.Read(req)
		if err == errWouldBlock {
			continue // the client's records are on their way (a socket pair delivers at once)
		}
		if err != nil {
			t.Fatal(err)
		}
		got += n
	}
	reply = reply[:0]
	for _, g := range c.isGet {
		if g {
			reply = append(reply, hit...)
		} else {
			reply = append(reply, set...)
		}
	}
	if _, err := srv.Write(reply); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Write(ssock.fd, ssock.out); err != nil {
		t.Fatal(err)
	}
	ssock.out = ssock.out[:0]
	return reply
}

// TestLoadBatchTLS runs whole batches over TLS (encrypting into records, writing them, reading and
// decrypting the replies, parsing) and checks what they count, and how much they allocate: crypto/tls
// allocates one small object per record it reads (the reader it hands to bytes.Buffer.ReadFrom), on the
// client and here on the test's server too; nothing else may.
func TestLoadBatchTLS(t *testing.T) {
	cfg := &Config{Conns: 1, Pipeline: 16, MultiGet: 1, GetRatio: 0.9, ValueSize: 100, KeySize: 14, Keys: 100000,
		Dist: "uniform", GetCmd: "get", Seed: 1}
	c, th, srv, ssock := tlsPair(t, cfg)
	hit := "VALUE k0000000000001 0 3\r\nabc\r\nEND\r\n"
	req, reply := make([]byte, 64<<10), make([]byte, 0, 64<<10)
	var stop atomic.Bool
	if err := th.send(c); err != nil {
		t.Fatal(err)
	}
	batch := func() {
		reply = serveBatch(t, c, srv, ssock, req, reply, hit, "STORED\r\n")
		for done := false; !done; {
			var err error
			if done, err = c.receive(); err != nil {
				t.Fatal(err)
			}
		}
		if err := th.complete(c, time.Since(th.base), time.Hour, &stop); err != nil {
			t.Fatal(err)
		}
	}
	// One record each way per batch: at most one allocation per record read on each side.
	if a := testing.AllocsPerRun(200, batch); a > 2 && !raceEnabled {
		t.Errorf("a TLS batch allocates %v times, want at most 2 (one per record read, client and server)", a)
	}
	if c.requests == 0 || c.parser.sets == 0 || c.parser.hits == 0 || c.rend != 0 {
		t.Errorf("counted %d requests, %d sets, %d hits; %d bytes left", c.requests, c.parser.sets, c.parser.hits, c.rend)
	}
}

// TestWriteRecords: a batch goes out in as few records of at most 16 KB as whole requests allow, never a
// record ending inside a request (memcached 1.6.18 stalls on that; see tls.go).
func TestWriteRecords(t *testing.T) {
	cfg := &Config{Conns: 1, Pipeline: 16, MultiGet: 1, GetRatio: 0.5, ValueSize: 4096, KeySize: 14, Keys: 1000,
		Dist: "uniform", GetCmd: "get", Seed: 3}
	c, _, _, _ := tlsPair(t, cfg)
	for range 50 {
		c.encode()
		if err := writeRecords(c.tls, c.wbuf, c.ends); err != nil {
			t.Fatal(err)
		}
		// Record lengths from the headers: the payload is the plaintext, its content type byte and a 16-byte tag.
		var sizes []int
		for b := c.sock.out; len(b) > 0; {
			n := int(binary.BigEndian.Uint16(b[3:5]))
			sizes = append(sizes, n-17)
			b = b[5+n:]
		}
		c.sock.out = c.sock.out[:0]
		// The cuts must be request ends, each record at most 16 KB, and no two neighbours fit in one.
		at := 0
		for i, n := range sizes {
			at += n
			if n > maxRecordPlain || !slices.Contains(c.ends, at) {
				t.Fatalf("records %v: record %d ends at %d, not at a request's end (%v) or too large", sizes, i, at, c.ends)
			}
			if i > 0 {
				prev := sizes[i-1]
				if next := c.ends[slices.Index(c.ends, at-n)+1] - (at - n); prev+next <= maxRecordPlain {
					t.Fatalf("records %v: the first request of record %d (%d bytes) fits into record %d", sizes, i, next, i-1)
				}
			}
		}
		if at != len(c.wbuf) {
			t.Fatalf("records %v carry %d bytes of %d", sizes, at, len(c.wbuf))
		}
	}
}
