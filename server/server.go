// Package server is leasecached's network front end: a gnet/v2 event-loop TCP server that feeds each
// connection's bytes to the protocol parser, runs the parsed commands against the shard store and writes
// the replies back in request order.
//
// The contract with gnet: every slice gnet hands us (Peek) is valid only inside OnTraffic, so a command is
// parsed, executed and its reply encoded before the input is discarded, and nothing is kept from the input
// except through the store (which copies). Replies of one OnTraffic call are batched into a single write.
package server

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/leasecached/leasecached/auth"
	"github.com/leasecached/leasecached/internal/logging"
	"github.com/leasecached/leasecached/metrics"
	"github.com/leasecached/leasecached/protocol"
	"github.com/leasecached/leasecached/shard"
	"github.com/leasecached/leasecached/tlsconf"
	"github.com/leasecached/leasecached/watch"
)

// ProtocolVersion is what `version` and `stats` report. Clients gate features (meta commands) on it, so it
// names the memcached release whose text protocol we implement rather than our own release number.
const ProtocolVersion = "1.6.18"

// Version is leasecached's own release, printed by --version and reported as stat leasecached_version.
const Version = "0.1.0"

// Defaults match memcached's where memcached has the setting.
const (
	DefaultPort        = 11211
	DefaultListen      = "127.0.0.1"
	DefaultMemoryMB    = 64
	DefaultConnLimit   = 1024
	DefaultMaxItemSize = protocol.DefaultMaxItemSize
)

// tooManyConns is what memcached (maxconns_fast, the 1.6 default) writes to a connection it refuses.
var tooManyConns = []byte("ERROR Too many open connections\r\n")

// Listener is one address connections are accepted on. See doc/design/listeners.md.
type Listener struct {
	Network string // "tcp" or "unix"
	Addr    string // host:port for tcp; the socket file's path for unix
	TLS     bool   // tcp only: connections speak TLS (-Z, unless the -l entry says notls:)
}

// Config is the daemon's settings as given on the command line.
type Config struct {
	// Listen is -l as given (entries joined with ","), what `stats settings` reports as inter; Port is -p.
	// Listeners are the addresses they name (and -s); when empty, one TCP listener on Listen:Port.
	Listen    string
	Port      int
	Listeners []Listener
	UnixMask  os.FileMode // -a: permissions of unix socket files (0: memcached's default, 0700)
	// TLS is the ssl_* settings, used when a listener has TLS set.
	TLS tlsconf.Settings
	// AuthFile is -Y: the text protocol's password file ("" : no authentication). See doc/design/auth.md.
	AuthFile string
	// Protocol is -B: which protocols a connection may speak (binary.go). SASLFile is --sasl-pwdb, set
	// with -S: binary connections authenticate with SASL PLAIN against its users ("" : no SASL).
	Protocol    Protocol
	SASLFile    string
	Threads     int
	ConnLimit   int
	MaxItemSize int
	MemoryLimit int64 // bytes
	// Verbosity is -v's count. Logger is where the server logs (nil: text on stderr); LogLevel, when set,
	// is the level its handler prints from, which the server sets from Verbosity and from memcached's
	// `verbosity N` (nil: the server makes its own, which matters only when Logger is nil too). See
	// doc/design/logging.md.
	Verbosity   int
	Logger      *slog.Logger
	LogLevel    *slog.LevelVar
	LeaseWindow time.Duration // how long a granted lease is valid
	StaleWindow time.Duration // how long a deleted or expired value is kept for lease-get (< 0: none)
	Grace       time.Duration // --grace: how long an expired value answers plain reads while one refills (0: off)
	Hold        time.Duration // --hold: how long a read of a key being refilled may wait for the refill (0: off)
	LargePages  bool          // -L: item memory on transparent huge pages (for the store: shard.Config)
	DataDir     string        // --data-dir: item memory kept in files there (for the store: shard.Config)
	DataSync    time.Duration // --data-sync: how often the data directory is written to disk
	DataLive    string        // --data-live: where on tmpfs the data directory's items are kept live ("": in DIR)
	IdleTimeout time.Duration // --idle-timeout: close connections idle this long, whole seconds (0: never; idle.go)
	HotKeys     int           // --hot-keys: how many keys `stats hotkeys` lists (0: detection off; hotkeys.go)
	// DisableFlush, DisableDump and DisableWatch are memcached's -F, -X and -W: flush_all, the item dumps
	// (stats cachedump, lru_crawler metadump) and watch are refused (disable.go).
	DisableFlush, DisableDump, DisableWatch bool
	// MetricsListen is --metrics-listen: host:port of the Prometheus endpoint ("": off; metrics.go).
	MetricsListen string
	// Shutdown is what the `shutdown` command calls (memcached's -A): the daemon stops as on SIGINT. nil:
	// the command is refused, as memcached refuses it without -A.
	Shutdown func()
}

// Server is the gnet event handler. One Server serves one listener.
type Server struct {
	gnet.BuiltinEventEngine

	cfg     Config
	store   *shard.Store
	stats   serverStats
	started time.Time
	pid     int
	logger  *slog.Logger
	// refusals limits the lines about refused connections (logger.go).
	refusals lineLimit

	detail    prefixStats
	hot       hotState     // hot-key detection (hotkeys.go)
	gathering atomic.Int64 // bytes claimed by large requests being gathered (bigreq.go)
	conns     sync.Map     // *conn -> its gnet.Conn, for `stats conns` and the idle check (idle.go)
	loops     loops        // what the connections of each event loop share
	eng       atomic.Pointer[gnet.Engine]
	ready     chan struct{}
	verbosity atomic.Int32
	tracing   atomic.Bool                   // verbosity asks for TRACE: each command is logged (logger.go)
	stopping  atomic.Bool                   // Stop was called: the engine's end was asked for
	gnetErr   atomic.Pointer[string]        // gnet's last error line, for Run's error when the engine ends by itself
	reloaders []reloader                    // what Reload re-reads, registered by New
	certs     atomic.Pointer[tlsconf.Certs] // set by Run when a listener is TLS (stream.go)
	streams   streamListeners               // the stream transport's listeners and connections (stream.go)
	// tlsBase is the configuration gnet's TLS connections are served with: one for all, as its session
	// ticket keys are its own (a configuration per connection would resume no session).
	tlsBase  *tls.Config
	tlsAddrs tlsAddrs // which of gnet's listeners are TLS (looptls.go); set before gnet starts
	// handshakes are the TLS handshakes of gnet's connections in progress (looptls.go): Run waits for them.
	handshakes sync.WaitGroup
	stopped    chan struct{} // closed by Stop: Run without gnet listeners returns
	stopOnce   sync.Once
	umask      func()         // restores the process's umask after the unix sockets are made (listeners.go)
	auth       *auth.Verifier // -Y's password file (auth.go); nil without -Y
	sasl       *auth.Verifier // -S's password file (binary.go); nil without -S
	authErr    error          // why -Y's or --sasl-pwdb's file did not load: Run fails with it
	// latencies are the event loops' request timings, nil without --metrics-listen; metrics is its
	// endpoint while Run serves (metrics.go).
	latencies *metrics.Latencies
	metrics   atomic.Pointer[metrics.Endpoint]
	watch     *watch.Hub // `watch`'s watchers and the producers' buffers (watch.go)
}

// New returns a server for cfg over store. The store's lifetime is the caller's.
func New(cfg Config, store *shard.Store) *Server {
	if cfg.LogLevel == nil {
		cfg.LogLevel = new(slog.LevelVar)
	}
	if cfg.Logger == nil {
		cfg.Logger = logging.New(os.Stderr, logging.Text, cfg.LogLevel)
	}
	s := &Server{cfg: cfg, store: store, started: time.Now(), pid: os.Getpid(), logger: cfg.Logger,
		ready: make(chan struct{}), stopped: make(chan struct{}), watch: watch.NewHub()}
	store.SetEvictionLog(evictionLog{s})
	s.setVerbosity(cfg.Verbosity)
	s.hot.init(cfg.HotKeys)
	if cfg.MetricsListen != "" {
		s.latencies = new(metrics.Latencies)
	}
	s.reloaders = append(s.reloaders, reloader{"TLS certificates", s.refreshCerts})
	s.loadAuth()
	return s
}

// Reload re-reads the files the server was started with, as SIGHUP asks (memcached reloads -Y's file on
// SIGHUP; leasecached also the TLS certificates). A file that does not load leaves what was loaded before
// in use, and the reason is logged; Reload returns the errors for the caller to report as well.
func (s *Server) Reload() []error {
	var errs []error
	for _, r := range s.reloaders {
		if err := r.reload(); err != nil {
			s.logger.Warn("reload failed: keeping the one loaded before", "what", r.what, "err", err)
			errs = append(errs, fmt.Errorf("%s: %w", r.what, err))
		}
	}
	return errs
}

// reloader is one file Reload re-reads.
type reloader struct {
	what   string // the setting, for the log: "-Y", "ssl_chain_cert"
	reload func() error
}

// Ready is closed once the listener accepts connections.
func (s *Server) Ready() <-chan struct{} { return s.ready }
