package top

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"
)

// Snapshot is what one poll of the server returns.
type Snapshot struct {
	At    time.Time
	Stats Stats   // `stats`; nil in the zero Snapshot, which stands for "before the first poll"
	Hot   HotKeys // `stats hotkeys`, when HotErr is nil
	// HotErr says why there are no hot keys: the server's error line (memcached has no `stats hotkeys`), or
	// a reply that is not one.
	HotErr error
}

// Client is one text-protocol connection that asks for stats.
type Client struct {
	conn    net.Conn
	r       *bufio.Reader
	timeout time.Duration
}

// Dial connects to addr (host:port) within timeout, with TLS when tlsConfig is not nil (the handshake is
// done before it returns). timeout also bounds each poll.
func Dial(ctx context.Context, addr string, tlsConfig *tls.Config, timeout time.Duration) (*Client, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if tlsConfig != nil {
		cfg := tlsConfig.Clone()
		if cfg.ServerName == "" && !cfg.InsecureSkipVerify {
			if host, _, err := net.SplitHostPort(addr); err == nil {
				cfg.ServerName = host
			}
		}
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, fmt.Errorf("TLS handshake: %w", err)
		}
		conn = tc
	}
	return &Client{conn: conn, r: bufio.NewReader(conn), timeout: timeout}, nil
}

// Close closes the connection; a poll blocked on it returns an error at once.
func (c *Client) Close() error { return c.conn.Close() }

// Stats sends `stats GROUP` ("" for the general stats) and reads the reply. A *ServerError leaves the
// connection usable; any other error does not.
func (c *Client) Stats(group string) (Stats, error) {
	req := "stats\r\n"
	if group != "" {
		req = "stats " + group + "\r\n"
	}
	if err := c.conn.SetDeadline(time.Now().Add(c.timeout)); err != nil {
		return nil, err
	}
	if _, err := c.conn.Write([]byte(req)); err != nil {
		return nil, err
	}
	return ReadStats(c.r)
}

// Poll takes a snapshot: the general stats, then the hot keys.
func (c *Client) Poll() (Snapshot, error) {
	st, err := c.Stats("")
	if err != nil {
		return Snapshot{}, err
	}
	snap := Snapshot{At: time.Now(), Stats: st}
	hot, err := c.Stats("hotkeys")
	var se *ServerError
	switch {
	case errors.As(err, &se):
		snap.HotErr = err
	case err != nil:
		return Snapshot{}, err
	default:
		snap.Hot, snap.HotErr = ParseHotKeys(hot)
	}
	return snap, nil
}
