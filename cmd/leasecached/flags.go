package main

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/leasecached/leasecached/server"
)

// Limits on flag values. memcached refuses an item size limit below 1 KiB, above 1 GiB, or above half the
// memory limit (an item that big would leave no room for a second one); we use the same bounds.
const (
	minPort      = 1
	maxPort      = 1<<16 - 1
	minItemSize  = 1 << 10
	maxItemSize  = 1 << 30
	maxMemoryMB  = 1 << 20 // 1 TiB
	maxThreads   = 256
	maxConnLimit = 1 << 20
	// maxWindow bounds --lease-window, --stale-window and --grace: a lease or stale value held for longer than a
	// day is a configuration mistake, not a cache policy.
	maxWindow = 24 * time.Hour
	// maxHold bounds --hold: a read parked longer than a minute is a client timing out, not a cache hit.
	maxHold = time.Minute
	// maxIdleTimeout bounds --idle-timeout; the bound only keeps the seconds within memcached's int.
	maxIdleTimeout = 1<<31 - 1
)

// flagLogFormat is --log-format: text or json (internal/logging, doc/design/logging.md).
const flagLogFormat = "log-format"

// parseMetricsListen reads --metrics-listen: host:port, as Prometheus exporters are given theirs (an empty
// host is every interface). "" is off.
func parseMetricsListen(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return "", fmt.Errorf("%q: want host:port (127.0.0.1:9150, [::1]:9150, :9150)", s)
	}
	if n, err := strconv.Atoi(port); err != nil || n < minPort || n > maxPort {
		return "", fmt.Errorf("%q: the port must be between %d and %d", s, minPort, maxPort)
	}
	return s, nil
}

// parseIdleTimeout reads --idle-timeout: whole seconds as memcached's -o idle_timeout takes them ("60"), or
// a Go duration ("90s", "5m"). Connections are checked with a one-second clock, so a duration must be a
// whole number of seconds.
func parseIdleTimeout(s string) (time.Duration, error) {
	var d time.Duration
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 || n > maxIdleTimeout {
			return 0, fmt.Errorf("%q: must be between 0 and %d seconds", s, maxIdleTimeout)
		}
		d = time.Duration(n) * time.Second
	} else {
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("%q: want seconds (60) or a duration (90s, 5m)", s)
		}
		if d < 0 || d > maxIdleTimeout*time.Second {
			return 0, fmt.Errorf("%q: must be between 0 and %d seconds", s, maxIdleTimeout)
		}
	}
	if d%time.Second != 0 {
		return 0, fmt.Errorf("%q: must be whole seconds (connections are checked with a one-second clock)", s)
	}
	return d, nil
}

// parseSize reads a byte count with an optional k/m/g suffix (either case), as memcached's -I does.
func parseSize(s string) (int64, error) {
	if s == "" {
		return 0, fmt.Errorf("empty size")
	}
	mult := int64(1)
	switch strings.ToLower(s[len(s)-1:]) {
	case "k":
		mult = 1 << 10
	case "m":
		mult = 1 << 20
	case "g":
		mult = 1 << 30
	}
	digits := s
	if mult != 1 {
		digits = s[:len(s)-1]
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("invalid size %q (want a positive number with optional k, m or g suffix)", s)
	}
	if n > maxItemSize/mult {
		return 0, fmt.Errorf("size %q too large", s)
	}
	return n * mult, nil
}

// graceWarning is the line logged at start when --grace is not longer than the lease window: a refiller
// that never sets holds the key's lease past the end of its grace copy, and every reader then misses
// until the lease lapses, a herd grace was meant to prevent (doc/leases.md, "Grace and hold").
func graceWarning(cfg server.Config) string {
	if cfg.Grace == 0 || cfg.Grace > cfg.LeaseWindow {
		return ""
	}
	return fmt.Sprintf("--grace %s is not longer than --lease-window %s: a refill that never lands "+
		"outlasts the grace copy; choose a grace of several lease windows", cfg.Grace, cfg.LeaseWindow)
}

func validate(cfg server.Config, memMB int64) error {
	switch {
	case cfg.Port < minPort || cfg.Port > maxPort:
		return fmt.Errorf("-p/--port %d: must be between %d and %d", cfg.Port, minPort, maxPort)
	case len(cfg.Listeners) == 0:
		return fmt.Errorf("-l/--listen: no address to listen on")
	case memMB < 1 || memMB > maxMemoryMB:
		return fmt.Errorf("-m/--memory-limit %d: must be between 1 and %d megabytes", memMB, maxMemoryMB)
	case cfg.ConnLimit < 1 || cfg.ConnLimit > maxConnLimit:
		return fmt.Errorf("-c/--conn-limit %d: must be between 1 and %d", cfg.ConnLimit, maxConnLimit)
	case cfg.Threads < 1 || cfg.Threads > maxThreads:
		return fmt.Errorf("-t/--threads %d: must be between 1 and %d", cfg.Threads, maxThreads)
	case cfg.MaxItemSize < minItemSize:
		return fmt.Errorf("-I/--max-item-size %d: must be at least %d bytes", cfg.MaxItemSize, minItemSize)
	case cfg.LeaseWindow <= 0 || cfg.LeaseWindow > maxWindow:
		return fmt.Errorf("--lease-window %s: must be above 0 and at most %s", cfg.LeaseWindow, maxWindow)
	case cfg.StaleWindow < 0 || cfg.StaleWindow > maxWindow:
		return fmt.Errorf("--stale-window %s: must be between 0 and %s", cfg.StaleWindow, maxWindow)
	case cfg.Grace < 0 || cfg.Grace > maxWindow:
		return fmt.Errorf("--grace %s: must be between 0 and %s", cfg.Grace, maxWindow)
	case cfg.Hold < 0 || cfg.Hold > maxHold:
		return fmt.Errorf("--hold %s: must be between 0 and %s", cfg.Hold, maxHold)
	case cfg.HotKeys < 0 || cfg.HotKeys > server.MaxHotKeys:
		return fmt.Errorf("--hot-keys %d: must be between 0 and %d", cfg.HotKeys, server.MaxHotKeys)
	case cfg.DataSync < 0:
		return fmt.Errorf("--data-sync %s: must be 0 or more", cfg.DataSync)
	case cfg.DataLive != "" && cfg.DataDir == "":
		return fmt.Errorf("--data-live %s: needs --data-dir", cfg.DataLive)
	case int64(cfg.MaxItemSize) > cfg.MemoryLimit/2:
		return fmt.Errorf("-I/--max-item-size %d: cannot be more than half the memory limit (%d bytes)",
			cfg.MaxItemSize, cfg.MemoryLimit)
	}
	return nil
}

// protocolFlags reads -B, -S and --sasl-pwdb. As memcached: -S makes the protocol binary and -Y ascii, and
// refuses an explicit -B that would let the other protocol in.
func protocolFlags(c *cli.Context, cfg *server.Config) error {
	proto, err := server.ParseProtocol(c.String("protocol"))
	if err != nil {
		return fmt.Errorf("-B/--protocol: %w", err)
	}
	explicit := c.IsSet("protocol")
	sasl := c.Bool("enable-sasl")
	switch {
	case sasl && cfg.AuthFile != "":
		return errors.New("-S and -Y: SASL is for the binary protocol, -Y for the text protocol; use one")
	case sasl && explicit && proto != server.ProtocolBinary:
		return errors.New("-S: You cannot allow the ASCII protocol while using SASL")
	case cfg.AuthFile != "" && explicit && proto != server.ProtocolASCII:
		return errors.New("-Y: You cannot allow the BINARY protocol while using ascii authentication tokens")
	case sasl:
		proto = server.ProtocolBinary
	case cfg.AuthFile != "":
		proto = server.ProtocolASCII
	}
	cfg.Protocol = proto
	path := c.String("sasl-pwdb")
	switch {
	case sasl && path == "":
		return errors.New("-S needs --sasl-pwdb FILE: the user:password lines SASL PLAIN checks")
	case !sasl && path != "":
		return errors.New("--sasl-pwdb is only read with -S")
	case sasl:
		if err := checkReadable(path); err != nil {
			return fmt.Errorf("--sasl-pwdb: could not open %q for reading: %w", path, errors.Unwrap(err))
		}
		cfg.SASLFile = path
	}
	return nil
}
