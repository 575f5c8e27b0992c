package load

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/leasecached/leasecached/internal/testdaemon"
)

// TestAgainstMemcached drives every mode of the generator against a real memcached on a free loopback
// port (internal/testdaemon starts and stops it), briefly: load, fill (with full verification) and
// hitratio must agree with what a cache does.
func TestAgainstMemcached(t *testing.T) {
	bin, err := exec.LookPath("memcached")
	if err != nil {
		t.Skip("memcached not installed (make test-deps installs it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := testdaemon.Start(ctx, testdaemon.Spec{Name: "memcached", Path: bin, Ready: Ping,
		Args: func(port int) []string {
			args := []string{"-p", strconv.Itoa(port), "-l", "127.0.0.1", "-U", "0", "-t", "2", "-m", "64", "-c", "256"}
			if os.Geteuid() == 0 {
				args = append(args, "-u", "root") // memcached refuses to run as root without it
			}
			return args
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := d.Stop(10 * time.Second); err != nil {
			t.Error(err)
		}
	}()
	addr, pid := d.Addr, d.Cmd.Process.Pid

	t.Run("fill and verify all", func(t *testing.T) {
		fr, err := RunFill(ctx, FillConfig{Addr: addr, Conns: 3, Batch: 50, Keys: 10000, KeySize: 14,
			ValueSize: 300, Verify: 10000, ServerPID: pid, MaxTime: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if fr.Stored != 10000 || fr.Present != 10000 || fr.Corrupt != 0 || fr.CurrItems != 10000 || fr.RSSAfter == 0 {
			t.Errorf("fill result %+v", fr)
		}
	})

	loads := []struct {
		name string
		cfg  Config
	}{
		{"p1 uniform 90/10", Config{Pipeline: 1, MultiGet: 1, GetRatio: 0.9, Dist: "uniform"}},
		{"p8 multiget zipf", Config{Pipeline: 8, MultiGet: 5, GetRatio: 0.8, Dist: "zipf", ZipfS: 0.99}},
		{"all sets", Config{Pipeline: 4, MultiGet: 1, GetRatio: 0, Dist: "uniform"}},
	}
	for _, tc := range loads {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.cfg
			c.Addr, c.Conns, c.ValueSize, c.KeySize, c.Keys, c.KeyBase = addr, 4, 100, 14, 1000, 50000
			c.Prefill, c.Duration, c.GetCmd, c.ServerPID, c.Seed = true, 200*time.Millisecond, "get", pid, 1
			r, err := Run(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			if r.Requests == 0 || r.OpsPerSec <= 0 || r.P99us <= 0 || r.P50us > r.P99us || r.GenCores <= 0 {
				t.Errorf("implausible result %+v", r)
			}
			if c.GetRatio > 0 && r.HitRatio != 1 {
				t.Errorf("prefilled keys: hit ratio %v", r.HitRatio)
			}
			if c.GetRatio == 0 && (r.Sets != r.Requests || r.GetKeys != 0) {
				t.Errorf("all-set run: %d sets of %d requests, %d get keys", r.Sets, r.Requests, r.GetKeys)
			}
		})
	}

	if err := BinaryPing(addr, time.Second); err != nil {
		t.Errorf("memcached's binary VERSION: %v", err)
	}
	// The binary protocol on the same server (memcached's -B auto: the first byte 0x80 selects it), on the
	// keys the text runs above prefilled and set: every reply checked, none wrong.
	binLoads := []struct {
		name string
		cfg  Config
	}{
		{"binary get p1", Config{Pipeline: 1, MultiGet: 1, GetRatio: 1}},
		{"binary set p16", Config{Pipeline: 16, MultiGet: 1, GetRatio: 0}},
		{"binary getkq x10 p16", Config{Pipeline: 16, MultiGet: 10, GetRatio: 1}},
		{"binary mix p4", Config{Pipeline: 4, MultiGet: 3, GetRatio: 0.7}},
	}
	for _, tc := range binLoads {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.cfg
			c.Addr, c.Conns, c.ValueSize, c.KeySize, c.Keys, c.KeyBase, c.Dist = addr, 4, 100, 14, 1000, 50000, "uniform"
			c.Prefill, c.Duration, c.GetCmd, c.ServerPID, c.Seed, c.Binary = true, 200*time.Millisecond, "get", pid, 1, true
			r, err := Run(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			if r.Errors != 0 || r.Requests == 0 || r.ServerCPUUsPerOp <= 0 {
				t.Errorf("result %+v", r)
			}
			if c.GetRatio > 0 && r.HitRatio != 1 {
				t.Errorf("prefilled keys: hit ratio %v", r.HitRatio)
			}
			if c.GetRatio == 0 && r.Sets != r.Requests {
				t.Errorf("%d sets of %d requests", r.Sets, r.Requests)
			}
		})
	}
	t.Run("binary quiet misses", func(t *testing.T) {
		r, err := Run(ctx, Config{Addr: addr, Conns: 2, Pipeline: 8, MultiGet: 10, GetRatio: 1, ValueSize: 100,
			KeySize: 14, Keys: 1000, KeyBase: 7000000, Dist: "uniform", Duration: 100 * time.Millisecond,
			GetCmd: "get", Seed: 1, Binary: true})
		if err != nil {
			t.Fatal(err)
		}
		if r.Errors != 0 || r.Requests == 0 || r.Hits != 0 || r.GetKeys != 10*r.Requests {
			t.Errorf("keys never written: %+v", r)
		}
	})

	t.Run("lease-get is an error against memcached", func(t *testing.T) {
		_, err := Run(ctx, Config{Addr: addr, Conns: 1, Pipeline: 1, MultiGet: 1, GetRatio: 1,
			ValueSize: 10, KeySize: 14, Keys: 10, Dist: "uniform", Duration: 100 * time.Millisecond, GetCmd: "lease-get"})
		var se *serverError
		if !errors.As(err, &se) {
			t.Errorf("err %v, want the server's ERROR reply", err)
		}
	})

	t.Run("hitratio", func(t *testing.T) {
		// 15-byte keys: a key space of its own, none of the keys written above.
		cfg := HitConfig{Addr: addr, Conns: 1, Batch: 32, Keys: 2000, KeySize: 15, ValueSize: 100,
			Dist: "zipf", ZipfS: 1.1, Seed: 9, Warmup: 5000, Requests: 5000, MaxTime: 10 * time.Second}
		hr, err := RunHitRatio(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		// 2000 keys fit easily in 64 MB: after warm-up only keys never drawn before can miss.
		if hr.Requests != 5000 || hr.HitRatio < 0.9 || hr.HitRatio >= 1 {
			t.Errorf("hit ratio %v over %d requests", hr.HitRatio, hr.Requests)
		}
	})
}

// TestAgainstMemcachedTLS drives the generator over TLS against memcached -Z with a certificate of
// WriteSelfSignedCert: fill with full verification, then pipelined 4 KB sets and gets, whose batches span
// several records (memcached 1.6.18 stalls when a record ends inside a request: tls.go), and pipeline 1.
func TestAgainstMemcachedTLS(t *testing.T) {
	bin, err := exec.LookPath("memcached")
	if err != nil {
		t.Skip("memcached not installed (make test-deps installs it)")
	}
	certFile, keyFile, err := WriteSelfSignedCert(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	opts := TLSOptions{Enabled: true, CAFile: certFile}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := testdaemon.Start(ctx, testdaemon.Spec{Name: "memcached -Z", Path: bin, Ready: TLSPing(opts),
		Args: func(port int) []string {
			args := []string{"-p", strconv.Itoa(port), "-l", "127.0.0.1", "-U", "0", "-t", "2", "-m", "64", "-c", "256",
				"-Z", "-o", "ssl_chain_cert=" + certFile + ",ssl_key=" + keyFile}
			if os.Geteuid() == 0 {
				args = append(args, "-u", "root")
			}
			return args
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := d.Stop(10 * time.Second); err != nil {
			t.Error(err)
		}
	}()
	if err := Ping(d.Addr); err == nil {
		t.Error("a plaintext ping of a TLS port succeeded")
	}
	fr, err := RunFill(ctx, FillConfig{Addr: d.Addr, Conns: 2, Batch: 128, Keys: 2000, KeySize: 14, ValueSize: 4096,
		Verify: 2000, MaxTime: 10 * time.Second, TLS: opts})
	if err != nil {
		t.Fatal(err)
	}
	if fr.Stored != 2000 || fr.Present != 2000 || fr.CurrItems != 2000 {
		t.Errorf("fill result %+v", fr)
	}
	for _, p := range []int{16, 1} {
		r, err := Run(ctx, Config{Addr: d.Addr, Conns: 4, Pipeline: p, MultiGet: 1, GetRatio: 0.5, ValueSize: 4096,
			KeySize: 14, Keys: 2000, Dist: "uniform", Duration: 300 * time.Millisecond, GetCmd: "get",
			ServerPID: d.Cmd.Process.Pid, Seed: 1, TLS: opts})
		if err != nil {
			t.Fatalf("pipeline %d: %v", p, err)
		}
		if r.Requests == 0 || r.HitRatio != 1 || r.TLSState == nil || r.TLSState.Version != "TLS 1.3" || r.ServerCPUUsPerOp <= 0 {
			t.Errorf("pipeline %d: implausible result %+v (TLS %+v)", p, r, r.TLSState)
		}
	}
}
