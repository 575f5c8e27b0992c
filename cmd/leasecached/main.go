// Command leasecached is the cache daemon: a memcached-compatible server with Facebook-style leases.
// Flags use memcached's names (-p, -l, -m, -c, -t, -I, -v) so it drops into existing deployments.
package main

import (
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/leasecached/leasecached/lease"
	"github.com/leasecached/leasecached/server"
	"github.com/leasecached/leasecached/shard"
)

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
		// One line, not the usage screen: scripts and service managers log the reason, and a person can
		// ask for --help.
		OnUsageError: func(_ *cli.Context, err error, _ bool) error { return err },
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "port", Aliases: []string{"p"}, Value: server.DefaultPort, Usage: "TCP port to listen on"},
			&cli.StringFlag{Name: "listen", Aliases: []string{"l"}, Value: server.DefaultListen,
				Usage: "interface to listen on (default loopback only; 0.0.0.0 listens on every interface)"},
			&cli.Int64Flag{Name: "memory-limit", Aliases: []string{"m"}, Value: server.DefaultMemoryMB,
				Usage: "memory limit in megabytes: items, hash index and lease bookkeeping"},
			&cli.IntFlag{Name: "conn-limit", Aliases: []string{"c"}, Value: server.DefaultConnLimit,
				Usage: "max simultaneous connections"},
			&cli.IntFlag{Name: "threads", Aliases: []string{"t"}, Value: runtime.NumCPU(),
				Usage: "number of event loops"},
			&cli.StringFlag{Name: "max-item-size", Aliases: []string{"I"}, Value: "1m",
				Usage: "largest item stored, with k/m suffix (1k to 1g)"},
			&cli.BoolFlag{Name: "enable-largepages", Aliases: []string{"L"},
				Usage: "back item memory with 2 MiB transparent huge pages from the first touch, not only once written (see README)"},
			&cli.DurationFlag{Name: "lease-window", Value: lease.DefaultWindow,
				Usage: "how long a lease granted by lease-get stays valid"},
			&cli.DurationFlag{Name: "stale-window", Value: lease.DefaultStaleWindow,
				Usage: "how long a deleted or expired value is kept for lease-get (0: none)"},
			&cli.StringFlag{Name: "idle-timeout", Value: "0",
				Usage: "close connections that send nothing for longer than this, in seconds or as a duration (0: never)"},
			&cli.StringFlag{Name: "cpuprofile", Usage: "write a Go CPU profile (pprof) to this file until the server stops"},
			&cli.StringFlag{Name: "trace", Usage: "write a Go execution trace (go tool trace) to this file until the server stops"},
			&cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Count: &verbose,
				Usage: "log more (-vv: also connections)"},
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
			fitDescriptors(cfg.ConnLimit, cfg.Threads, cfg.Verbosity, cfg.Logger)
			return serve(cfg)
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
		LeaseWindow: cfg.LeaseWindow, StaleWindow: stale, LargePages: cfg.LargePages}
}

// serve runs the server until it fails or SIGINT or SIGTERM stops it (runUntilStopped).
func serve(cfg server.Config) error {
	store, err := shard.New(storeConfig(cfg))
	if err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	srv := server.New(cfg, store)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	returned, err := runUntilStopped(srv, sigs, stopTimeout, cfg.Logger)
	if returned {
		store.Close() // else an event loop may still be using it; exiting frees it
	}
	return err
}

func configFrom(c *cli.Context, verbose int) (server.Config, error) {
	if c.NArg() > 0 {
		return server.Config{}, fmt.Errorf("unexpected argument %q", c.Args().First())
	}
	cfg := server.Config{
		Listen:      c.String("listen"),
		Port:        c.Int("port"),
		Threads:     c.Int("threads"),
		ConnLimit:   c.Int("conn-limit"),
		Verbosity:   verbose,
		LeaseWindow: c.Duration("lease-window"),
		StaleWindow: c.Duration("stale-window"),
		LargePages:  c.Bool("enable-largepages"),
		Logger:      log.New(os.Stderr, "leasecached: ", log.LstdFlags),
	}
	idle, err := parseIdleTimeout(c.String("idle-timeout"))
	if err != nil {
		return cfg, fmt.Errorf("--idle-timeout: %w", err)
	}
	cfg.IdleTimeout = idle
	memMB := c.Int64("memory-limit")
	itemSize, err := parseSize(c.String("max-item-size"))
	if err != nil {
		return cfg, fmt.Errorf("-I/--max-item-size: %w", err)
	}
	cfg.MaxItemSize = int(itemSize)
	cfg.MemoryLimit = memMB << 20
	return cfg, validate(cfg, memMB)
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
