package load

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"time"
)

// Main is the load subcommand: one closed-loop run, a human table and the JSON line.
func Main(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	cfg := Config{}
	fs.StringVar(&cfg.Addr, "addr", "127.0.0.1:11211", "server address")
	fs.IntVar(&cfg.Conns, "conns", 50, "connections (spread over the -gen-threads threads)")
	fs.IntVar(&cfg.Pipeline, "pipeline", 1, "requests per batch written before reading the replies")
	fs.IntVar(&cfg.MultiGet, "multiget", 1, "keys per get command")
	fs.Float64Var(&cfg.GetRatio, "get-ratio", 0.9, "fraction of requests that are gets (the rest are sets)")
	fs.IntVar(&cfg.ValueSize, "value-size", 100, "value bytes")
	fs.IntVar(&cfg.KeySize, "key-size", 14, "key bytes")
	fs.Uint64Var(&cfg.Keys, "keys", 100000, "number of distinct keys")
	fs.Uint64Var(&cfg.KeyBase, "key-base", 0, "first key number (separates key sets of different runs)")
	fs.StringVar(&cfg.Dist, "dist", "uniform", "key distribution: uniform or zipf")
	fs.Float64Var(&cfg.ZipfS, "zipf-s", 0.99, "Zipf exponent s (> 0)")
	fs.BoolVar(&cfg.Prefill, "prefill", true, "write every key before the run so gets hit")
	fs.DurationVar(&cfg.Duration, "duration", 5*time.Second, "run length")
	fs.StringVar(&cfg.GetCmd, "get-cmd", "get", "retrieval command: get, gets or lease-get")
	fs.IntVar(&cfg.ServerPID, "server-pid", 0, "server PID: report its CPU per op from /proc")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "random seed")
	fs.IntVar(&cfg.GenThreads, "gen-threads", 0,
		"generator OS threads, each with its own epoll over a share of the connections (0: 2 at -pipeline 1, else 1)")
	tlsFlags(fs, &cfg.TLS)
	fs.BoolVar(&cfg.Binary, "binary", false,
		"speak memcached's binary protocol: GET, GETKQ per key closed by NOOP for -multiget above 1, SET (the prefill stays text)")
	jsonOnly := fs.Bool("json", false, "print only the JSON line")
	if err := fs.Parse(args); err != nil {
		return err
	}
	res, err := Run(ctx, cfg)
	if err != nil {
		return err
	}
	if !*jsonOnly {
		printLoad(out, res)
	}
	if err := PrintJSON(out, res); err != nil {
		return err
	}
	if res.Errors > 0 {
		return fmt.Errorf("%d wrong replies; the first: %s", res.Errors, res.ErrorSample)
	}
	return nil
}

// FillMain is the fill subcommand.
func FillMain(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("fill", flag.ContinueOnError)
	cfg := FillConfig{}
	fs.StringVar(&cfg.Addr, "addr", "127.0.0.1:11211", "server address")
	fs.IntVar(&cfg.Conns, "conns", DefaultFillConns, "connections")
	fs.IntVar(&cfg.Batch, "batch", DefaultFillBatch, "sets per pipelined write")
	fs.Uint64Var(&cfg.Keys, "items", 1000000, "items to write")
	fs.Uint64Var(&cfg.KeyBase, "key-base", 0, "first key number")
	fs.IntVar(&cfg.KeySize, "key-size", 14, "key bytes")
	fs.IntVar(&cfg.ValueSize, "value-size", 100, "value bytes")
	fs.Uint64Var(&cfg.Verify, "verify", 100000, "items read back and checked byte for byte (0: none)")
	fs.IntVar(&cfg.ServerPID, "server-pid", 0, "server PID: report RSS growth and bytes per item")
	fs.DurationVar(&cfg.MaxTime, "max-time", DefaultFillMaxTime, "stop writing after this long")
	tlsFlags(fs, &cfg.TLS)
	jsonOnly := fs.Bool("json", false, "print only the JSON line")
	if err := fs.Parse(args); err != nil {
		return err
	}
	res, err := RunFill(ctx, cfg)
	if err != nil {
		return err
	}
	if !*jsonOnly {
		printFill(out, res)
	}
	return PrintJSON(out, res)
}

// HitRatioMain is the hitratio subcommand.
func HitRatioMain(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("hitratio", flag.ContinueOnError)
	cfg := HitConfig{}
	memMB := fs.Float64("memory-mb", 64, "the server's -m; with -footprint sets -keys")
	footprint := fs.Float64("footprint", 10, "key space size as a multiple of -memory-mb (keys x (key+value))")
	fs.StringVar(&cfg.Addr, "addr", "127.0.0.1:11211", "server address")
	fs.IntVar(&cfg.Conns, "conns", 1, "connections (1 keeps the stream identical across runs)")
	fs.IntVar(&cfg.Batch, "batch", DefaultHitBatch, "gets per pipelined batch")
	fs.Uint64Var(&cfg.Keys, "keys", 0, "distinct keys (0: from -memory-mb x -footprint)")
	fs.IntVar(&cfg.KeySize, "key-size", 14, "key bytes")
	fs.IntVar(&cfg.ValueSize, "value-size", 100, "value bytes")
	fs.StringVar(&cfg.Dist, "dist", "zipf", "key distribution: uniform or zipf")
	fs.Float64Var(&cfg.ZipfS, "zipf-s", 0.9, "Zipf exponent s (> 0)")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "random seed (same seed, same stream)")
	fs.Uint64Var(&cfg.Warmup, "warmup", 1000000, "requests before counting starts")
	fs.Uint64Var(&cfg.Requests, "requests", 3000000, "requests counted")
	fs.DurationVar(&cfg.MaxTime, "max-time", defaultHitMaxTime, "fail when not done after this long")
	tlsFlags(fs, &cfg.TLS)
	jsonOnly := fs.Bool("json", false, "print only the JSON line")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if cfg.Keys == 0 {
		cfg.Keys = FootprintKeys(*memMB, *footprint, cfg.KeySize, cfg.ValueSize)
	}
	res, err := RunHitRatio(ctx, cfg)
	if err != nil {
		return err
	}
	if !*jsonOnly {
		printHit(out, res)
	}
	return PrintJSON(out, res)
}

// tlsFlags adds the TLS client flags of load, fill and hitratio.
func tlsFlags(fs *flag.FlagSet, o *TLSOptions) {
	fs.BoolVar(&o.Enabled, "tls", false, "connect with TLS (handshakes before the measured window)")
	fs.StringVar(&o.CAFile, "tls-ca", "", "PEM file of the CA (or self-signed certificate) the server's is verified against")
	fs.BoolVar(&o.SkipVerify, "tls-skip-verify", false, "accept any server certificate")
	fs.StringVar(&o.ServerName, "tls-server-name", "", "name the certificate must carry (default: the host of -addr)")
	fs.StringVar(&o.Version, "tls-version", "1.3", "the one TLS version offered: 1.3 or 1.2")
	fs.BoolVar(&o.Resume, "tls-resume", false, "let connections resume each other's sessions (default: a full handshake each)")
}

// FootprintKeys is the key count whose key and value bytes add up to factor times memMB megabytes.
func FootprintKeys(memMB, factor float64, keySize, valueSize int) uint64 {
	return uint64(memMB * factor * (1 << 20) / float64(keySize+valueSize))
}

// PrintJSON writes v as the run's JSON line.
func PrintJSON(out io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	_, err = fmt.Fprintf(out, "%s\n", b)
	return err
}
