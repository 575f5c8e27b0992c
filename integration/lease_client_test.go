package integration

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The lease tests (lease_*_test.go) check doc/leases.md over the wire. This file holds what they
// share: a small line-oriented client that speaks lease-get / lease-set (and the few classic and meta
// commands the scenarios need), safe to use from goroutines because it never calls t.Fatal.

// Token values of the wire contract (leases.md, rule 1).
const (
	// hotMissToken is the token of an LVALUE that tells the reader someone else refills.
	hotMissToken = 1
	// minGrantToken is the smallest token a granted lease may carry.
	minGrantToken = 2
	// mcrouterTokenPrefix is the top 32 bits of the tokens mcrouter reserves for itself.
	mcrouterTokenPrefix = 0x7aceb00c
)

// leaseOpTimeout bounds one request/reply exchange of leaseConn, so a wedged server fails a test instead
// of hanging it.
const leaseOpTimeout = 5 * time.Second

// requireLeases starts nothing but skips the test under the harness self-test, where a second memcached
// plays leasecached: memcached has no lease-get, so these tests cannot pass there by design.
func requireLeases(t testing.TB) {
	t.Helper()
	if os.Getenv(selfTestEnv) != "" {
		t.Skipf("%s: memcached has no leases", selfTestEnv)
	}
}

// leaseConn is one client connection with buffered, line-oriented I/O.
type leaseConn struct {
	c net.Conn
	r *bufio.Reader
	w *bufio.Writer
}

// dialLease connects to d; the caller closes the connection.
func dialLease(d *daemon) (*leaseConn, error) {
	c, err := net.DialTimeout("tcp", d.addr, dialTimeout)
	if err != nil {
		return nil, fmt.Errorf("dial %s at %s: %w", d.name, d.addr, err)
	}
	return &leaseConn{c: c, r: bufio.NewReader(c), w: bufio.NewWriter(c)}, nil
}

// mustDialLease connects to d and closes the connection when the test ends.
func mustDialLease(t testing.TB, d *daemon) *leaseConn {
	t.Helper()
	lc, err := dialLease(d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lc.Close() })
	return lc
}

func (lc *leaseConn) Close() error { return lc.c.Close() }

// send writes s and flushes; the deadline it sets also covers reading the reply that follows.
func (lc *leaseConn) send(s string) error {
	_ = lc.c.SetDeadline(time.Now().Add(leaseOpTimeout))
	if _, err := lc.w.WriteString(s); err != nil {
		return fmt.Errorf("write %q: %w", truncate([]byte(s), 60), err)
	}
	if err := lc.w.Flush(); err != nil {
		return fmt.Errorf("write %q: %w", truncate([]byte(s), 60), err)
	}
	return nil
}

// line reads one reply line without its CRLF.
func (lc *leaseConn) line() (string, error) {
	s, err := lc.r.ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("read reply line (got %q): %w", s, err)
	}
	if !strings.HasSuffix(s, "\r\n") {
		return "", fmt.Errorf("reply line %q does not end with CRLF", s)
	}
	return strings.TrimSuffix(s, "\r\n"), nil
}

// call sends a command whose reply is one line (storage, delete, incr, touch, flush_all, ms, md) and
// returns that line.
func (lc *leaseConn) call(cmd string) (string, error) {
	if err := lc.send(cmd); err != nil {
		return "", err
	}
	return lc.line()
}

// data reads a data block of n bytes and its CRLF.
func (lc *leaseConn) data(n int) ([]byte, error) {
	buf := make([]byte, n+2)
	if _, err := io.ReadFull(lc.r, buf); err != nil {
		return nil, fmt.Errorf("read %d-byte data block: %w", n, err)
	}
	if !bytes.HasSuffix(buf, []byte("\r\n")) {
		return nil, fmt.Errorf("data block %q not terminated by CRLF", truncate(buf, 60))
	}
	return buf[:n], nil
}

// leaseBlock is one key's answer to lease-get.
type leaseBlock struct {
	key   string
	hit   bool   // VALUE: a fresh item
	token uint64 // LVALUE: >= 2 granted, 1 hot miss
	flags uint32
	data  []byte // the value, or the stale value of an LVALUE (empty without one)
}

// leaseGet sends lease-get for keys and parses its blocks up to END.
func (lc *leaseConn) leaseGet(keys ...string) ([]leaseBlock, error) {
	if err := lc.send("lease-get " + strings.Join(keys, " ") + "\r\n"); err != nil {
		return nil, err
	}
	var out []leaseBlock
	for {
		l, err := lc.line()
		if err != nil {
			return nil, err
		}
		if l == "END" {
			return out, nil
		}
		b, n, err := parseLeaseHeader(l)
		if err != nil {
			return nil, err
		}
		if b.data, err = lc.data(n); err != nil {
			return nil, fmt.Errorf("%s: %w", l, err)
		}
		out = append(out, b)
	}
}

// parseLeaseHeader reads "VALUE <key> <flags> <bytes>" or "LVALUE <key> <token> <flags> <bytes>".
func parseLeaseHeader(l string) (leaseBlock, int, error) {
	f := strings.Fields(l)
	var b leaseBlock
	var nums []string
	switch {
	case len(f) == 4 && f[0] == "VALUE":
		b.hit = true
		nums = f[2:]
	case len(f) == 5 && f[0] == "LVALUE":
		tok, err := strconv.ParseUint(f[2], 10, 64)
		if err != nil {
			return b, 0, fmt.Errorf("LVALUE token in %q: %w", l, err)
		}
		b.token = tok
		nums = f[3:]
	default:
		return b, 0, fmt.Errorf("unexpected lease-get reply line %q", l)
	}
	b.key = f[1]
	flags, err := strconv.ParseUint(nums[0], 10, 32)
	if err != nil {
		return b, 0, fmt.Errorf("flags in %q: %w", l, err)
	}
	n, err := strconv.Atoi(nums[1])
	if err != nil || n < 0 {
		return b, 0, fmt.Errorf("length in %q: %v", l, err)
	}
	b.flags = uint32(flags)
	return b, n, nil
}

// leaseGet1 is lease-get of one key.
func (lc *leaseConn) leaseGet1(key string) (leaseBlock, error) {
	bs, err := lc.leaseGet(key)
	if err != nil {
		return leaseBlock{}, err
	}
	if len(bs) != 1 || bs[0].key != key {
		return leaseBlock{}, fmt.Errorf("lease-get %s: %d blocks, want one for the key: %+v", key, len(bs), bs)
	}
	return bs[0], nil
}

// leaseSet sends lease-set and returns its reply line.
func (lc *leaseConn) leaseSet(key string, token uint64, flags uint32, exptime int, val []byte) (string, error) {
	return lc.call(fmt.Sprintf("lease-set %s %d %d %d %d\r\n%s\r\n", key, token, flags, exptime, len(val), val))
}

// set sends a classic set and returns its reply line.
func (lc *leaseConn) set(key string, flags uint32, exptime int, val []byte) (string, error) {
	return lc.call(fmt.Sprintf("set %s %d %d %d\r\n%s\r\n", key, flags, exptime, len(val), val))
}

// get reads one key with a classic get: ok is false on a miss.
func (lc *leaseConn) get(key string) (val []byte, flags uint32, ok bool, err error) {
	if err := lc.send("get " + key + "\r\n"); err != nil {
		return nil, 0, false, err
	}
	got, err := readValues(lc.r)
	if err != nil {
		return nil, 0, false, fmt.Errorf("get %s: %w", key, err)
	}
	v, ok := got[key]
	return v.data, uint32(v.flags), ok, nil
}

// stats returns the general stats as name -> value.
func (lc *leaseConn) stats() (map[string]string, error) {
	if err := lc.send("stats\r\n"); err != nil {
		return nil, err
	}
	var all []byte
	for {
		l, err := lc.line()
		if err != nil {
			return nil, fmt.Errorf("stats: %w", err)
		}
		if l == "END" {
			return statsMap(all), nil
		}
		all = append(all, l...)
		all = append(all, "\r\n"...)
	}
}

// checkGrantToken applies rule 1 to a token that was handed out as a lease.
func checkGrantToken(tok uint64) error {
	switch {
	case tok < minGrantToken:
		return fmt.Errorf("granted token %d: must be >= %d", tok, minGrantToken)
	case tok>>32 == mcrouterTokenPrefix:
		return fmt.Errorf("granted token %#x: in mcrouter's reserved range %#x", tok, mcrouterTokenPrefix)
	}
	return nil
}
