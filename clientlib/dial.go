package clientlib

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/leasecached/leasecached/clientlib/internal/rawconn"
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
// proves what a request needs: the same network, with Config.TLS a completed handshake, and with
// Config.Username an accepted authentication.
type dialer struct {
	addr    string
	network string
	timeout time.Duration
	net     net.Dialer
	custom  func(ctx context.Context, network, addr string) (net.Conn, error) // Config.DialContext
	tls     *tls.Config                                                       // nil: plaintext
	user    string
	auth    []byte // the -Y attempt, "set auth 0 0 <n>\r\n<user> <password>\r\n"; nil: none
}

func newDialer(addr string, cfg *Config) *dialer {
	d := &dialer{addr: addr, network: network(addr), timeout: cfg.DialTimeout,
		net: net.Dialer{Timeout: cfg.DialTimeout}, custom: cfg.DialContext}
	if cfg.TLS != nil && d.network == "tcp" {
		d.tls = cfg.TLS.Clone()
		if d.tls.ServerName == "" {
			if host, _, err := net.SplitHostPort(addr); err == nil {
				d.tls.ServerName = host
			}
		}
	}
	if cfg.Username != "" {
		cred := cfg.Username + " " + cfg.Password
		d.user = cfg.Username
		d.auth = []byte("set auth 0 0 " + strconv.Itoa(len(cred)) + "\r\n" + cred + "\r\n")
	}
	return d
}

// validCredentials: the user and password must fit memcached's "<user> <password>" data line.
func validCredentials(user, password string) error {
	if strings.ContainsAny(user, " \r\n\x00") || strings.ContainsAny(password, "\r\n\x00") {
		return errors.New("clientlib: Username may not hold a space, and neither it nor Password a CR, LF or NUL")
	}
	return nil
}

// dial connects within ctx and the dial timeout; with TLS, the handshake is done before it returns, and
// with credentials the authentication, each within the dial timeout, so that a refused certificate or
// password is a dial error and not the first request's.
func (d *dialer) dial(ctx context.Context) (net.Conn, error) {
	var nc net.Conn
	var err error
	if d.custom != nil {
		cctx, cancel := context.WithTimeout(ctx, d.timeout)
		nc, err = d.custom(cctx, d.network, d.addr)
		cancel()
	} else {
		nc, err = d.net.DialContext(ctx, d.network, d.addr)
	}
	if err != nil {
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	if d.tls != nil {
		hctx, cancel := context.WithTimeout(ctx, d.timeout)
		defer cancel()
		tc := tls.Client(nc, d.tls)
		if err := tc.HandshakeContext(hctx); err != nil {
			_ = nc.Close()
			return nil, err
		}
		nc = tc
	}
	if d.auth != nil {
		if err := d.authenticate(ctx, nc); err != nil {
			_ = nc.Close()
			return nil, err
		}
	}
	return nc, nil
}

// authError is a server's refusal of the client's credentials: it answered the -Y attempt with anything
// but STORED (CLIENT_ERROR authentication failure, as memcached and leasecached do). It is not a failure
// of the server (the server is not ejected for it) and it matches ErrClientError.
type authError struct {
	addr, user, line string
}

func (e *authError) Error() string {
	return fmt.Sprintf("clientlib: %s refused authentication as %q: %q", e.addr, e.user, e.line)
}

func (e *authError) Is(target error) bool { return target == ErrClientError }

// authenticate sends the -Y attempt (doc/design/auth.md) and requires STORED, within the dial timeout.
func (d *dialer) authenticate(ctx context.Context, nc net.Conn) error {
	deadline := time.Now().Add(d.timeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	_ = nc.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(aLongTimeAgo) })
	defer stop()
	if _, err := nc.Write(d.auth); err != nil {
		return err
	}
	// Byte by byte: nothing after the reply line may be read into a buffer this connection drops.
	var line []byte
	var b [1]byte
	for len(line) < 512 {
		if _, err := nc.Read(b[:]); err != nil {
			return err
		}
		if b[0] == '\n' {
			break
		}
		line = append(line, b[0])
	}
	_ = nc.SetDeadline(time.Time{})
	if got := strings.TrimSuffix(string(line), "\r"); got != "STORED" {
		return &authError{addr: d.addr, user: d.user, line: got}
	}
	return nil
}

// dialTimeout is dial bounded by timeout alone (health probes run outside any caller's context).
func (d *dialer) dialTimeout(timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return d.dial(ctx)
}

func init() {
	rawconn.Dial = func(c any, ctx context.Context, addr string) (net.Conn, error) {
		cl := c.(*Client)
		return newDialer(addr, &cl.cfg).dial(ctx)
	}
}
