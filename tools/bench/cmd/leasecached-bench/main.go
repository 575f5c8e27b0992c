package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/leasecached/leasecached/tools/bench/ceiling"
	"github.com/leasecached/leasecached/tools/bench/harness"
	"github.com/leasecached/leasecached/tools/bench/load"
)

const usage = `usage: leasecached-bench <load|fill|hitratio|compare|storage|restart|ceiling> [flags]
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
		err = load.Main(ctx, os.Args[2:], os.Stdout)
	case "fill":
		err = load.FillMain(ctx, os.Args[2:], os.Stdout)
	case "hitratio":
		err = load.HitRatioMain(ctx, os.Args[2:], os.Stdout)
	case "compare":
		err = harness.CompareMain(ctx, os.Args[2:], os.Stdout)
	case "storage":
		err = harness.StorageMain(ctx, os.Args[2:], os.Stdout)
	case "restart":
		err = harness.RestartMain(ctx, os.Args[2:], os.Stdout)
	case "ceiling":
		err = ceiling.Main(ctx, os.Args[2:], os.Stdout)
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
