package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestAgainstMemcached drives every mode of the tool against a real memcached on a free loopback port,
// briefly: the harness starts and stops it, load, fill (with full verification) and hitratio must agree
// with what a cache does.
func TestAgainstMemcached(t *testing.T) {
	bin, err := exec.LookPath("memcached")
	if err != nil {
		t.Skip("memcached not installed (make test-deps installs it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := startServer(ctx, memcachedSpec(bin), serverLimits{Threads: 2, MemMB: 64, ConnLimit: 256}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.stop(); err != nil {
			t.Error(err)
		}
	}()

	t.Run("fill and verify all", func(t *testing.T) {
		fr, err := runFill(ctx, fillConfig{Addr: s.addr, Conns: 3, Batch: 50, Keys: 10000, KeySize: 14,
			ValueSize: 300, Verify: 10000, ServerPID: s.pid, MaxTime: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if fr.Stored != 10000 || fr.Present != 10000 || fr.Corrupt != 0 || fr.CurrItems != 10000 || fr.RSSAfter == 0 {
			t.Errorf("fill result %+v", fr)
		}
	})

	loads := []struct {
		name string
		cfg  loadConfig
	}{
		{"p1 uniform 90/10", loadConfig{Pipeline: 1, MultiGet: 1, GetRatio: 0.9, Dist: "uniform"}},
		{"p8 multiget zipf", loadConfig{Pipeline: 8, MultiGet: 5, GetRatio: 0.8, Dist: "zipf", ZipfS: 0.99}},
		{"all sets", loadConfig{Pipeline: 4, MultiGet: 1, GetRatio: 0, Dist: "uniform"}},
	}
	for _, tc := range loads {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.cfg
			c.Addr, c.Conns, c.ValueSize, c.KeySize, c.Keys, c.KeyBase = s.addr, 4, 100, 14, 1000, 50000
			c.Prefill, c.Duration, c.GetCmd, c.ServerPID, c.Seed = true, 200*time.Millisecond, "get", s.pid, 1
			r, err := runLoad(ctx, c)
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

	t.Run("lease-get is an error against memcached", func(t *testing.T) {
		_, err := runLoad(ctx, loadConfig{Addr: s.addr, Conns: 1, Pipeline: 1, MultiGet: 1, GetRatio: 1,
			ValueSize: 10, KeySize: 14, Keys: 10, Dist: "uniform", Duration: 100 * time.Millisecond, GetCmd: "lease-get"})
		var se *serverError
		if !errors.As(err, &se) {
			t.Errorf("err %v, want the server's ERROR reply", err)
		}
	})

	t.Run("hitratio", func(t *testing.T) {
		// 15-byte keys: a key space of its own, none of the keys written above.
		cfg := hitConfig{Addr: s.addr, Conns: 1, Batch: 32, Keys: 2000, KeySize: 15, ValueSize: 100,
			Dist: "zipf", ZipfS: 1.1, Seed: 9, Warmup: 5000, Requests: 5000, MaxTime: 10 * time.Second}
		hr, err := runHitRatio(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		// 2000 keys fit easily in 64 MB: after warm-up only keys never drawn before can miss.
		if hr.Requests != 5000 || hr.HitRatio < 0.9 || hr.HitRatio >= 1 {
			t.Errorf("hit ratio %v over %d requests", hr.HitRatio, hr.Requests)
		}
	})
}

func TestStartServerReportsEarlyExit(t *testing.T) {
	_, err := startServer(context.Background(), serverSpec{Name: "bad", Command: "echo no such server; exit 3"},
		serverLimits{Threads: 1, MemMB: 1, ConnLimit: 1}, t.TempDir())
	if err == nil {
		t.Fatal("a server that exits at once was reported started")
	}
	if _, statErr := os.Stat("/bin/sh"); statErr == nil && !strings.Contains(err.Error(), "no such server") {
		t.Errorf("error %q does not carry the server's output", err)
	}
}
