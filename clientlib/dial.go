package clientlib

import (
	"context"
	"crypto/tls"
	"net"
	"strings"
	"time"
)

// network is the network an address is dialled on: "unix" for a path (it contains "/", gomemcache's
// ServerList rule: no host:port does), "tcp" otherwise.
func network(addr string) string {
	if strings.Contains(addr, "/") {
		return "unix"
	}
	return "tcp"
}

// dialer opens connections to one server, for requests and for health probes alike, so that a probe
// proves what a request needs: the same network, and with Config.TLS a completed handshake.
type dialer struct {
	addr    string
	network string
	net     net.Dialer
	tls     *tls.Config // nil: plaintext
}

func newDialer(addr string, cfg *Config) *dialer {
	d := &dialer{addr: addr, network: network(addr), net: net.Dialer{Timeout: cfg.DialTimeout}}
	if cfg.TLS != nil && d.network == "tcp" {
		d.tls = cfg.TLS.Clone()
		if d.tls.ServerName == "" {
			if host, _, err := net.SplitHostPort(addr); err == nil {
				d.tls.ServerName = host
			}
		}
	}
	return d
}

// dial connects within ctx and the dial timeout; with TLS, the handshake is done before it returns, so
// that a refused certificate is a dial error and not the first request's.
func (d *dialer) dial(ctx context.Context) (net.Conn, error) {
	nc, err := d.net.DialContext(ctx, d.network, d.addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	if d.tls == nil {
		return nc, nil
	}
	hctx, cancel := context.WithTimeout(ctx, d.net.Timeout)
	defer cancel()
	tc := tls.Client(nc, d.tls)
	if err := tc.HandshakeContext(hctx); err != nil {
		_ = nc.Close()
		return nil, err
	}
	return tc, nil
}

// dialTimeout is dial bounded by timeout alone (health probes run outside any caller's context).
func (d *dialer) dialTimeout(timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return d.dial(ctx)
}
