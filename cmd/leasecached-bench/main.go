package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

const usage = `usage: leasecached-bench <load|fill|hitratio|compare|storage|ceiling> [flags]
run "leasecached-bench <subcommand> -h" for the flags of one subcommand`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	var err error
	switch os.Args[1] {
	case "load":
		err = loadMain(ctx, os.Args[2:], os.Stdout)
	case "fill":
		err = fillMain(ctx, os.Args[2:], os.Stdout)
	case "hitratio":
		err = hitMain(ctx, os.Args[2:], os.Stdout)
	case "compare":
		err = compareMain(ctx, os.Args[2:], os.Stdout)
	case "storage":
		err = storageMain(ctx, os.Args[2:], os.Stdout)
	case "ceiling":
		err = ceilingMain(ctx, os.Args[2:], os.Stdout)
	case "-h", "-help", "--help", "help":
		fmt.Println(usage)
		return
	default:
		err = fmt.Errorf("unknown subcommand %q\n%s", os.Args[1], usage)
	}
	if errors.Is(err, flag.ErrHelp) {
		return // the flag package printed the usage
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "leasecached-bench: %v\n", err)
		os.Exit(1)
	}
}

func loadMain(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	cfg := loadConfig{}
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
	jsonOnly := fs.Bool("json", false, "print only the JSON line")
	if err := fs.Parse(args); err != nil {
		return err
	}
	res, err := runLoad(ctx, cfg)
	if err != nil {
		return err
	}
	if !*jsonOnly {
		printLoad(out, res)
	}
	return printJSON(out, res)
}

func fillMain(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("fill", flag.ContinueOnError)
	cfg := fillConfig{}
	fs.StringVar(&cfg.Addr, "addr", "127.0.0.1:11211", "server address")
	fs.IntVar(&cfg.Conns, "conns", defaultFillConns, "connections")
	fs.IntVar(&cfg.Batch, "batch", defaultFillBatch, "sets per pipelined write")
	fs.Uint64Var(&cfg.Keys, "items", 1000000, "items to write")
	fs.Uint64Var(&cfg.KeyBase, "key-base", 0, "first key number")
	fs.IntVar(&cfg.KeySize, "key-size", 14, "key bytes")
	fs.IntVar(&cfg.ValueSize, "value-size", 100, "value bytes")
	fs.Uint64Var(&cfg.Verify, "verify", 100000, "items read back and checked byte for byte (0: none)")
	fs.IntVar(&cfg.ServerPID, "server-pid", 0, "server PID: report RSS growth and bytes per item")
	fs.DurationVar(&cfg.MaxTime, "max-time", defaultFillMaxTime, "stop writing after this long")
	jsonOnly := fs.Bool("json", false, "print only the JSON line")
	if err := fs.Parse(args); err != nil {
		return err
	}
	res, err := runFill(ctx, cfg)
	if err != nil {
		return err
	}
	if !*jsonOnly {
		printFill(out, res)
	}
	return printJSON(out, res)
}

func hitMain(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("hitratio", flag.ContinueOnError)
	cfg := hitConfig{}
	memMB := fs.Float64("memory-mb", 64, "the server's -m; with -footprint sets -keys")
	footprint := fs.Float64("footprint", 10, "key space size as a multiple of -memory-mb (keys x (key+value))")
	fs.StringVar(&cfg.Addr, "addr", "127.0.0.1:11211", "server address")
	fs.IntVar(&cfg.Conns, "conns", 1, "connections (1 keeps the stream identical across runs)")
	fs.IntVar(&cfg.Batch, "batch", defaultHitBatch, "gets per pipelined batch")
	fs.Uint64Var(&cfg.Keys, "keys", 0, "distinct keys (0: from -memory-mb x -footprint)")
	fs.IntVar(&cfg.KeySize, "key-size", 14, "key bytes")
	fs.IntVar(&cfg.ValueSize, "value-size", 100, "value bytes")
	fs.StringVar(&cfg.Dist, "dist", "zipf", "key distribution: uniform or zipf")
	fs.Float64Var(&cfg.ZipfS, "zipf-s", 0.9, "Zipf exponent s (> 0)")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "random seed (same seed, same stream)")
	fs.Uint64Var(&cfg.Warmup, "warmup", 1000000, "requests before counting starts")
	fs.Uint64Var(&cfg.Requests, "requests", 3000000, "requests counted")
	fs.DurationVar(&cfg.MaxTime, "max-time", defaultHitMaxTime, "fail when not done after this long")
	jsonOnly := fs.Bool("json", false, "print only the JSON line")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if cfg.Keys == 0 {
		cfg.Keys = footprintKeys(*memMB, *footprint, cfg.KeySize, cfg.ValueSize)
	}
	res, err := runHitRatio(ctx, cfg)
	if err != nil {
		return err
	}
	if !*jsonOnly {
		printHit(out, res)
	}
	return printJSON(out, res)
}

// footprintKeys is the key count whose key and value bytes add up to factor times memMB megabytes.
func footprintKeys(memMB, factor float64, keySize, valueSize int) uint64 {
	return uint64(memMB * factor * (1 << 20) / float64(keySize+valueSize))
}

func printJSON(out io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	_, err = fmt.Fprintf(out, "%s\n", b)
	return err
}
