// Command leasecached is the cache daemon: a memcached-compatible server with Facebook-style leases.
// Flags use memcached's names (-p, -l, -m, -c, -t, -I, -v) so it drops into existing deployments.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/leasecached/leasecached/internal/logging"
	"github.com/leasecached/leasecached/internal/sdnotify"
	"github.com/leasecached/leasecached/lease"
	"github.com/leasecached/leasecached/server"
	"github.com/leasecached/leasecached/shard"
	"github.com/leasecached/leasecached/slab"
	"github.com/leasecached/leasecached/tlsconf"
)

// defaultDataSync is --data-sync's default: a machine that goes down loses at most this much of what was
// stored, and the disk sees at most one write of each page changed in it (doc/design/restart.md).
const defaultDataSync = 10 * time.Second

// stopTimeout bounds a clean shutdown: after SIGINT or SIGTERM the event loops get this long to answer
// what they have read and close their connections. Past it the process exits all the same (status 0: it
// was asked to stop), within the 5 s a service manager is usually given before SIGKILL.
const stopTimeout = 4 * time.Second

func main() {
	if err := newApp().Run(os.Args); err != nil {
		fmt.Fprintf(os.Stderr, "leasecached: %v\n", err)
		os.Exit(1)
	}
}

func newApp() *cli.App {
	var verbose int
	// cli's default --version has the alias -v, which memcached users know as "verbose".
	cli.VersionFlag = &cli.BoolFlag{Name: "version", Usage: "print the version and exit"}
	cli.VersionPrinter = func(c *cli.Context) {
		fmt.Fprintf(c.App.Writer, "leasecached %s (memcached %s protocol)\n", server.Version, server.ProtocolVersion)
	}
	return &cli.App{
		Name:                   "leasecached",
		Usage:                  "a memcached-compatible cache server with leases",
		Version:                server.Version,
		HideHelpCommand:        true,
		UseShortOptionHandling: true,
		// -l and -o are lists with their own grammar (listen.go, extopts.go), read from each value as given.
		DisableSliceFlagSeparator: true,
		// One line, not the usage screen: scripts and service managers log the reason, and a person can
		// ask for --help.
		OnUsageError: func(_ *cli.Context, err error, _ bool) error { return err },
		// The daemon is the app itself, so that memcached's command lines run it unchanged; a first argument
		// naming a command runs that instead.
		Commands: []*cli.Command{topCommand()},
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "port", Aliases: []string{"p"}, Value: server.DefaultPort, Usage: "TCP port to listen on"},
			&cli.StringSliceFlag{Name: "listen", Aliases: []string{"l"}, KeepSpace: true, DefaultText: server.DefaultListen,
				Usage: "addresses to listen on, separated by commas; may repeat. Each is host, host:port, [ipv6], " +
					"[ipv6]:port or * (every interface), the port -p unless given; with -Z, a notls: prefix " +
					"exempts one from TLS"},
			&cli.StringFlag{Name: "unix-socket", Aliases: []string{"s"},
				Usage: "listen on this unix socket `FILE` only (no TCP, as memcached's -s)"},
			&cli.StringFlag{Name: "unix-mask", Aliases: []string{"a"}, Value: fmt.Sprintf("%04o", server.DefaultUnixMask),
				Usage: "permissions of the unix socket file, in octal (like chmod)"},
			&cli.BoolFlag{Name: "enable-ssl", Aliases: []string{"Z"},
				Usage: "TLS on every TCP listener (except notls: ones); needs ssl_chain_cert"},
			&cli.StringFlag{Name: "auth-file", Aliases: []string{"Y"},
				Usage: "require text-protocol authentication with the user:password lines of `FILE` (memcached's -Y; re-read on SIGHUP)"},
			&cli.StringFlag{Name: "protocol", Aliases: []string{"B"}, Value: "auto",
				Usage: "protocols clients may speak: auto (the first byte decides), ascii or binary (memcached's -B)"},
			&cli.BoolFlag{Name: "enable-sasl", Aliases: []string{"S"},
				Usage: "require SASL PLAIN authentication of binary-protocol clients against --sasl-pwdb (implies -B binary)"},
			&cli.StringFlag{Name: "sasl-pwdb",
				Usage: "the user:password lines SASL checks, one a line, as -Y's `FILE` (re-read on SIGHUP)"},
			&cli.StringSliceFlag{Name: "extended", Aliases: []string{"o"}, KeepSpace: true,
				Usage: "memcached's extended options, key or key=value separated by commas; may repeat. " +
					extendedUsage()},
			&cli.StringFlag{Name: flagSSLChainCert, Usage: "TLS certificate chain `FILE` (PEM), the server's certificate first; re-read on SIGHUP"},
			&cli.StringFlag{Name: flagSSLKey, Usage: "TLS private key `FILE` (PEM) (default: the ssl_chain_cert file)"},
			&cli.StringFlag{Name: flagSSLCACert, Usage: "CA certificates `FILE` (PEM) client certificates are verified against"},
			&cli.StringFlag{Name: flagSSLVerifyMode, Value: strconv.Itoa(tlsconf.VerifyNone),
				Usage: "client certificates: 0 not asked for, 1 verified if sent, 2 required, 3 required (checked once)"},
			&cli.StringFlag{Name: flagSSLMinVersion, Value: strconv.Itoa(tlsconf.DefaultMinVersion),
				Usage: "oldest TLS version accepted: 0 TLS 1.0, 1 TLS 1.1, 2 TLS 1.2, 3 TLS 1.3"},
			&cli.StringFlag{Name: flagSSLCiphers, Usage: "TLS 1.2 cipher suites, colon-separated (default: Go's)"},
			&cli.StringFlag{Name: flagSSLWbufSize, Value: strconv.Itoa(tlsconf.DefaultWbufSize >> 10),
				Usage: "per-connection TLS output buffer, in kilobytes"},
			&cli.BoolFlag{Name: flagSSLSessionCache, Usage: "let TLS clients resume sessions (session tickets)"},
			&cli.Int64Flag{Name: "memory-limit", Aliases: []string{"m"}, Value: server.DefaultMemoryMB,
				Usage: "memory limit in megabytes: items, hash index and lease bookkeeping"},
			&cli.IntFlag{Name: "conn-limit", Aliases: []string{"c"}, Value: server.DefaultConnLimit,
				Usage: "max simultaneous connections"},
			&cli.IntFlag{Name: "threads", Aliases: []string{"t"}, Value: runtime.NumCPU(),
				Usage: "number of event loops"},
			&cli.StringFlag{Name: "max-item-size", Aliases: []string{"I"}, Value: "1m",
				Usage: "largest item stored, with k/m suffix (1k to 1g)"},
			&cli.BoolFlag{Name: "disable-flush-all", Aliases: []string{"F"}, Usage: "refuse flush_all (memcached's -F)"},
			&cli.BoolFlag{Name: "disable-dumping", Aliases: []string{"X"},
				Usage: "refuse stats cachedump and lru_crawler metadump (memcached's -X)"},
			&cli.BoolFlag{Name: "disable-watch", Aliases: []string{"W"}, Usage: "refuse watch (memcached's -W)"},
			&cli.BoolFlag{Name: "enable-shutdown", Aliases: []string{"A"},
				Usage: "let clients stop the server with the shutdown command (memcached's -A)"},
			&cli.BoolFlag{Name: "enable-largepages", Aliases: []string{"L"},
				Usage: "back item memory with 2 MiB transparent huge pages from the first touch, not only once written (see README)"},
			&cli.StringFlag{Name: "data-dir",
				Usage: "keep item memory in files in `DIR`, so that a restart on it, even after a crash, comes back warm (off unless given; see README)"},
			&cli.DurationFlag{Name: "data-sync", Value: defaultDataSync,
				Usage: "how often --data-dir is written to disk, which is what a machine reboot keeps (0: only at a clean stop)"},
			&cli.StringFlag{Name: "data-live", Value: liveAuto,
				Usage: "keep --data-dir's items live on the tmpfs `DIR`, each sync copying what changed into --data-dir: no store waits for the kernel's writeback (auto: " + slab.DefaultLiveRoot + " when it is a tmpfs with room for -m; off: map --data-dir's files; see README)"},
			&cli.DurationFlag{Name: "lease-window", Value: lease.DefaultWindow,
				Usage: "how long a lease granted by lease-get stays valid"},
			&cli.DurationFlag{Name: "stale-window", Value: lease.DefaultStaleWindow,
				Usage: "how long a deleted or expired value is kept for lease-get (0: none)"},
			&cli.DurationFlag{Name: "grace", Value: 0,
				Usage: "keep an expired value this long for plain get/gets/gat/gats while one reader refills the key (0: off; see doc/leases.md)"},
			&cli.DurationFlag{Name: "hold", Value: 0,
				Usage: "park a get/gets/gat/gats of a key another reader is refilling for up to this long, until the refill lands (0: off; see doc/leases.md)"},
			&cli.IntFlag{Name: "hot-keys", Value: server.DefaultHotKeys,
				Usage: "how many hot keys `stats hotkeys` lists, from sampled request counts (0: detection off; see doc/design/hotkeys.md)"},
			&cli.StringFlag{Name: flagIdleTimeout, Value: "0",
				Usage: "close connections that send nothing for longer than this, in seconds or as a duration (0: never)"},
			&cli.StringFlag{Name: "metrics-listen",
				Usage: "serve Prometheus metrics at http://`ADDR`/metrics, ADDR host:port (off unless given; see README)"},
			&cli.StringFlag{Name: "cpuprofile", Usage: "write a Go CPU profile (pprof) to this file until the server stops"},
			&cli.StringFlag{Name: "trace", Usage: "write a Go execution trace (go tool trace) to this file until the server stops"},
			&cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Count: &verbose,
				Usage: "log more: -v connection errors and refusals, -vv also connections opened and closed, -vvv also each command"},
			&cli.StringFlag{Name: flagLogFormat, Value: string(logging.Text),
				Usage: "log lines as text (for people) or json (one object a line, for log shippers)"},
		},
		Action: func(c *cli.Context) error {
			cfg, err := configFrom(c, verbose)
			if err != nil {
				return err
			}
			for _, r := range recorders {
				if path := c.String(r.flag); path != "" {
					stop, err := startRecording(r, path)
					if err != nil {
						return err
					}
					defer stop()
				}
			}
			fitDescriptors(cfg.ConnLimit, cfg.Threads, cfg.Logger)
			return serve(cfg, c.Bool("enable-shutdown"))
		},
	}
}

// storeConfig is the store's part of the daemon's settings.
func storeConfig(cfg server.Config) shard.Config {
	stale := cfg.StaleWindow
	if stale == 0 {
		stale = -1 // shard.Config's 0 means "default"; the flag's 0 means "keep none"
	}
	return shard.Config{MemoryLimit: cfg.MemoryLimit, MaxItemSize: cfg.MaxItemSize,
		LeaseWindow: cfg.LeaseWindow, StaleWindow: stale, Grace: cfg.Grace, Hold: cfg.Hold, LargePages: cfg.LargePages,
		DataDir: cfg.DataDir, DataSync: cfg.DataSync, DataLive: cfg.DataLive, SyncFailed: func(err error) {
			cfg.Logger.Error("--data-dir "+cfg.DataDir+": sync failed (what a machine reboot keeps is older)", slog.Any("err", err))
		}, PagesLost: func(err error) {
			cfg.Logger.Error("--data-dir "+cfg.DataDir+": stored pages could not be read in at the restart: "+
				"their items are lost", slog.Any("err", err))
		}, Emptying: func(why string) {
			cfg.Logger.Error("--data-dir " + cfg.DataDir + ": starting empty: " + why)
		}, Waiting: func(owner string) {
			cfg.Logger.Log(context.Background(), logging.LevelNotice, "--data-dir "+cfg.DataDir+": waiting for the server "+
				"that holds it to let go: "+owner)
		}, Opened: func(rs shard.RestartStats) { logOpened(cfg, rs) }, OpenFailed: func(err error) {
			// After the listener opened: the start fails as it would have before it.
			cfg.Logger.Error("storage: " + err.Error())
			os.Exit(1)
		}}
}

// logOpened says what the data directory held, once the store has opened it, and what its file
// systems risk.
func logOpened(cfg server.Config, rs shard.RestartStats) {
	if rs.CaughtUp != "" {
		cfg.Logger.Warn("--data-dir " + cfg.DataDir + ": the live copy in " + rs.CaughtUp + " was newer (its server did " +
			"not stop cleanly): written into " + cfg.DataDir + " while requests waited, then removed")
	}
	if rs.StartedEmpty == "" && rs.PagesLeft > 0 { // starting empty was said before the data went (Emptying)
		where := "this -m"
		if cfg.DataLive != "" {
			where = "this -m, or the live copy's tmpfs,"
		}
		cfg.Logger.Warn(fmt.Sprintf("--data-dir %s: %s has no room for %d stored pages: their %d items are dropped",
			cfg.DataDir, where, rs.PagesLeft, rs.ItemsLeft))
	}
	// Only the items file is mapped (and a live copy's small moved file): the live copy's, or with none
	// the directory's own; both are what they will be once the directory is open.
	where, hint := "--data-dir "+cfg.DataDir, "; a live copy on tmpfs (--data-live) maps nothing in it"
	if cfg.DataLive != "" {
		where, hint = "--data-live "+cfg.DataLive, ""
	}
	if why := slab.UnkeptReservations(cfg.DataDir, cfg.DataLive); why != "" {
		cfg.Logger.Warn(where + " is on " + why + ": a full file system can stop the server " +
			"(SIGBUS: a reserved block may still need space when it is written)" + hint)
	}
	if cfg.DataLive != "" && !slab.OnTmpfs(cfg.DataLive) {
		cfg.Logger.Warn("--data-live " + cfg.DataLive + " is not a tmpfs: the kernel writes the live copy back as it would --data-dir's files")
	}
}

// serve runs the server until it fails or SIGINT or SIGTERM stops it, or with enableShutdown the shutdown
// command; SIGHUP reloads its files (runUntilStopped).
func serve(cfg server.Config, enableShutdown bool) error {
	store, err := shard.New(storeConfig(cfg))
	if err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	sigs := make(chan os.Signal, 2)
	if enableShutdown {
		cfg.Shutdown = func() { // as memcached's shutdown raises SIGINT
			select {
			case sigs <- syscall.SIGINT:
			default: // a stop is already on its way
			}
		}
	}
	srv := server.New(cfg, store)
	// Never stopped: a signal that comes after the stop has finished, while the process exits, must not
	// kill it by the default action (exit status "killed by SIGTERM" instead of 0).
	signal.Notify(sigs, stopSignals...)
	signal.Notify(sigs, syscall.SIGHUP)
	returned, err := runUntilStopped(srv, sigs, stopTimeout, cfg.Logger, sdnotify.FromEnv())
	if returned {
		closeStore(store.Close, err == nil, sigs, cfg.Logger) // else an event loop may still be using it; exiting frees it
	}
	return err
}

func configFrom(c *cli.Context, verbose int) (server.Config, error) {
	if c.NArg() > 0 {
		return server.Config{}, fmt.Errorf("unexpected argument %q", c.Args().First())
	}
	cfg := server.Config{
		Port:         c.Int("port"),
		Threads:      c.Int("threads"),
		ConnLimit:    c.Int("conn-limit"),
		Verbosity:    verbose,
		LeaseWindow:  c.Duration("lease-window"),
		StaleWindow:  c.Duration("stale-window"),
		Grace:        c.Duration("grace"),
		Hold:         c.Duration("hold"),
		LargePages:   c.Bool("enable-largepages"),
		DataDir:      c.String("data-dir"),
		DataSync:     c.Duration("data-sync"),
		LogLevel:     new(slog.LevelVar),
		HotKeys:      c.Int("hot-keys"),
		DisableFlush: c.Bool("disable-flush-all"),
		DisableDump:  c.Bool("disable-dumping"),
		DisableWatch: c.Bool("disable-watch"),
	}
	format, err := logging.ParseFormat(c.String(flagLogFormat))
	if err != nil {
		return cfg, fmt.Errorf("--%s: %w", flagLogFormat, err)
	}
	cfg.LogLevel.Set(logging.Level(verbose))
	cfg.Logger = logging.New(c.App.ErrWriter, format, cfg.LogLevel)
	ext, err := extendedFlags(c.StringSlice("extended"))
	if err != nil {
		return cfg, fmt.Errorf("-o: %w", err)
	}
	opt := optionReader(c, ext)
	idleText, _, err := opt(flagIdleTimeout)
	if err != nil {
		return cfg, err
	}
	idle, err := parseIdleTimeout(idleText)
	if err != nil {
		return cfg, fmt.Errorf("--idle-timeout (-o idle_timeout): %w", err)
	}
	cfg.IdleTimeout = idle
	if cfg.MetricsListen, err = parseMetricsListen(c.String("metrics-listen")); err != nil {
		return cfg, fmt.Errorf("--metrics-listen: %w", err)
	}
	if err := listenersFrom(c, opt, &cfg); err != nil {
		return cfg, err
	}
	memMB := c.Int64("memory-limit")
	itemSize, err := parseSize(c.String("max-item-size"))
	if err != nil {
		return cfg, fmt.Errorf("-I/--max-item-size: %w", err)
	}
	cfg.MaxItemSize = int(itemSize)
	cfg.MemoryLimit = memMB << 20
	live := c.String("data-live")
	if live != liveAuto && live != liveOff {
		cfg.DataLive = live
	}
	if w := graceWarning(cfg); w != "" {
		cfg.Logger.Warn(w)
	}
	if err := validate(cfg, memMB); err != nil {
		return cfg, err
	}
	if live == liveAuto && cfg.DataDir != "" {
		cfg.DataLive = autoLive(slab.DefaultLiveRoot, cfg.DataDir, cfg.MemoryLimit, cfg.Logger)
	} else if w := liveRoomWarning(cfg.DataLive, cfg.DataDir, cfg.MemoryLimit); w != "" {
		cfg.Logger.Warn(w)
	}
	return cfg, nil
}

// existingAncestor is path, or the nearest directory above it that exists (--data-dir is made at start).
func existingAncestor(path string) string {
	path = filepath.Clean(path)
	for {
		if _, err := os.Stat(path); err == nil {
			return path
		}
		parent := filepath.Dir(path)
		if parent == path {
			return path
		}
		path = parent
	}
}

// --data-live's words: auto (the default) keeps the live copy in slab.DefaultLiveRoot where autoLive finds
// room for it, off maps --data-dir's own files; any other value is the root to keep it in.
const (
	liveAuto = "auto"
	liveOff  = "off"
)

// autoLive is where --data-live auto keeps data directory dir's live copy: under root when root is a tmpfs
// with room for the memory limit and dir is not on a tmpfs itself, else nowhere (""), so that the server
// maps dir's files (on a disk, its stores then fault after each sync's writeback; doc/design/restart-live.md). Either choice is one line at start, since the first keeps memory in root after the
// server stops and the second costs CPU.
func autoLive(root, dir string, memoryLimit int64, logger *slog.Logger) string {
	if slab.OnTmpfs(existingAncestor(dir)) {
		// Nothing writes tmpfs pages back, and a copy would hold the cache twice.
		logger.Log(context.Background(), logging.LevelNotice, "--data-dir "+dir+
			": item memory is mapped from it (a tmpfs: it survives the process, not a reboot)")
		return ""
	}
	if err := slab.LiveRoom(root, dir, memoryLimit); err != nil {
		logger.Log(context.Background(), logging.LevelNotice, "--data-dir "+dir+": item memory is mapped from "+
			dir+" ("+err.Error()+"): stores cost more CPU after each sync; see README \"Warm restart\"")
		return ""
	}
	logger.Log(context.Background(), logging.LevelNotice, "--data-dir "+dir+": item memory is kept live in "+root+
		", copied into "+dir+" at each sync, and stays in "+root+" after a stop, for the next start"+
		" (--data-live off: map "+dir+" instead)")
	return root
}

// liveRoomWarning is a warning when --data-live ROOT, a tmpfs, has no room for the memory limit's pages
// (auto would not have chosen it): the copy takes pages while the tmpfs has room, then the server evicts
// below -m. "" otherwise; a root that is not a tmpfs is warned about once the directory is open (logOpened).
func liveRoomWarning(root, dir string, memoryLimit int64) string {
	if root == "" {
		return ""
	}
	if at := existingAncestor(root); !slab.OnTmpfs(at) {
		return ""
	} else if err := slab.LiveRoom(at, dir, memoryLimit); err != nil {
		return "--data-live " + root + ": " + err.Error() + ": a page it has no room for is not taken, " +
			"so the server evicts before -m is reached"
	}
	return ""
}

// optionReader returns how configFrom reads a setting that has both an -o key and a long flag: its value
// (the flag's default when neither gives it), whether either gave it, and an error when both did.
func optionReader(c *cli.Context, ext map[string]string) func(flag string) (string, bool, error) {
	return func(flag string) (string, bool, error) {
		v, inExt := ext[flag]
		switch {
		case inExt && c.IsSet(flag):
			return "", false, errBothSpellings(flag)
		case inExt:
			return v, true, nil
		}
		return c.String(flag), c.IsSet(flag), nil
	}
}

// listenersFrom reads -l, -s, -a, -Z, the ssl_* settings and -Y into cfg (doc/design/listeners.md).
func listenersFrom(c *cli.Context, opt func(string) (string, bool, error), cfg *server.Config) error {
	if cfg.Port < minPort || cfg.Port > maxPort {
		return fmt.Errorf("-p/--port %d: must be between %d and %d", cfg.Port, minPort, maxPort)
	}
	mask, err := parseUnixMask(c.String("unix-mask"))
	if err != nil {
		return fmt.Errorf("-a/--unix-mask: %w", err)
	}
	cfg.UnixMask = mask
	tlsOn := c.Bool("enable-ssl")
	if tlsOn && c.IsSet("unix-socket") {
		// memcached 1.6.18 starts and serves the socket in plaintext; a request for TLS that would
		// encrypt nothing is refused instead, in memcached's words for -Z with -p 0.
		return errors.New("-Z: You cannot enable SSL without a TCP port (-s listens on the unix socket only)")
	}
	if cfg.TLS, err = tlsSettings(opt, tlsOn); err != nil {
		return err
	}
	if path := c.String("auth-file"); c.IsSet("auth-file") {
		if err := checkReadable(path); err != nil {
			// memcached: "Could not open authfile [FILE] for reading".
			return fmt.Errorf("-Y/--auth-file: could not open %q for reading: %w", path, errors.Unwrap(err))
		}
		cfg.AuthFile = path
	}
	if err := protocolFlags(c, cfg); err != nil {
		return err
	}

	listen := c.StringSlice("listen")
	if sock := c.String("unix-socket"); c.IsSet("unix-socket") {
		if err := checkUnixSocketPath(sock); err != nil {
			return fmt.Errorf("-s/--unix-socket: %w", err)
		}
		if c.IsSet("listen") {
			cfg.Listen = strings.Join(listen, ",")
			cfg.Logger.Warn("-l ignored: with -s, only the unix socket is listened on (as memcached does)", "listen", cfg.Listen)
		}
		cfg.Listeners = []server.Listener{{Network: "unix", Addr: sock}}
		return nil
	}
	if !c.IsSet("listen") {
		listen = []string{server.DefaultListen}
	}
	inter, entries, err := parseListen(listen, cfg.Port, tlsOn)
	if err != nil {
		return fmt.Errorf("-l/--listen: %w", err)
	}
	cfg.Listen = inter
	cfg.Listeners = tcpListeners(entries, tlsOn)
	if tlsOn && !anyTLS(cfg.Listeners) {
		return errors.New("-Z: every -l entry is notls:, so no listener would use TLS")
	}
	if w := exposedWarning(entries, tlsOn, cfg.AuthFile != "" || cfg.SASLFile != ""); w != "" {
		cfg.Logger.Warn(w)
	}
	return nil
}

func anyTLS(ls []server.Listener) bool {
	for _, l := range ls {
		if l.TLS {
			return true
		}
	}
	return false
}

// recorder is a whole-process recording the daemon can make of itself. Tuning starts from what the daemon
// does under real load, so these need no debug build: the CPU profile shows where the time goes, the
// execution trace shows when event loops wait for a thread or park (go tool trace -pprof=sched).
type recorder struct {
	flag  string
	start func(io.Writer) error
	stop  func()
}

var recorders = []recorder{
	{"cpuprofile", pprof.StartCPUProfile, pprof.StopCPUProfile},
	{"trace", trace.Start, trace.Stop},
}

// startRecording records into path until the returned func is called.
func startRecording(r recorder, path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", r.flag, err)
	}
	if err := r.start(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--%s: %w", r.flag, err)
	}
	return func() {
		r.stop()
		f.Close()
	}, nil
}
