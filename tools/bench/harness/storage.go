package harness

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/leasecached/leasecached/tools/bench/load"
)

// Fixed parts of the storage measurements (issue 3): 14-byte keys, 100-byte values.
const (
	storageKeySize   = 14
	storageValueSize = 100
	// storageMaxTime bounds the whole storage run, whatever the flags ask.
	storageMaxTime = 40 * time.Minute
)

type storageOptions struct {
	memcached, leasecached, third string
	threads, connLimit            int
	perItemMem                    int
	perItemItems                  uint64
	limitMem                      int
	limitItems                    uint64
	hitMem                        int
	footprint                     float64
	hitWarmup, hitRequests        uint64
	zipfS                         []float64
	verify                        uint64
	maxTime                       time.Duration
	logDir                        string
}

// storageServerResult is everything measured on one server.
type storageServerResult struct {
	Server    string                     `json:"server"`
	PerItem   *load.FillResult           `json:"per_item"`
	AtLimit   *load.FillResult           `json:"at_limit"`
	HitRatio  map[string]*load.HitResult `json:"hit_ratio"` // by Zipf s
	GCPerItem *gcSummary                 `json:"gc_per_item_fill,omitempty"`
	GCAtLimit *gcSummary                 `json:"gc_at_limit_fill,omitempty"`
}

// StorageMain is the storage subcommand (make bench-storage).
func StorageMain(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("storage", flag.ContinueOnError)
	o := storageOptions{zipfS: []float64{0.9, 1.1}}
	fs.StringVar(&o.memcached, "memcached", "memcached", "memcached binary")
	fs.StringVar(&o.leasecached, "leasecached", "bin/leasecached", "leasecached binary")
	fs.StringVar(&o.third, "third", "", `a third server's command ({port} {threads} {mem} {conns} are replaced)`)
	fs.IntVar(&o.threads, "threads", 2, "-t of every server")
	fs.IntVar(&o.connLimit, "conn-limit", 4096, "-c of every server")
	fs.IntVar(&o.perItemMem, "per-item-mem", 1024, "-m for the bytes-per-item fill")
	fs.Uint64Var(&o.perItemItems, "per-item-items", 1000000, "items of the bytes-per-item fill")
	fs.IntVar(&o.limitMem, "limit-mem", 1024, "-m for the fill past the limit")
	fs.Uint64Var(&o.limitItems, "limit-items", 20000000, "items written in the fill past the limit")
	fs.IntVar(&o.hitMem, "hit-mem", 64, "-m for the hit-ratio runs")
	fs.Float64Var(&o.footprint, "footprint", 10, "hit-ratio key space as a multiple of -hit-mem")
	fs.Uint64Var(&o.hitWarmup, "hit-warmup", 2000000, "hit-ratio requests before counting")
	fs.Uint64Var(&o.hitRequests, "hit-requests", 4000000, "hit-ratio requests counted")
	fs.Uint64Var(&o.verify, "verify", 100000, "items read back and checked byte for byte after each fill")
	fs.DurationVar(&o.maxTime, "max-time", 30*time.Minute, "give up after this long")
	fs.StringVar(&o.logDir, "log-dir", "", "keep the servers' logs (leasecached's gctrace) in this directory")
	quick := fs.Bool("quick", false, "smaller runs (about two minutes): the limit fill at -m 128 with 2.5M "+
		"items (the same 2.2x overshoot), hit ratio at -m 16")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *quick {
		o.limitMem, o.limitItems = 128, 2500000
		o.hitMem, o.hitWarmup, o.hitRequests = 16, 500000, 1000000
		o.verify = 20000
	}
	ctx, cancel := context.WithTimeout(ctx, min(o.maxTime, storageMaxTime))
	defer cancel()
	return runStorage(ctx, o, out)
}

func runStorage(ctx context.Context, o storageOptions, out io.Writer) error {
	logDir, cleanup, err := makeLogDir(o.logDir)
	if err != nil {
		return err
	}
	defer cleanup()
	lc := leasecachedSpec(o.leasecached)
	lc.Env = []string{"GODEBUG=gctrace=1"}
	specs := []serverSpec{memcachedSpec(o.memcached), lc}
	if o.third != "" {
		specs = append(specs, serverSpec{Name: "third", Command: o.third})
	}
	note := machineNote()
	var results []*storageServerResult
	for _, sp := range specs {
		r, err := storageOne(ctx, o, sp, logDir)
		if err != nil {
			return fmt.Errorf("%s: %w", sp.Name, err)
		}
		results = append(results, r)
	}
	fmt.Fprintf(out, "\n%s\n", note)
	printStorage(out, o, results)
	return load.PrintJSON(out, map[string]any{"mode": "storage", "results": results})
}

// withServer starts a fresh server with -m memMB, runs f against it and stops it.
func withServer(ctx context.Context, sp serverSpec, o storageOptions, memMB int, logDir string,
	f func(s *runningServer) error) error {
	s, err := startServer(ctx, sp, serverLimits{Threads: o.threads, MemMB: memMB, ConnLimit: o.connLimit}, logDir)
	if err != nil {
		return err
	}
	ferr := f(s)
	if !s.alive() && ferr != nil {
		ferr = fmt.Errorf("%w (server exited: %s)", ferr, lastLines(s.logSince(0), 3))
	}
	serr := s.stop()
	if ferr != nil {
		return ferr
	}
	return serr
}

func storageOne(ctx context.Context, o storageOptions, sp serverSpec, logDir string) (*storageServerResult, error) {
	res := &storageServerResult{Server: sp.Name, HitRatio: map[string]*load.HitResult{}}
	fill := func(s *runningServer, items uint64) (*load.FillResult, *gcSummary, error) {
		off := s.logSize()
		fr, err := load.RunFill(ctx, load.FillConfig{Addr: s.addr, Conns: load.DefaultFillConns, Batch: load.DefaultFillBatch,
			Keys: items, KeySize: storageKeySize, ValueSize: storageValueSize, Verify: o.verify,
			ServerPID: s.pid, MaxTime: o.maxTime})
		if err != nil {
			return nil, nil, err
		}
		fr.Server = sp.Name
		var gc *gcSummary
		if len(sp.Env) > 0 {
			g := parseGCTrace(s.logSince(off))
			gc = &g
		}
		fmt.Fprintf(os.Stderr, "%s: %d items written at %.0f sets/s, RSS %s -> %s, %d evictions\n",
			sp.Name, fr.Written, fr.SetsPerSec, load.MiB(fr.RSSBefore), load.MiB(fr.RSSAfter), fr.Evictions)
		return fr, gc, nil
	}
	err := withServer(ctx, sp, o, o.perItemMem, logDir, func(s *runningServer) (err error) {
		res.PerItem, res.GCPerItem, err = fill(s, o.perItemItems)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("bytes per item: %w", err)
	}
	err = withServer(ctx, sp, o, o.limitMem, logDir, func(s *runningServer) (err error) {
		res.AtLimit, res.GCAtLimit, err = fill(s, o.limitItems)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("fill past the limit: %w", err)
	}
	for _, zs := range o.zipfS {
		err = withServer(ctx, sp, o, o.hitMem, logDir, func(s *runningServer) error {
			hr, err := load.RunHitRatio(ctx, load.HitConfig{Addr: s.addr, Conns: 1, Batch: load.DefaultHitBatch,
				Keys:    load.FootprintKeys(float64(o.hitMem), o.footprint, storageKeySize, storageValueSize),
				KeySize: storageKeySize, ValueSize: storageValueSize, Dist: "zipf", ZipfS: zs, Seed: 1,
				Warmup: o.hitWarmup, Requests: o.hitRequests, ServerPID: s.pid, MaxTime: o.maxTime})
			if err != nil {
				return err
			}
			hr.Server = sp.Name
			res.HitRatio[fmt.Sprint(zs)] = hr
			fmt.Fprintf(os.Stderr, "%s: hit ratio at s=%v: %.4f (%.1fs)\n", sp.Name, zs, hr.HitRatio, hr.Seconds)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("hit ratio s=%v: %w", zs, err)
		}
	}
	return res, nil
}

func printStorage(out io.Writer, o storageOptions, rs []*storageServerResult) {
	header := []string{"metric"}
	for _, r := range rs {
		header = append(header, r.Server)
	}
	row := func(name string, f func(r *storageServerResult) string) []string {
		cells := []string{name}
		for _, r := range rs {
			cells = append(cells, f(r))
		}
		return cells
	}
	verify := func(fr *load.FillResult) string {
		return fmt.Sprintf("%d/%d/%d", fr.Present, fr.Missing, fr.Corrupt)
	}
	fmt.Fprintf(out, "\nbytes per item: %d items, %d-byte keys, %d-byte values, -m %d -t %d; overhead = (RSS growth - key and value bytes) / items\n\n",
		o.perItemItems, storageKeySize, storageValueSize, o.perItemMem, o.threads)
	table(out, header, [][]string{
		row("RSS before", func(r *storageServerResult) string { return load.MiB(r.PerItem.RSSBefore) }),
		row("RSS after", func(r *storageServerResult) string { return load.MiB(r.PerItem.RSSAfter) }),
		row("overhead bytes/item", func(r *storageServerResult) string { return fmt.Sprintf("%.1f", r.PerItem.BytesPerItem) }),
		row("total bytes/item", func(r *storageServerResult) string {
			return fmt.Sprintf("%.1f", r.PerItem.BytesPerItem+storageKeySize+storageValueSize)
		}),
		row("fill sets/s", func(r *storageServerResult) string { return fmt.Sprintf("%.0f", r.PerItem.SetsPerSec) }),
		row("verified present/missing/corrupt", func(r *storageServerResult) string { return verify(r.PerItem) }),
	})
	fmt.Fprintf(out, "\nRSS at the limit: %d items of %d+%d bytes (%.1fx the limit) into -m %d\n\n",
		o.limitItems, storageKeySize, storageValueSize,
		float64(o.limitItems)*(storageKeySize+storageValueSize)/float64(uint64(o.limitMem)<<20), o.limitMem)
	table(out, header, [][]string{
		row("RSS after", func(r *storageServerResult) string { return load.MiB(r.AtLimit.RSSAfter) }),
		row("RSS / limit", func(r *storageServerResult) string {
			return fmt.Sprintf("%.3f", float64(r.AtLimit.RSSAfter)/float64(uint64(o.limitMem)<<20))
		}),
		row("curr_items", func(r *storageServerResult) string { return fmt.Sprint(r.AtLimit.CurrItems) }),
		row("evictions", func(r *storageServerResult) string { return fmt.Sprint(r.AtLimit.Evictions) }),
		row("set failures", func(r *storageServerResult) string {
			return fmt.Sprint(r.AtLimit.NotStored + r.AtLimit.ServerErrors)
		}),
		row("fill sets/s", func(r *storageServerResult) string { return fmt.Sprintf("%.0f", r.AtLimit.SetsPerSec) }),
		row("sample present/missing/corrupt", func(r *storageServerResult) string { return verify(r.AtLimit) }),
	})
	fmt.Fprintf(out, "\nhit ratio: cache-aside Zipf stream, identical for every server, -m %d, key space %.0fx the memory (%d keys), %d warm-up + %d counted requests\n\n",
		o.hitMem, o.footprint, load.FootprintKeys(float64(o.hitMem), o.footprint, storageKeySize, storageValueSize),
		o.hitWarmup, o.hitRequests)
	var hrows [][]string
	for _, zs := range o.zipfS {
		k := fmt.Sprint(zs)
		hrows = append(hrows, row("s="+k, func(r *storageServerResult) string {
			return fmt.Sprintf("%.4f", r.HitRatio[k].HitRatio)
		}))
	}
	table(out, header, hrows)
	for _, r := range rs {
		if r.GCPerItem == nil {
			continue
		}
		fmt.Fprintf(out, "\n%s GC (GODEBUG=gctrace=1, from its stderr)\n\n", r.Server)
		gcRow := func(phase string, g *gcSummary, fr *load.FillResult) []string {
			serverCPU := fr.ServerCores * fr.Seconds * 1000
			share := "-"
			if serverCPU > 0 {
				share = fmt.Sprintf("%.1f%%", 100*g.CPUms/serverCPU)
			}
			return []string{phase, fmt.Sprint(g.Cycles), fmt.Sprintf("%.2f", g.PauseTotalMs),
				fmt.Sprintf("%.3f", g.PauseMaxMs), fmt.Sprintf("%.0f", g.CPUms), share,
				fmt.Sprint(g.HeapPeakMB), fmt.Sprint(g.HeapLiveMB)}
		}
		table(out, []string{"fill", "GC cycles", "STW total ms", "STW max ms", "GC CPU ms", "of server CPU",
			"heap peak MB", "heap live MB"}, [][]string{
			gcRow(fmt.Sprintf("%d items, -m %d", o.perItemItems, o.perItemMem), r.GCPerItem, r.PerItem),
			gcRow(fmt.Sprintf("%d items, -m %d", o.limitItems, o.limitMem), r.GCAtLimit, r.AtLimit),
		})
	}
	fmt.Fprintln(out)
}
