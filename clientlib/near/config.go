package near

import (
	"context"
	"net"
	"strings"
	"time"
)

// Config tunes a Cache. The zero value of every field means its default.
type Config struct {
	// TTL bounds how long a near copy is served without a new read from the server (default 1 s). It is
	// counted from when the read that filled the copy was sent. It is the only staleness bound for
	// writes a server does not report on its watch stream.
	TTL time.Duration
	// MaxEntries and MaxBytes (the sum of key and value lengths) bound the near copies (defaults 1024 and
	// 16 MiB). A value larger than MaxBytes/16 is never copied, so one item cannot empty the cache.
	MaxEntries int
	MaxBytes   int
	// HotReads reads of a key within HotWindow make it hot (defaults 16 and 1 s).
	HotReads  int
	HotWindow time.Duration
	// HotKeysPoll is how often "stats hotkeys" is asked of every server (default 5 s; negative: never).
	// A server that answers ERROR (memcached) leaves local counting alone to find hot keys.
	HotKeysPoll time.Duration
	// DialContext, when set, opens the watch connections as it returns them: no TLS or authentication
	// is added ("unix" for an address with "/"). nil (the default): they are opened as the client opens
	// its own, with its Config.DialContext, TLS and Username/Password, so a near-cache works against a
	// TLS or -Y server with no settings of its own.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// Logf receives rare notices (a stream lost, a server that refuses deletions). nil: nothing.
	Logf func(format string, args ...any)
}

// Defaults, chosen so that a copy is never much staler than a second and the cache stays small.
const (
	defaultTTL         = time.Second
	defaultMaxEntries  = 1024
	defaultMaxBytes    = 16 << 20
	defaultHotReads    = 16
	defaultHotWindow   = time.Second
	defaultHotKeysPoll = 5 * time.Second
	dialTimeout        = time.Second
	minBackoff         = 10 * time.Millisecond
	maxBackoff         = time.Second
)

func (c Config) withDefaults() Config {
	if c.TTL <= 0 {
		c.TTL = defaultTTL
	}
	if c.MaxEntries <= 0 {
		c.MaxEntries = defaultMaxEntries
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = defaultMaxBytes
	}
	if c.HotReads <= 0 {
		c.HotReads = defaultHotReads
	}
	if c.HotWindow <= 0 {
		c.HotWindow = defaultHotWindow
	}
	if c.HotKeysPoll == 0 {
		c.HotKeysPoll = defaultHotKeysPoll
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	return c
}

// network follows clientlib's rule: an address containing "/" is a Unix socket path.
func network(addr string) string {
	if strings.Contains(addr, "/") {
		return "unix"
	}
	return "tcp"
}
