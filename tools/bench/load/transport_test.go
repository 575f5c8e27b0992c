package load

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// fakeServer is a tiny memcached-like server for the transport tests: it answers get, gets and lease-get
// with a value for every key (or, with lease, LVALUE for some), set with STORED, and anything else with
// ERROR. It writes its replies in pieces of random size, so that the client's reads split them anywhere,
// and counts what it answered.
type fakeServer struct {
	ln   net.Listener
	opts fakeOptions
	wg   sync.WaitGroup

	requests, values, getKeys, sets atomic.Uint64
}

type fakeOptions struct {
	valueSize int
	lease     bool // keys ending in an odd digit get LVALUE (5: a stale value, others: a granted lease)
	maxPiece  int  // replies go out in writes of 1 to maxPiece bytes (0: all at once)
	rcvBuf    int  // SO_RCVBUF of the accepted connections (0: the default)
	slowRead  bool // sleep between reads, so that a large batch does not fit into the socket at once
	stuck     bool // read requests and never answer
	closeAt   int  // close the connection after this many requests (0: never)
	tls       bool // serve TLS (the certificate verifies against the client options startFakeServer returns in opts.client)
	client    TLSOptions
}

func startFakeServer(t *testing.T, o fakeOptions) *fakeServer {
	t.Helper()
	lc := net.ListenConfig{}
	if o.rcvBuf > 0 {
		lc.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, o.rcvBuf)
			})
			return errors.Join(err, serr)
		}
	}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if o.tls {
		var scfg *tls.Config
		o.client, scfg = testCerts(t)
		ln = tls.NewListener(ln, scfg)
	}
	s := &fakeServer{ln: ln, opts: o}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for n := uint64(0); ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				s.serve(c, rand.New(rand.NewPCG(n, 3)))
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		s.wg.Wait()
	})
	return s
}

func (s *fakeServer) addr() string { return s.ln.Addr().String() }

func (s *fakeServer) serve(c net.Conn, r *rand.Rand) {
	br := bufio.NewReaderSize(c, 4096)
	value := strings.Repeat("v", s.opts.valueSize)
	var out []byte
	served := 0
	for {
		if s.opts.slowRead {
			time.Sleep(200 * time.Microsecond)
		}
		line, err := br.ReadString('\n')
		if err != nil {
			return
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			return
		}
		switch f[0] {
		case "get", "gets", "lease-get":
			for _, k := range f[1:] {
				s.getKeys.Add(1)
				last := k[len(k)-1]
				switch {
				case s.opts.lease && last == '5':
					out = append(out, "LVALUE "+k+" 77 0 "+strconv.Itoa(len(value))+"\r\n"+value+"\r\n"...)
				case s.opts.lease && (last-'0')%2 == 1:
					out = append(out, "LVALUE "+k+" 78 0 0\r\n\r\n"...)
				default:
					s.values.Add(1)
					out = append(out, "VALUE "+k+" 0 "+strconv.Itoa(len(value))+"\r\n"+value+"\r\n"...)
				}
			}
			out = append(out, "END\r\n"...)
		case "set":
			n, _ := strconv.Atoi(f[len(f)-1])
			if _, err := io.CopyN(io.Discard, br, int64(n+2)); err != nil {
				return
			}
			s.sets.Add(1)
			out = append(out, "STORED\r\n"...)
		case "version": // a TLS connection's first exchange (startTLS), not part of the run
			out = append(out, "VERSION fake\r\n"...)
			served--
			s.requests.Add(^uint64(0))
		default:
			out = append(out, "ERROR\r\n"...)
		}
		s.requests.Add(1)
		served++
		if s.opts.closeAt > 0 && served == s.opts.closeAt {
			return
		}
		if s.opts.stuck {
			out = out[:0]
			continue
		}
		if br.Buffered() > 0 {
			continue // answer a pipeline in one go
		}
		for len(out) > 0 {
			n := len(out)
			if s.opts.maxPiece > 0 {
				n = min(n, 1+r.IntN(s.opts.maxPiece))
			}
			if _, err := c.Write(out[:n]); err != nil {
				return
			}
			out = out[n:]
		}
		out = out[:0]
	}
}

// TestLoadTransport runs the real transport against the fake server and checks that what the run counted
// is what the server answered.
func TestLoadTransport(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		o    fakeOptions
	}{
		{"p1 one thread, replies split in bytes", Config{Conns: 5, Pipeline: 1, MultiGet: 1, GetRatio: 0.9, ValueSize: 100,
			GenThreads: 1}, fakeOptions{maxPiece: 3}},
		{"p16 two threads, 7 connections", Config{Conns: 7, Pipeline: 16, MultiGet: 1, GetRatio: 0.5, ValueSize: 100,
			GenThreads: 2}, fakeOptions{maxPiece: 40}},
		{"4 KB values, 10-key multi-gets", Config{Conns: 3, Pipeline: 4, MultiGet: 10, GetRatio: 1, ValueSize: 4096,
			GenThreads: 2}, fakeOptions{maxPiece: 3000}},
		{"lease-get with LVALUE replies", Config{Conns: 4, Pipeline: 8, MultiGet: 3, GetRatio: 0.8, ValueSize: 50,
			GetCmd: "lease-get", GenThreads: 1}, fakeOptions{lease: true, maxPiece: 17}},
		{"batches larger than the socket buffers", Config{Conns: 2, Pipeline: 1024, MultiGet: 1, GetRatio: 0, ValueSize: 16384,
			GenThreads: 1}, fakeOptions{rcvBuf: 4096}},
		{"more threads than connections", Config{Conns: 2, Pipeline: 2, MultiGet: 2, GetRatio: 0.5, ValueSize: 10,
			GenThreads: 8}, fakeOptions{}},
		{"TLS p1, replies split in bytes", Config{Conns: 5, Pipeline: 1, MultiGet: 1, GetRatio: 0.9, ValueSize: 100,
			GenThreads: 2}, fakeOptions{maxPiece: 3, tls: true}},
		{"TLS p16 4 KB values, batches of several records", Config{Conns: 3, Pipeline: 16, MultiGet: 1, GetRatio: 0.5,
			ValueSize: 4096, GenThreads: 2}, fakeOptions{maxPiece: 3000, tls: true}},
		{"TLS batches larger than the socket buffers", Config{Conns: 2, Pipeline: 1024, MultiGet: 1, GetRatio: 0,
			ValueSize: 16384, GenThreads: 1}, fakeOptions{rcvBuf: 4096, tls: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			o.valueSize = tc.cfg.ValueSize
			s := startFakeServer(t, o)
			cfg := tc.cfg
			cfg.Addr, cfg.KeySize, cfg.Keys, cfg.Dist, cfg.Duration, cfg.Seed = s.addr(), 14, 1000, "uniform", 150*time.Millisecond, 1
			cfg.TLS = s.opts.client
			if cfg.GetCmd == "" {
				cfg.GetCmd = "get"
			}
			r, err := Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if r.Requests == 0 || r.Requests != s.requests.Load() || r.Hits != s.values.Load() ||
				r.GetKeys != s.getKeys.Load() || r.Sets != s.sets.Load() || r.SetFailed != 0 {
				t.Errorf("run counted %d requests, %d hits of %d get keys, %d sets; the server answered %d, %d of %d, %d",
					r.Requests, r.Hits, r.GetKeys, r.Sets, s.requests.Load(), s.values.Load(), s.getKeys.Load(), s.sets.Load())
			}
			if r.Requests%uint64(cfg.Pipeline) != 0 || r.P50us <= 0 || r.P50us > r.P99us || r.GenCores <= 0 {
				t.Errorf("implausible result %+v", r)
			}
			if want := min(cfg.GenThreads, cfg.Conns); r.Config.GenThreads != want {
				t.Errorf("ran %d threads, want %d", r.Config.GenThreads, want)
			}
			if o.tls != (r.TLSState != nil && r.TLSState.Version == "TLS 1.3") {
				t.Errorf("TLS state %+v", r.TLSState)
			}
			if cfg.GetCmd == "lease-get" && (r.Hits == 0 || r.Hits == r.GetKeys) {
				t.Errorf("lease-get: %d hits of %d keys, want some LVALUEs", r.Hits, r.GetKeys)
			}
		})
	}
}

func dialFake(t *testing.T, s *fakeServer, conns int) *loadTransport {
	t.Helper()
	cfg := &Config{Addr: s.addr(), Conns: conns, Pipeline: 2, MultiGet: 1, GetRatio: 1, ValueSize: 10, KeySize: 14,
		Keys: 100, Dist: "uniform", GetCmd: "get", Seed: 1}
	ks, _ := newKeySpace(0, cfg.Keys, cfg.KeySize)
	vs, _ := newValueSource(cfg.ValueSize)
	lt, err := dialLoad(cfg, ks, vs, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lt.close)
	return lt
}

// TestLoadTransportStuckServer: a server that stops answering fails the run at the deadline, and a
// cancelled run ends at once, not at the deadline.
func TestLoadTransportStuckServer(t *testing.T) {
	s := startFakeServer(t, fakeOptions{stuck: true})
	lt := dialFake(t, s, 3)
	start := time.Now()
	end := start.Add(50 * time.Millisecond)
	err := lt.run(context.Background(), end, end.Add(200*time.Millisecond))
	if !errors.Is(err, os.ErrDeadlineExceeded) || !strings.Contains(err.Error(), "no reply") {
		t.Errorf("err %v, want a deadline error", err)
	}
	if d := time.Since(start); d < 250*time.Millisecond || d > 2*time.Second {
		t.Errorf("the run failed after %v, want about 250 ms", d)
	}

	lt = dialFake(t, s, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start = time.Now()
	end = start.Add(time.Hour)
	if err := lt.run(ctx, end, end.Add(time.Hour)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("cancelled run: err %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("cancelled run took %v to end", d)
	}
}

func TestLoadTransportErrors(t *testing.T) {
	t.Run("server closes the connection", func(t *testing.T) {
		s := startFakeServer(t, fakeOptions{closeAt: 5, valueSize: 10})
		lt := dialFake(t, s, 2)
		end := time.Now().Add(time.Second)
		err := lt.run(context.Background(), end, end.Add(time.Second))
		if err == nil || !strings.Contains(err.Error(), "closed by the server") {
			t.Errorf("err %v", err)
		}
	})
	t.Run("error reply", func(t *testing.T) {
		s := startFakeServer(t, fakeOptions{})
		// The fake server answers ERROR to anything it does not know, like memcached to lease-get.
		lt := dialFake(t, s, 1)
		lt.conns[0].cfg.GetCmd = "bogus"
		end := time.Now().Add(time.Second)
		err := lt.run(context.Background(), end, end.Add(time.Second))
		var se *serverError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), "connection 0") {
			t.Errorf("err %v, want the server's ERROR on connection 0", err)
		}
	})
	t.Run("nothing listening", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		_, err = Run(context.Background(), Config{Addr: addr, Conns: 1, Pipeline: 1, MultiGet: 1, GetRatio: 1,
			ValueSize: 10, KeySize: 14, Keys: 10, Dist: "uniform", Duration: time.Second, GetCmd: "get"})
		if !errors.Is(err, syscall.ECONNREFUSED) || !strings.Contains(err.Error(), "connect "+addr) {
			t.Errorf("err %v, want connection refused", err)
		}
	})
	t.Run("unexpected bytes after a batch", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			buf := make([]byte, 1024)
			for {
				if _, err := c.Read(buf); err != nil {
					return
				}
				// Two replies to a batch of two gets, and one too many.
				if _, err := c.Write([]byte("END\r\nEND\r\nEND\r\n")); err != nil {
					return
				}
			}
		}()
		s := &fakeServer{ln: ln}
		lt := dialFake(t, s, 1)
		end := time.Now().Add(time.Second)
		if err := lt.run(context.Background(), end, end.Add(time.Second)); err == nil ||
			!strings.Contains(err.Error(), "unexpected bytes") && !strings.Contains(err.Error(), "no request outstanding") {
			t.Errorf("err %v", err)
		}
	})
}
