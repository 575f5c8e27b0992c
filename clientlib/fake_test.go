package clientlib

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeServer is a scripted in-test server for the lease commands: it lets a test decide each
// lease-get's reply and each lease-set's outcome, and counts both and deletes. It reports a lease window
// in "stats settings", as leasecached does; other commands get "ERROR".
type fakeServer struct {
	t  *testing.T
	ln net.Listener

	// leaseGet returns the reply blocks (without END) for the n-th lease-get (n counts from 1).
	leaseGet func(n int64, key string) string
	// leaseSet returns the reply line (without CRLF) for a lease-set; default STORED.
	leaseSet func(key string, token uint64, data []byte) string
	// raw, if set, handles every request line instead (and may write anything, or nothing).
	raw func(line string, r *bufio.Reader, w io.Writer)

	leaseGets atomic.Int64
	leaseSets atomic.Int64
	deletes   atomic.Int64
	accepted  atomic.Int64

	mu    sync.Mutex
	sets  []string // "key token data" of each lease-set
	conns []net.Conn
	wg    sync.WaitGroup
}

func newFakeServer(t *testing.T) *fakeServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeServer{t: t, ln: ln}
	f.wg.Add(1)
	go f.accept()
	t.Cleanup(f.close)
	return f
}

func (f *fakeServer) addr() string { return f.ln.Addr().String() }

func (f *fakeServer) close() {
	f.ln.Close()
	f.mu.Lock()
	for _, c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

func (f *fakeServer) setsSeen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.sets...)
}

func (f *fakeServer) accept() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.accepted.Add(1)
		f.mu.Lock()
		f.conns = append(f.conns, c)
		f.mu.Unlock()
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer c.Close()
			f.serve(c)
		}()
	}
}

func (f *fakeServer) serve(c net.Conn) {
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimRight(line, "\r\n")
		if f.raw != nil {
			f.raw(line, r, c)
			continue
		}
		parts := strings.Fields(line)
		var reply string
		switch {
		case len(parts) == 2 && parts[0] == "lease-get":
			n := f.leaseGets.Add(1)
			reply = f.leaseGet(n, parts[1]) + "END\r\n"
		case len(parts) == 6 && parts[0] == "lease-set":
			f.leaseSets.Add(1)
			token, _ := strconv.ParseUint(parts[2], 10, 64)
			size, _ := strconv.Atoi(parts[5])
			data := make([]byte, size+2)
			if _, err := io.ReadFull(r, data); err != nil {
				return
			}
			data = data[:size]
			f.mu.Lock()
			f.sets = append(f.sets, fmt.Sprintf("%s %d %s", parts[1], token, data))
			f.mu.Unlock()
			reply = "STORED"
			if f.leaseSet != nil {
				reply = f.leaseSet(parts[1], token, data)
			}
			reply += "\r\n"
		case len(parts) == 2 && parts[0] == "delete":
			f.deletes.Add(1)
			reply = "NOT_FOUND\r\n"
		case len(parts) == 2 && parts[0] == "stats" && parts[1] == "settings":
			reply = "STAT lease_window 10s\r\nEND\r\n"
		case len(parts) == 1 && parts[0] == "version":
			reply = "VERSION fake\r\n"
		default:
			reply = "ERROR\r\n"
		}
		if _, err := io.WriteString(c, reply); err != nil {
			return
		}
	}
}

// Reply-block helpers.
func valueBlock(key, data string) string {
	return fmt.Sprintf("VALUE %s 0 %d\r\n%s\r\n", key, len(data), data)
}

func lvalueBlock(key string, token uint64, stale string) string {
	return fmt.Sprintf("LVALUE %s %d 0 %d\r\n%s\r\n", key, token, len(stale), stale)
}

// warm dials every server of c and learns what it speaks, with time to spare, so that a test's short
// deadline bounds only the requests it is about: a first dial and probe under -race on a loaded machine
// can take longer than such a deadline.
func warm(t *testing.T, c *Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	for _, srv := range c.serverSnapshot() {
		if _, err := c.capabilities(ctx, srv); err != nil {
			t.Fatal(err)
		}
	}
}

func newTestClient(t *testing.T, cfg Config, addrs ...string) *Client {
	t.Helper()
	for _, a := range addrs {
		cfg.Servers = append(cfg.Servers, Server{Addr: a})
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
