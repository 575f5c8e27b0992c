package harness

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/leasecached/leasecached/tools/bench/ceiling"
	"github.com/leasecached/leasecached/tools/bench/load"
)

func TestGenChoices(t *testing.T) {
	p1 := workload{Pipeline: 1}
	p16 := workload{Pipeline: 16}
	cases := []struct {
		name  string
		fixed int
		w     workload
		want  []int
	}{
		{"p1 automatic", 0, p1, []int{load.DefaultGenThreads(1)}},
		{"p16 automatic tries both", 0, p16, []int{1, 2}},
		{"fixed at p1", 3, p1, []int{3}},
		{"fixed at p16", 1, p16, []int{1}},
	}
	for _, tc := range cases {
		got := compareOptions{genThreads: tc.fixed}.genChoices(tc.w)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := defaultGen(p16, nil); got != load.DefaultGenThreads(16) {
		t.Errorf("defaultGen(p16) = %v", got)
	}
}

// startCeiling runs the ceiling responder in-process on a port the kernel picks, until the test ends.
func startCeiling(t *testing.T, sizes string) string {
	t.Helper()
	ranges, err := ceiling.ParseSizes(sizes)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan string, 1), make(chan error, 1)
	go func() { done <- ceiling.Run(ctx, "127.0.0.1:0", 2, ranges, 0, func(a string) { ready <- a }) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return addr
}

// calibrate runs each candidate once per server where there is a choice, picks one of them, and runs
// nothing where there is none.
func TestCalibrate(t *testing.T) {
	addr := startCeiling(t, "0:100")
	s := &runningServer{name: "ceiling", addr: addr, pid: os.Getpid()}
	ws := []workload{
		{Name: "p1", Pipeline: 1, MultiGet: 1, GetRatio: 0.9, ValueSize: 100, Dist: "uniform", GetCmd: "get"},
		{Name: "p16", Pipeline: 16, MultiGet: 1, GetRatio: 0.9, ValueSize: 100, Dist: "uniform", GetCmd: "get"},
	}
	var log bytes.Buffer
	plan, err := calibrate(context.Background(), ws, []*runningServer{s}, compareOptions{duration: 200 * time.Millisecond}, &log, matrixResults{})
	if err != nil {
		t.Fatal(err)
	}
	if g := plan.threads(ws[0], s); g != load.DefaultGenThreads(1) {
		t.Errorf("p1: %d threads, want the default %d", g, load.DefaultGenThreads(1))
	}
	if g := plan.threads(ws[1], s); g != 1 && g != 2 {
		t.Errorf("p16: %d threads, want 1 or 2", g)
	}
	if runs := bytes.Count(log.Bytes(), []byte("\n")); runs != 2*calibrationRounds {
		t.Errorf("%d calibration runs logged, want %d (both candidates at p16 in every round, none at p1)", runs,
			2*calibrationRounds)
	}
}

// The default options fit the default time limit; a matrix that cannot is refused up front.
func TestEstimateCompare(t *testing.T) {
	o := compareOptions{reps: 3, duration: 5 * time.Second, ceiling: true}
	if est := estimateCompare(o, 4); est > compareMaxTime || est < 10*time.Minute { // mc, lc and the two ceilings
		t.Errorf("make bench's matrix estimated at %v", est)
	}
	// With the TLS table (as make bench runs), a third server in both.
	o.tls, o.tlsThird = true, "x"
	if est := estimateCompare(o, 5); est > compareMaxTime {
		t.Errorf("make bench with a third server and the TLS table estimated at %v", est)
	}
	o.reps = 20
	if est := estimateCompare(o, 5); est <= compareMaxTime {
		t.Errorf("20 reps with five servers estimated at %v, within the %v cap", est, compareMaxTime)
	}
}

// resultsOf makes one load.Result per value, with the value in the field set writes.
func resultsOf(set func(*load.Result, float64), vs ...float64) []*load.Result {
	rs := make([]*load.Result, len(vs))
	for i, v := range vs {
		rs[i] = &load.Result{}
		set(rs[i], v)
	}
	return rs
}

func TestGenThreadsOf(t *testing.T) {
	runs := resultsOf(func(r *load.Result, v float64) { r.Config.GenThreads = int(v) }, 2, 2, 2)
	if g := genThreadsOf(runs); g != 2 {
		t.Errorf("genThreadsOf = %d, want 2", g)
	}
	if g := genThreadsOf(nil); g != 0 {
		t.Errorf("genThreadsOf(nil) = %d, want 0", g)
	}
}

func TestShellQuote(t *testing.T) {
	for _, s := range []string{"/usr/bin/x", "/tmp/a b/$HOME/`id`/x", "it's", ""} {
		out, err := exec.Command("sh", "-c", "printf %s "+shellQuote(s)).Output()
		if err != nil || string(out) != s {
			t.Errorf("%q: sh printed %q (%v)", s, out, err)
		}
	}
}

// The lease verdict is the median of per-repetition ratios: a drift that moves both runs of a pair
// together cancels out, where comparing the two medians would not.
func TestPairedRatio(t *testing.T) {
	cpu := func(vs ...float64) []*load.Result {
		return resultsOf(func(r *load.Result, v float64) { r.ServerCPUUsPerOp = v }, vs...)
	}
	// The machine slows down rep by rep; lease-get costs 2% more in every pair.
	get := cpu(1.0, 1.2, 1.5, 1.9, 2.4)
	lease := cpu(1.02, 1.224, 1.53, 1.938, 2.448)
	if r := pairedRatio(lease, get, cpuOf); r < 1.0199 || r > 1.0201 {
		t.Errorf("paired ratio %v, want 1.02", r)
	}
	if r := pairedRatio(cpu(1, 2), cpu(), cpuOf); r != 0 {
		t.Errorf("no pairs: %v, want 0", r)
	}
	if r := pairedRatio(cpu(3, 1, 2), cpu(1, 1, 1, 9), cpuOf); r != 2 {
		t.Errorf("unequal lengths: %v, want the median of 3, 1, 2", r)
	}
}

// The TLS table's rows are the issue's: 90/10 at 100 B and 4 KB, pipeline 1 and 16, named apart from the
// plaintext rows; its servers are memcached, then leasecached unless left out, then a third.
func TestTLSWorkloadsAndServers(t *testing.T) {
	var names []string
	for _, w := range tlsWorkloads() {
		names = append(names, w.Name)
		if w.GetRatio != 0.9 || w.MultiGet != 1 || w.Dist != "uniform" || w.GetCmd != "get" {
			t.Errorf("%s: %+v", w.Name, w)
		}
	}
	want := []string{"p1  TLS 90/10 100B uniform", "p1  TLS 90/10 4KB uniform", "p16 TLS 90/10 100B uniform", "p16 TLS 90/10 4KB uniform"}
	if !slices.Equal(names, want) {
		t.Errorf("TLS rows %q, want %q", names, want)
	}
	c := tlsCert{"/c.pem", "/k.pem"}
	names = nil
	for _, sp := range (compareOptions{memcached: "mc", leasecached: "lc", tlsThird: "t {cert}"}).tlsSpecs(c) {
		names = append(names, sp.Name+": "+sp.Command)
	}
	want = []string{
		"memcached: " + memcachedSpec("mc").Command + " -Z -o ssl_chain_cert='/c.pem',ssl_key='/k.pem'",
		"leasecached: lc -p {port} -l 127.0.0.1 -t {threads} -m {mem} -c {conns} -Z -o ssl_chain_cert='/c.pem',ssl_key='/k.pem'",
		"third: t '/c.pem'",
	}
	if !slices.Equal(names, want) {
		t.Errorf("TLS servers %q, want %q", names, want)
	}
	if n := (compareOptions{tlsLeasecached: tlsNone}).tlsSpecs(c); len(n) != 1 || n[0].Name != "memcached" {
		t.Errorf("-tls-leasecached none: %+v", n)
	}
}
