package clientlib

import (
	"context"
	"crypto/tls"
	"net"
	"time"
)

// Defaults for Config fields left zero. Each is chosen to be safe for a service that has not tuned
// anything: bounded waits, bounded connections, quick ejection of a dead server.
const (
	defaultTimeout        = 1 * time.Second        // per-request I/O bound when the context has no earlier deadline
	defaultDialTimeout    = 500 * time.Millisecond // bound of the connect, and of the TLS handshake and the authentication each
	defaultMaxOpenPerAddr = 4                      // pipelined connections per server (doc/design/client-pipelining.md)
	DefaultFailureLimit   = 2                      // consecutive failures that eject a server
	defaultRetryInterval  = 1 * time.Second        // how often an ejected server is probed
	defaultMaxValueSize   = 1 << 20                // memcached's default -I (1 MiB item size)
	// maxKeysPerGet bounds one "get k1 k2 ..." line (250-byte keys: about 25 KB a line).
	maxKeysPerGet = 100
)

// Distribution chooses how keys are spread over servers.
type Distribution int

const (
	// Ketama is consistent hashing compatible with libmemcached's weighted ketama and twemproxy's
	// `distribution: ketama, hash: md5`: adding or removing a server moves about 1/n of the keys.
	Ketama Distribution = iota
	// Modulo is gomemcache's ServerList rule, crc32(key) % len(servers), so a service moving from
	// gomemcache keeps every key where it was. Ejecting a server remaps most keys.
	Modulo
)

// Server names one cache server.
type Server struct {
	// Addr is "host:port", or the path of a Unix socket (memcached -s): an address containing "/" is a path,
	// gomemcache's rule, e.g. "/run/memcached/memcached.sock". Under Ketama a path is its own ring identity.
	Addr string
	// Weight scales the server's share of keys under Ketama (values below 1 count as 1). Modulo ignores it.
	Weight int
	// Name, if set, replaces the address as the server's identity on the ketama ring (twemproxy's
	// "host:port:weight name" form). Leave empty to place keys exactly as twemproxy does for unnamed servers.
	Name string
}

// Config configures a Client. The zero value of every field means its default.
type Config struct {
	Servers      []Server
	Distribution Distribution
	// Timeout bounds one request's I/O when the context's deadline is later or absent (default 1 s).
	Timeout time.Duration
	// DialTimeout bounds the connect, and the TLS handshake and the authentication each (default 500 ms).
	DialTimeout time.Duration
	// TLS, when not nil, makes every connection to a host:port server TLS with this configuration (memcached
	// -Z); its ServerName, when empty, is the address's host. Unix socket servers stay plaintext, as memcached
	// serves its -s socket. nil: plaintext.
	TLS *tls.Config
	// DialContext, when set, opens every connection instead of a net.Dialer (gomemcache's Client.DialContext):
	// network is "tcp", or "unix" for a socket path. Its ctx carries DialTimeout. TLS (when set) and
	// authentication are done on the connection it returns; a DialContext that returns a *tls.Conn itself
	// (tls.Dialer) leaves TLS nil.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// Username and Password, when Username is set, authenticate every new connection (requests' and
	// probes' alike) as memcached's and leasecached's -Y expects: the connection first sends
	// "set auth 0 0 <n>\r\n<Username> <Password>\r\n" and must get STORED. A refusal fails the request
	// with an error naming the server and its reply (errors.Is(err, ErrClientError)); it does not eject
	// the server.
	Username string
	Password string
	// MaxOpenPerAddr bounds each server's connections (default 4). Requests share them: a request goes to
	// the least loaded connection, written behind the others there (pipelined), and a connection is
	// dialled only when every open one is busy. A caller finding MaxOpenPerAddr connections each 128
	// requests deep waits, within its context. Connections are kept until idle for 30 s.
	MaxOpenPerAddr int
	// FailureLimit consecutive failures eject a server: a network error, or a request left without a
	// reply for Timeout, whether or not its caller's deadline ended sooner (the client waits for the
	// reply in the background). A server that hangs is out of the ring about Timeout after it stopped.
	FailureLimit int
	// RetryInterval is how long an ejected server stays out before each probe (a version command); default 1 s.
	RetryInterval time.Duration
	// MaxValueSize: larger values are refused with ErrValueTooLarge before anything is sent (default 1 MiB,
	// memcached's default -I).
	MaxValueSize int
	// Fill holds the defaults for GetOrFill calls that pass nil options.
	Fill FillOptions
	// Logf, when set, receives the client's rare notices: a server ejected or back in the ring, what a
	// server speaks (learned once), and one warning when FillTimeout exceeds a server's lease window. It
	// may be called from several goroutines at once. nil: nothing is logged.
	Logf func(format string, args ...any)
	// Observe, when set, is called for metrics and tracing after every request to a server (each round
	// trip, the client's own writes, give-backs and capability probes included) and after every fill, on
	// the goroutine that made it, with the context of the call that caused it (a tracer finds its parent
	// span there). It must be quick and safe for concurrent use. nil: nothing is measured, at no cost.
	Observe func(ctx context.Context, ev Event)
}

// Event is one request to a server, or one fill, as Config.Observe sees it. A span or a histogram
// sample can be made from it after the fact: it begins at Start and lasts Duration.
type Event struct {
	// Op is the command ("gets", "set", "delete", "lease-get", "lease-set", "mg", "ms", "md", "version",
	// "probe", ...), or "fill" for a fill function's call (one call of a GetMultiOrFill batch fill
	// included).
	Op string
	// Addr is the server; "" for a fill.
	Addr string
	// Keys is how many keys the request or fill carried (0 for flush_all, stats, version, probes).
	Keys     int
	Start    time.Time
	Duration time.Duration
	// Err is the failure: network, timeout, a server error reply, a protocol error, a fill's error. A
	// miss or a refused conditional write is an answer, not a failure: Err is nil.
	Err error
}

func (c Config) withDefaults() Config {
	if c.Timeout <= 0 {
		c.Timeout = defaultTimeout
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = defaultDialTimeout
	}
	if c.MaxOpenPerAddr <= 0 {
		c.MaxOpenPerAddr = defaultMaxOpenPerAddr
	}
	if c.FailureLimit <= 0 {
		c.FailureLimit = DefaultFailureLimit
	}
	if c.RetryInterval <= 0 {
		c.RetryInterval = defaultRetryInterval
	}
	if c.MaxValueSize <= 0 {
		c.MaxValueSize = defaultMaxValueSize
	}
	c.Fill = c.Fill.withDefaults()
	return c
}
