package harness

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/leasecached/leasecached/internal/testdaemon"
	"github.com/leasecached/leasecached/tools/bench/load"
)

// Fixed parts of the restart measurements (issue 30): the storage benchmark's items, and how finely the
// harness watches a restarting server.
const (
	restartKeySize   = storageKeySize
	restartValueSize = storageValueSize
	// restartMaxTime bounds the whole restart run, whatever the flags ask.
	restartMaxTime = 60 * time.Minute
	// readyPoll is the pause between two "version" probes of a starting server: the resolution of the
	// time to serve.
	readyPoll = time.Millisecond
	// readySpin bounds one readiness check's probing; testdaemon then checks that the process still runs
	// and calls it again.
	readySpin = time.Second
	// loadedPoll is the pause between two "stats" while leasecached rebuilds its index.
	loadedPoll = 5 * time.Millisecond
	// gracefulStopTimeout bounds a graceful stop, which writes state out (leasecached syncs its files,
	// memcached writes its metadata).
	gracefulStopTimeout = 5 * time.Minute
	// killWait bounds the wait for a process killed with SIGKILL, and for the write load it was serving.
	killWait = 30 * time.Second
	// midLoadConns and midLoadPipeline shape the write load a server is killed in the middle of.
	midLoadConns, midLoadPipeline = 4, 16
	// memcachedSecondMargin is how far into the next wall-clock second a warm restart of memcached waits.
	memcachedSecondMargin = 10 * time.Millisecond
)

// dataDirFlag is leasecached's switch for its data directory (issue 30), dataLiveFlag the one that keeps
// its items live on tmpfs (by default in /dev/shm where there is room), liveOff its value that maps the
// directory's own files.
const (
	dataDirFlag  = "--data-dir"
	dataLiveFlag = "--data-live"
	liveOff      = "off"
)

// The scenarios, as the table names them.
const (
	howSIGTERM   = "SIGTERM"
	howKillFill  = "kill -9 after fill"
	howKillSets  = "kill -9 during sets"
	howSIGUSR1   = "SIGUSR1"
	howKillAfter = "kill -9 (after the warm restart)"
	howReboot    = "SIGTERM, live copy gone (a reboot)"
)

// restartSize is one size measured: Items items of restartValueSize bytes into a server with -m MemMB.
type restartSize struct {
	Items uint64 `json:"items"`
	MemMB int    `json:"mem_mb"`
}

type restartOptions struct {
	memcached, leasecached string
	servers                map[string]bool
	threads, connLimit     int
	sizes                  []restartSize
	verify                 uint64
	midLoad                time.Duration
	dataParent, shmDir     string
	live                   string // --data-live's root for the leasecached rows that use it ("": none)
	logDir                 string
	startTimeout, maxTime  time.Duration
}

// restartRow is one restart: how the server was stopped, and what the next one served.
type restartRow struct {
	Server         string  `json:"server"`
	Items          uint64  `json:"items"`
	MemMB          int     `json:"mem_mb"`
	How            string  `json:"how"`
	FillSetsPerSec float64 `json:"fill_sets_per_sec,omitempty"`
	// StopSeconds is from the stopping signal to the exit (0 for kill -9).
	StopSeconds float64 `json:"stop_seconds"`
	// From the exec of the restarted server: its "version" answered (the port accepts and answers), a get
	// of the first key filled answered, and (leasecached) restart_loading 0 in stats. memcached opens its
	// port only after its restore, so for it the last is the first.
	ServeSeconds  float64 `json:"serve_seconds"`
	GetSeconds    float64 `json:"get_seconds"`
	LoadedSeconds float64 `json:"loaded_seconds"`
	// SawLoading says a stats reply had restart_loading 1 (one that waits for the rebuild never does).
	SawLoading bool `json:"saw_loading"`
	// The server's own restart stats, absent where it has none.
	RestartSeconds *float64 `json:"restart_seconds,omitempty"`
	ItemsLoaded    *uint64  `json:"restart_items_loaded,omitempty"`
	ItemsDropped   *uint64  `json:"restart_items_dropped,omitempty"`
	CurrItems      uint64   `json:"curr_items"`
	// The sample read back after the restart, byte for byte against what the fill wrote.
	Verified uint64 `json:"verified"`
	Present  uint64 `json:"present"`
	Missing  uint64 `json:"missing"`
	Corrupt  uint64 `json:"corrupt"`
}

// rssRow is a server's memory right after a fill.
type rssRow struct {
	Server         string    `json:"server"`
	Items          uint64    `json:"items"`
	MemMB          int       `json:"mem_mb"`
	FillSetsPerSec float64   `json:"fill_sets_per_sec"`
	Mem            memStatus `json:"mem"`
}

// RestartMain is the restart subcommand (make bench-restart): issue 30's measurement.
func RestartMain(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("restart", flag.ContinueOnError)
	o := restartOptions{}
	fs.StringVar(&o.memcached, "memcached", "memcached", "memcached binary")
	fs.StringVar(&o.leasecached, "leasecached", "bin/leasecached", "leasecached binary")
	servers := fs.String("servers", "leasecached,memcached", "the servers to measure (comma-separated)")
	fs.IntVar(&o.threads, "threads", 2, "-t of every server")
	fs.IntVar(&o.connLimit, "conn-limit", 4096, "-c of every server")
	sizes := fs.String("sizes", "1000000:1024,10000000:2048", "items:-m pairs, comma-separated")
	fs.Uint64Var(&o.verify, "verify", 100000, "items read back and checked byte for byte after each restart")
	fs.DurationVar(&o.midLoad, "mid-load", 2*time.Second, "write load before the kill -9 during sets (0: no such row)")
	fs.StringVar(&o.dataParent, "data-parent", os.TempDir(), "where leasecached's data directories are made")
	fs.StringVar(&o.shmDir, "shm-dir", "/dev/shm", "where memcached's -e file is made (tmpfs)")
	fs.StringVar(&o.live, "live", "/dev/shm", "tmpfs under which leasecached's --data-live rows keep their live copy (\"\": no such rows)")
	fs.StringVar(&o.logDir, "log-dir", "", "keep the servers' logs in this directory")
	fs.DurationVar(&o.startTimeout, "start-timeout", 5*time.Minute, "how long a restarting server may take to answer")
	fs.DurationVar(&o.maxTime, "max-time", 45*time.Minute, "give up after this long")
	quick := fs.Bool("quick", false, "1M items only (a few minutes)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *quick {
		*sizes = "1000000:1024"
	}
	var err error
	if o.sizes, err = parseRestartSizes(*sizes); err != nil {
		return err
	}
	o.servers = map[string]bool{}
	for _, s := range strings.Split(*servers, ",") {
		if s != "leasecached" && s != "memcached" {
			return fmt.Errorf("-servers: %q is neither leasecached nor memcached", s)
		}
		o.servers[s] = true
	}
	ctx, cancel := context.WithTimeout(ctx, min(o.maxTime, restartMaxTime))
	defer cancel()
	return runRestart(ctx, o, out)
}

// parseRestartSizes reads "items:mem,items:mem".
func parseRestartSizes(s string) ([]restartSize, error) {
	var out []restartSize
	for _, p := range strings.Split(s, ",") {
		it, mem, ok := strings.Cut(strings.TrimSpace(p), ":")
		n, err1 := strconv.ParseUint(it, 10, 64)
		m, err2 := strconv.Atoi(mem)
		if !ok || err1 != nil || err2 != nil || n == 0 || m <= 0 {
			return nil, fmt.Errorf("-sizes: %q is not items:megabytes", p)
		}
		out = append(out, restartSize{Items: n, MemMB: m})
	}
	return out, nil
}

func runRestart(ctx context.Context, o restartOptions, out io.Writer) error {
	logDir, cleanup, err := makeLogDir(o.logDir)
	if err != nil {
		return err
	}
	defer cleanup()
	note := machineNote()
	r := &restartRun{o: o, logDir: logDir}
	for _, sz := range o.sizes {
		if o.servers["leasecached"] {
			if err := r.leasecached(ctx, sz, ""); err != nil {
				return fmt.Errorf("leasecached, %d items: %w", sz.Items, err)
			}
			if o.live != "" {
				if err := r.leasecached(ctx, sz, o.live); err != nil {
					return fmt.Errorf("leasecached %s, %d items: %w", dataLiveFlag, sz.Items, err)
				}
			}
		}
		if o.servers["memcached"] {
			if err := r.memcached(ctx, sz); err != nil {
				return fmt.Errorf("memcached, %d items: %w", sz.Items, err)
			}
		}
	}
	fmt.Fprintf(out, "\n%s; at the end: %.2f\n", note, loadAverage())
	printRestart(out, o, r.rows, r.rss)
	if err := load.PrintJSON(out, map[string]any{"mode": "restart", "sizes": o.sizes, "restarts": r.rows, "rss": r.rss}); err != nil {
		return err
	}
	for _, row := range r.rows {
		if row.Corrupt > 0 {
			return fmt.Errorf("%s %s (%d items): %d values read back after the restart differ from what was written",
				row.Server, row.How, row.Items, row.Corrupt)
		}
	}
	return nil
}

// restartRun collects the rows of one run.
type restartRun struct {
	o      restartOptions
	logDir string
	rows   []restartRow
	rss    []rssRow
}

func itoa(n int) string { return strconv.Itoa(n) }

// leasecachedArgs are leasecached's flags with -m mem and, when dir is not empty, its data directory with
// its live copy under root live, or with none when live is empty.
func (r *restartRun) leasecachedArgs(mem int, dir, live string) func(int) []string {
	return func(port int) []string {
		a := []string{"-p", itoa(port), "-l", "127.0.0.1", "-t", itoa(r.o.threads), "-m", itoa(mem), "-c", itoa(r.o.connLimit)}
		switch {
		case dir != "" && live != "":
			a = append(a, dataDirFlag, dir, dataLiveFlag, live)
		case dir != "":
			a = append(a, dataDirFlag, dir, dataLiveFlag, liveOff)
		}
		return a
	}
}

// memcachedArgs are memcached's flags (as make bench gives them) with -m mem and, when file is not empty,
// its warm restart file (-e).
func (r *restartRun) memcachedArgs(mem int, file string) func(int) []string {
	return func(port int) []string {
		a := []string{"-p", itoa(port), "-l", "127.0.0.1", "-U", "0", "-t", itoa(r.o.threads), "-m", itoa(mem), "-c", itoa(r.o.connLimit)}
		if os.Geteuid() == 0 {
			a = append(a, "-u", "root") // memcached refuses to run as root without it
		}
		if file != "" {
			a = append(a, "-e", file)
		}
		return a
	}
}

// startTimed starts bin on a free loopback port and returns it once it answers "version", with the time
// of its exec and the time from there to that answer (probed every readyPoll).
func (r *restartRun) startTimed(ctx context.Context, name, bin string, args func(int) []string) (*runningServer, time.Time, time.Duration, error) {
	logFile, err := os.CreateTemp(r.logDir, name+"-*.log")
	if err != nil {
		return nil, time.Time{}, 0, fmt.Errorf("server log: %w", err)
	}
	var answered time.Time
	ready := func(addr string) error {
		end := time.Now().Add(readySpin)
		for {
			err := load.Ping(addr)
			if err == nil {
				answered = time.Now()
				return nil
			}
			if time.Now().After(end) {
				return err
			}
			time.Sleep(readyPoll)
		}
	}
	start := time.Now()
	// One attempt: a second one on a new port would time a second exec. The port race it gives up
	// covering is rare, and the run says so when it happens.
	d, err := testdaemon.Start(ctx, testdaemon.Spec{Name: name, Path: bin, Args: args, Output: logFile, Ready: ready,
		StartTimeout: r.o.startTimeout, Attempts: 1, OwnProcessGroup: true})
	if err != nil {
		logFile.Close()
		return nil, time.Time{}, 0, fmt.Errorf("start %s: %w", name, err)
	}
	s := &runningServer{name: name, addr: d.Addr, pid: d.Cmd.Process.Pid, proc: d, logPath: logFile.Name(), logFile: logFile}
	return s, start, answered.Sub(start), nil
}

// fill writes sz.Items items and checks that the server kept every one (-m is meant to hold them all).
// With withPID it also reads the server's RSS before and after (and waits for it to settle).
func (r *restartRun) fill(ctx context.Context, s *runningServer, sz restartSize, withPID bool) (*load.FillResult, error) {
	cfg := load.FillConfig{Addr: s.addr, Conns: load.DefaultFillConns, Batch: load.DefaultFillBatch,
		Keys: sz.Items, KeySize: restartKeySize, ValueSize: restartValueSize, MaxTime: r.o.maxTime}
	if withPID {
		cfg.ServerPID = s.pid
	}
	fr, err := load.RunFill(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("fill: %w", err)
	}
	if fr.Stored != sz.Items || fr.Evictions > 0 || fr.TimedOut {
		return nil, fmt.Errorf("fill: %d of %d items stored, %d evictions, timed out %v: -m %d does not hold them",
			fr.Stored, sz.Items, fr.Evictions, fr.TimedOut, sz.MemMB)
	}
	fmt.Fprintf(os.Stderr, "%s: %d items written at %.0f sets/s\n", s.name, fr.Written, fr.SetsPerSec)
	return fr, nil
}

// measure fills in what a restarted server (exec'd at start, answering after serve) serves: a get, the end
// of its index rebuild (restart_loading 0, when it reports one), its restart stats, and a sample read back.
func (r *restartRun) measure(ctx context.Context, s *runningServer, start time.Time, serve time.Duration, sz restartSize, row *restartRow) error {
	row.ServeSeconds = serve.Seconds()
	// A get of one key: leasecached holds a request to a shard it has not loaded yet.
	if _, err := load.VerifySample(ctx, r.verifyConfig(s, sz, 1)); err != nil {
		return fmt.Errorf("first get: %w", err)
	}
	row.GetSeconds = time.Since(start).Seconds()
	var st map[string]string
	for {
		var err error
		// A stats request may wait for the rebuild too: its deadline is the restart's.
		if st, err = load.StatsWithin(s.addr, r.o.startTimeout); err != nil {
			return err
		}
		if v, ok := st["restart_loading"]; !ok || v == "0" {
			break
		}
		row.SawLoading = true
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(loadedPoll)
	}
	row.LoadedSeconds = time.Since(start).Seconds()
	if v, err := strconv.ParseFloat(st["restart_seconds"], 64); err == nil {
		row.RestartSeconds = &v
	}
	statPtr := func(name string) *uint64 {
		if v, err := strconv.ParseUint(st[name], 10, 64); err == nil {
			return &v
		}
		return nil
	}
	row.ItemsLoaded, row.ItemsDropped = statPtr("restart_items_loaded"), statPtr("restart_items_dropped")
	vr, err := load.VerifySample(ctx, r.verifyConfig(s, sz, r.o.verify))
	if vr == nil {
		return fmt.Errorf("verify: %w", err)
	}
	row.Verified, row.Present, row.Missing, row.Corrupt = vr.Verified, vr.Present, vr.Missing, vr.Corrupt
	if st, err = load.Stats(s.addr); err != nil {
		return err
	}
	row.CurrItems, _ = strconv.ParseUint(st["curr_items"], 10, 64)
	fmt.Fprintf(os.Stderr, "%s after %s: serves at %.3fs, a get at %.3fs, loaded at %.3fs (restart_loading 1 seen: %v), "+
		"curr_items %d, sample %d/%d/%d\n", s.name, row.How, row.ServeSeconds, row.GetSeconds, row.LoadedSeconds,
		row.SawLoading, row.CurrItems, row.Present, row.Missing, row.Corrupt)
	return nil
}

func (r *restartRun) verifyConfig(s *runningServer, sz restartSize, n uint64) load.FillConfig {
	return load.FillConfig{Addr: s.addr, Keys: sz.Items, KeySize: restartKeySize, ValueSize: restartValueSize,
		Verify: n, MaxTime: r.o.startTimeout}
}

// stopGracefully sends sig and waits for the exit; it returns the time that took.
func stopGracefully(s *runningServer, sig syscall.Signal) (time.Duration, error) {
	start := time.Now()
	if err := s.proc.Cmd.Process.Signal(sig); err != nil {
		return 0, fmt.Errorf("signal %s: %w", s.name, err)
	}
	select {
	case <-s.proc.Exited():
	case <-time.After(gracefulStopTimeout):
		return 0, fmt.Errorf("%s did not exit within %v of %v", s.name, gracefulStopTimeout, sig)
	}
	s.logFile.Close()
	return time.Since(start), nil
}

// kill ends s with SIGKILL.
func kill(s *runningServer) error {
	defer s.logFile.Close()
	return s.proc.Kill(killWait)
}

// servers tracks what a phase started, so that an error stops everything still running.
type servers []*runningServer

func (ss *servers) add(s *runningServer) *runningServer { *ss = append(*ss, s); return s }

func (ss servers) stopAll() error {
	var errs []error
	for _, s := range ss {
		if s.alive() {
			errs = append(errs, stopLong(s))
		}
	}
	return errors.Join(errs...)
}

// rssBaseline starts a server without its restart option, fills it, records its RSS and stops it.
func (r *restartRun) rssBaseline(ctx context.Context, ss *servers, name, bin string, args func(int) []string, sz restartSize) error {
	s, _, _, err := r.startTimed(ctx, name, bin, args)
	if err != nil {
		return err
	}
	ss.add(s)
	if err := r.rssAfterFill(ctx, s, sz, name); err != nil {
		return err
	}
	return stopLong(s)
}

// stopLong is stop with the time a graceful stop may take to write the item memory out.
func stopLong(s *runningServer) error {
	defer s.logFile.Close()
	return s.proc.Stop(gracefulStopTimeout)
}

// leasecached measures, for one size: the RSS after a fill without and with the data directory; a
// restart after SIGTERM, after kill -9 during a write load, and after kill -9 right after a fill. With
// liveParent, the data directory has a live copy in a root made there (--data-live), and one more restart
// comes after a SIGTERM and the removal of the live copy, as after a machine reboot (with the page cache
// dropped too, where this process may).
func (r *restartRun) leasecached(ctx context.Context, sz restartSize, liveParent string) (err error) {
	const name = "leasecached"
	var ss servers
	defer func() { err = errors.Join(err, ss.stopAll()) }()
	lcName, live := "leasecached "+dataDirFlag+" "+dataLiveFlag, ""
	if liveParent == "" {
		lcName += " " + liveOff
		// Without the data directory: the RSS to compare with.
		if err := r.rssBaseline(ctx, &ss, name, r.o.leasecached, r.leasecachedArgs(sz.MemMB, "", ""), sz); err != nil {
			return err
		}
	} else {
		if live, err = os.MkdirTemp(liveParent, "leasecached-bench-live-"); err != nil {
			return err
		}
		defer os.RemoveAll(live)
	}

	dir, err := os.MkdirTemp(r.o.dataParent, "leasecached-bench-restart-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	args := r.leasecachedArgs(sz.MemMB, dir, live)
	s, _, _, err := r.startTimed(ctx, name, r.o.leasecached, args)
	if err != nil {
		return err
	}
	ss.add(s)
	if err := r.rssAfterFill(ctx, s, sz, lcName); err != nil {
		return err
	}
	graceful := restartRow{Server: lcName, Items: sz.Items, MemMB: sz.MemMB, How: howSIGTERM,
		FillSetsPerSec: r.rss[len(r.rss)-1].FillSetsPerSec}
	took, err := stopGracefully(s, syscall.SIGTERM)
	if err != nil {
		return err
	}
	graceful.StopSeconds = took.Seconds()
	if s, err = r.restartMeasured(ctx, &ss, args, sz, &graceful); err != nil {
		return err
	}

	var midLoad *restartRow
	if r.o.midLoad > 0 {
		row := restartRow{Server: lcName, Items: sz.Items, MemMB: sz.MemMB, How: howKillSets}
		if err := r.killDuringSets(ctx, s, sz); err != nil {
			return err
		}
		if s, err = r.restartMeasured(ctx, &ss, args, sz, &row); err != nil {
			return err
		}
		midLoad = &row
	}
	if err := stopLong(s); err != nil {
		return err
	}
	var reboot *restartRow
	if live != "" {
		row := restartRow{Server: lcName, Items: sz.Items, MemMB: sz.MemMB, How: howReboot}
		if err := emptyDir(live); err != nil {
			return err
		}
		_ = os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0) // root only; without it DIR is read from the page cache
		if s, err = r.restartMeasured(ctx, &ss, args, sz, &row); err != nil {
			return err
		}
		reboot = &row
		if err := stopLong(s); err != nil {
			return err
		}
		if err := emptyDir(live); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}

	// kill -9 as soon as the fill's last set is acknowledged, on a fresh directory.
	killed := restartRow{Server: lcName, Items: sz.Items, MemMB: sz.MemMB, How: howKillFill}
	if s, _, _, err = r.startTimed(ctx, name, r.o.leasecached, args); err != nil {
		return err
	}
	ss.add(s)
	fr, err := r.fill(ctx, s, sz, false)
	if err != nil {
		return err
	}
	killed.FillSetsPerSec = fr.SetsPerSec
	if err := kill(s); err != nil {
		return err
	}
	if s, err = r.restartMeasured(ctx, &ss, args, sz, &killed); err != nil {
		return err
	}
	r.rows = append(r.rows, graceful, killed)
	if midLoad != nil {
		r.rows = append(r.rows, *midLoad)
	}
	if reboot != nil {
		r.rows = append(r.rows, *reboot)
	}
	return stopLong(s)
}

// restartMeasured starts leasecached with args again and measures its restart into row.
func (r *restartRun) restartMeasured(ctx context.Context, ss *servers, args func(int) []string, sz restartSize, row *restartRow) (*runningServer, error) {
	s, start, serve, err := r.startTimed(ctx, "leasecached", r.o.leasecached, args)
	if err != nil {
		return nil, fmt.Errorf("restart after %s: %w", row.How, err)
	}
	ss.add(s)
	if err := r.measure(ctx, s, start, serve, sz, row); err != nil {
		return s, fmt.Errorf("restart after %s: %w", row.How, err)
	}
	return s, nil
}

// emptyDir removes everything in dir.
func emptyDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// killDuringSets runs a write load (sets of the filled keys, their same values) on s and kills s with
// SIGKILL after o.midLoad of it.
func (r *restartRun) killDuringSets(ctx context.Context, s *runningServer, sz restartSize) error {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := load.Run(lctx, load.Config{Addr: s.addr, Conns: midLoadConns, Pipeline: midLoadPipeline, MultiGet: 1,
			GetRatio: 0, ValueSize: restartValueSize, KeySize: restartKeySize, Keys: sz.Items, Dist: "uniform",
			GetCmd: "get", Seed: 1, Duration: r.o.midLoad + killWait})
		done <- err // after the kill: the broken connections' error, as it should be
	}()
	select {
	case <-time.After(r.o.midLoad):
	case err := <-done:
		return fmt.Errorf("the write load ended before the kill: %v", err)
	}
	if err := kill(s); err != nil {
		return err
	}
	cancel()
	select {
	case <-done:
	case <-time.After(killWait):
		return fmt.Errorf("the write load did not end within %v of the kill", killWait)
	}
	fmt.Fprintf(os.Stderr, "%s: killed after %v of sets\n", s.name, r.o.midLoad)
	return nil
}

// rssAfterFill fills s and records its memory status.
func (r *restartRun) rssAfterFill(ctx context.Context, s *runningServer, sz restartSize, label string) error {
	fr, err := r.fill(ctx, s, sz, true)
	if err != nil {
		return err
	}
	m, err := readMemStatus(s.pid)
	if err != nil {
		return err
	}
	r.rss = append(r.rss, rssRow{Server: label, Items: sz.Items, MemMB: sz.MemMB, FillSetsPerSec: fr.SetsPerSec, Mem: m})
	return nil
}

// memcached measures, for one size: the RSS after a fill without and with -e; a warm restart after SIGUSR1
// (its only warm one), then a restart after kill -9 of the restarted server.
func (r *restartRun) memcached(ctx context.Context, sz restartSize) (err error) {
	const name = "memcached"
	var ss servers
	defer func() { err = errors.Join(err, ss.stopAll()) }()
	if err := r.rssBaseline(ctx, &ss, name, r.o.memcached, r.memcachedArgs(sz.MemMB, ""), sz); err != nil {
		return err
	}

	file := filepath.Join(r.o.shmDir, fmt.Sprintf("leasecached-bench-restart-%d", os.Getpid()))
	// memcached keeps its metadata beside the file, in FILE.meta (restart.c).
	removeFiles := func() { os.Remove(file); os.Remove(file + ".meta") }
	removeFiles()
	defer removeFiles()
	mcName := "memcached -e"
	args := r.memcachedArgs(sz.MemMB, file)
	s, _, _, err := r.startTimed(ctx, name, r.o.memcached, args)
	if err != nil {
		return err
	}
	ss.add(s)
	if err := r.rssAfterFill(ctx, s, sz, mcName); err != nil {
		return err
	}
	graceful := restartRow{Server: mcName, Items: sz.Items, MemMB: sz.MemMB, How: howSIGUSR1,
		FillSetsPerSec: r.rss[len(r.rss)-1].FillSetsPerSec}
	took, err := stopGracefully(s, syscall.SIGUSR1)
	if err != nil {
		return err
	}
	graceful.StopSeconds = took.Seconds()
	// memcached 1.6.18 refuses a warm restart in the wall-clock second its stop wrote in FILE.meta
	// (stop_time; memcached.c's metadata check wants now - stop_time > 0), so the exec waits for the next
	// second.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + memcachedSecondMargin)))
	s, start, serve, err := r.startTimed(ctx, name, r.o.memcached, args)
	if err != nil {
		return fmt.Errorf("restart after SIGUSR1: %w", err)
	}
	ss.add(s)
	if err := r.measure(ctx, s, start, serve, sz, &graceful); err != nil {
		return fmt.Errorf("restart after SIGUSR1: %w", err)
	}
	if graceful.CurrItems == 0 {
		fmt.Fprintf(os.Stderr, "memcached did not restart warm: %s\n", lastLines(s.logSince(0), 3))
	}
	killed := restartRow{Server: mcName, Items: sz.Items, MemMB: sz.MemMB, How: howKillAfter}
	if err := kill(s); err != nil {
		return err
	}
	if s, start, serve, err = r.startTimed(ctx, name, r.o.memcached, args); err != nil {
		return fmt.Errorf("restart after kill -9: %w", err)
	}
	ss.add(s)
	if err := r.measure(ctx, s, start, serve, sz, &killed); err != nil {
		return fmt.Errorf("restart after kill -9: %w", err)
	}
	r.rows = append(r.rows, graceful, killed)
	return stopLong(s)
}

// printRestart prints the two tables in markdown, to paste into README.md.
func printRestart(out io.Writer, o restartOptions, rows []restartRow, rss []rssRow) {
	fmt.Fprintf(out, "\nrestart: %d-byte keys, %d-byte values, -t %d; times from the exec of the restarted server; "+
		"sample = %d keys read back byte for byte (present/missing/corrupt)\n\n", restartKeySize, restartValueSize, o.threads, o.verify)
	optF := func(v *float64) string {
		if v == nil {
			return "-"
		}
		return fmt.Sprintf("%.3f", *v)
	}
	optU := func(v *uint64) string {
		if v == nil {
			return "-"
		}
		return strconv.FormatUint(*v, 10)
	}
	var cells [][]string
	for _, r := range rows {
		fill, stop := "-", "-"
		if r.FillSetsPerSec > 0 {
			fill = fmt.Sprintf("%.0f", r.FillSetsPerSec)
		}
		if r.StopSeconds > 0 {
			stop = fmt.Sprintf("%.3f", r.StopSeconds)
		}
		cells = append(cells, []string{r.Server, itemsLabel(r.Items), itoa(r.MemMB), r.How, fill, stop,
			fmt.Sprintf("%.3f", r.ServeSeconds), fmt.Sprintf("%.3f", r.GetSeconds), fmt.Sprintf("%.3f", r.LoadedSeconds),
			optF(r.RestartSeconds), optU(r.ItemsLoaded), optU(r.ItemsDropped), strconv.FormatUint(r.CurrItems, 10),
			fmt.Sprintf("%d/%d/%d", r.Present, r.Missing, r.Corrupt)})
	}
	markdownTable(out, []string{"server", "items", "-m", "stopped by", "fill sets/s", "stop s", "serves s", "1st get s",
		"loaded s", "restart_seconds", "items_loaded", "items_dropped", "curr_items", "sample"}, cells)
	fmt.Fprintf(out, "\nmemory right after the fill (/proc/PID/status)\n\n")
	cells = nil
	for _, r := range rss {
		cells = append(cells, []string{r.Server, itemsLabel(r.Items), itoa(r.MemMB), fmt.Sprintf("%.0f", r.FillSetsPerSec),
			load.MiB(r.Mem.VmRSS), load.MiB(r.Mem.RssAnon), load.MiB(r.Mem.RssFile), load.MiB(r.Mem.RssShmem)})
	}
	markdownTable(out, []string{"server", "items", "-m", "fill sets/s", "VmRSS", "RssAnon", "RssFile", "RssShmem"}, cells)
	fmt.Fprintln(out)
}

// itemsLabel writes 1000000 as 1M.
func itemsLabel(n uint64) string {
	if n >= 1000000 && n%1000000 == 0 {
		return fmt.Sprintf("%dM", n/1000000)
	}
	if n >= 1000 && n%1000 == 0 {
		return fmt.Sprintf("%dk", n/1000)
	}
	return strconv.FormatUint(n, 10)
}

// markdownTable prints a markdown table: the first column left-aligned, the others right-aligned.
func markdownTable(out io.Writer, header []string, rows [][]string) {
	fmt.Fprintf(out, "| %s |\n", strings.Join(header, " | "))
	align := make([]string, len(header))
	for i := range align {
		align[i] = "---:"
	}
	align[0] = "---"
	fmt.Fprintf(out, "|%s|\n", strings.Join(align, "|"))
	for _, r := range rows {
		fmt.Fprintf(out, "| %s |\n", strings.Join(r, " | "))
	}
}
