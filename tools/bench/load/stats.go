package load

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"strconv"
	"time"
)

// statsTimeout bounds one "stats" exchange.
const statsTimeout = 5 * time.Second

// serverStats fetches the general "stats" of a server as name -> value.
func serverStats(addr string, tc *tls.Config) (map[string]string, error) {
	return serverStatsWithin(addr, tc, statsTimeout)
}

func serverStatsWithin(addr string, tc *tls.Config, timeout time.Duration) (map[string]string, error) {
	c, err := dialConn(addr, timeout, tc)
	if err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(timeout)); err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	if _, err := c.Write([]byte("stats\r\n")); err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	rr := newReplyReader(c)
	out := map[string]string{}
	for {
		l, err := rr.line()
		if err != nil {
			return nil, fmt.Errorf("stats: %w", err)
		}
		if bytes.Equal(l, replyEnd) {
			return out, nil
		}
		if e := checkErrorLine(l); e != nil {
			return nil, fmt.Errorf("stats: %w", e)
		}
		f := bytes.Fields(l)
		if len(f) >= 3 && string(f[0]) == "STAT" {
			out[string(f[1])] = string(bytes.Join(f[2:], []byte(" ")))
		}
	}
}

// statUint reads a numeric stat, 0 when absent or not a number.
func statUint(st map[string]string, name string) uint64 {
	v, _ := strconv.ParseUint(st[name], 10, 64)
	return v
}

// pingTimeout bounds one Ping.
const pingTimeout = time.Second

// Ping checks that the server at addr answers "version" (the harness waits for a server it started with
// it).
func Ping(addr string) error { return ping(addr, nil) }

// TLSPing is Ping over TLS with o (o.Enabled is implied).
func TLSPing(o TLSOptions) func(addr string) error {
	o.Enabled = true
	return func(addr string) error {
		tc, err := o.clientConfig(addr)
		if err != nil {
			return err
		}
		return ping(addr, tc)
	}
}

func ping(addr string, tc *tls.Config) error {
	c, err := dialConn(addr, pingTimeout, tc)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(pingTimeout)); err != nil {
		return err
	}
	if _, err := c.Write([]byte("version\r\n")); err != nil {
		return err
	}
	l, err := newReplyReader(c).line()
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(l, []byte("VERSION ")) {
		return fmt.Errorf("version reply %q", l)
	}
	return nil
}

// Stats fetches the general "stats" of a plaintext server as name -> value.
func Stats(addr string) (map[string]string, error) { return serverStats(addr, nil) }

// StatsWithin is Stats with its own bound on the exchange, for a server that may answer late (one
// rebuilding its index after a restart).
func StatsWithin(addr string, timeout time.Duration) (map[string]string, error) {
	return serverStatsWithin(addr, nil, timeout)
}
