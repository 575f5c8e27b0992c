package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/leasecached/leasecached/top"
)

// topCommand is `leasecached top`: the live view of a server (package top). Its flags are its own: -s is
// the server here, not the daemon's unix socket.
func topCommand() *cli.Command {
	return &cli.Command{
		Name:                   "top",
		Usage:                  "a live view of a leasecached or memcached server's stats",
		UseShortOptionHandling: true,
		OnUsageError:           func(_ *cli.Context, err error, _ bool) error { return err },
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "server", Aliases: []string{"s"}, Value: top.DefaultAddr, Usage: "the server's `HOST:PORT`"},
			&cli.StringFlag{Name: "delay", Aliases: []string{"d"}, Value: "1s",
				Usage: "time between frames, in seconds (0.5) or as a duration (500ms)"},
			&cli.IntFlag{Name: "iterations", Aliases: []string{"n"}, Usage: "draw this many frames, then exit (0: until q or Ctrl-C)"},
			&cli.BoolFlag{Name: "tls", Usage: "connect with TLS (the server's -Z)"},
			&cli.StringFlag{Name: "tls-ca-cert", Usage: "CA certificates `FILE` (PEM) to verify the server with (default: the system's)"},
			&cli.StringFlag{Name: "tls-cert", Usage: "client certificate `FILE` (PEM), for a server that asks for one"},
			&cli.StringFlag{Name: "tls-key", Usage: "the client certificate's key `FILE` (PEM) (default: the --tls-cert file)"},
		},
		Action: func(c *cli.Context) error {
			opt, err := topOptions(c)
			if err != nil {
				return err
			}
			if err := top.Run(context.Background(), opt, os.Stdin, os.Stdout); err != nil {
				return fmt.Errorf("top: %w", err)
			}
			return nil
		},
	}
}

func topOptions(c *cli.Context) (top.Options, error) {
	if c.NArg() > 0 {
		return top.Options{}, fmt.Errorf("top: unexpected argument %q", c.Args().First())
	}
	// `leasecached -p 1 top` would otherwise run the view and ignore the daemon's -p without a word.
	if lineage := c.Lineage(); len(lineage) > 1 {
		if set := lineage[1].LocalFlagNames(); len(set) > 0 {
			return top.Options{}, fmt.Errorf("top: the daemon's flag -%s does not apply to top; top's options follow it", set[0])
		}
	}
	delay, err := parseDelay(c.String("delay"))
	if err != nil {
		return top.Options{}, fmt.Errorf("top: -d/--delay: %w", err)
	}
	if c.Int("iterations") < 0 {
		return top.Options{}, errors.New("top: -n/--iterations: must not be negative")
	}
	opt := top.Options{Addr: c.String("server"), Interval: delay, Iterations: c.Int("iterations")}
	if c.Bool("tls") {
		if opt.TLS, err = topTLS(c.String("tls-ca-cert"), c.String("tls-cert"), c.String("tls-key")); err != nil {
			return opt, fmt.Errorf("top: %w", err)
		}
	} else if c.IsSet("tls-ca-cert") || c.IsSet("tls-cert") || c.IsSet("tls-key") {
		return opt, errors.New("top: the --tls-* files are only read with --tls")
	}
	return opt, nil
}

// parseDelay reads top's -d: seconds, as top(1) takes them, or a Go duration; at least 100 ms.
func parseDelay(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		secs, serr := strconv.ParseFloat(s, 64)
		if serr != nil {
			return 0, fmt.Errorf("%q is neither seconds nor a duration", s)
		}
		d = time.Duration(secs * float64(time.Second))
	}
	if d < 100*time.Millisecond || d > time.Hour {
		return 0, fmt.Errorf("%q is out of range (100ms to 1h)", s)
	}
	return d, nil
}

// topTLS is the client side of the server's -Z: the CAs to verify it with, and a certificate for a server
// with ssl_verify_mode 2 or 3.
func topTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca-cert: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca-cert: no certificate in %s", caFile)
		}
	}
	if keyFile != "" && certFile == "" {
		return nil, errors.New("--tls-key needs --tls-cert")
	}
	if certFile != "" {
		if keyFile == "" {
			keyFile = certFile
		}
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
