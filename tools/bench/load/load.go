package load

import (
	"context"
	"fmt"
	"runtime"
	"time"
)

// Limits and timeouts of a load run.
const (
	dialTimeout = 5 * time.Second
	// replyGrace is how long after the planned end of a run a reply may still take before the run fails
	// (a stuck server must not hang the harness).
	replyGrace  = 10 * time.Second
	maxConns    = 10000
	maxPipeline = 4096
	maxMultiGet = 100
)

// Config describes one closed-loop load run.
type Config struct {
	Addr      string        `json:"addr"`
	Conns     int           `json:"conns"`
	Pipeline  int           `json:"pipeline"`
	MultiGet  int           `json:"multiget"` // keys per get command
	GetRatio  float64       `json:"get_ratio"`
	ValueSize int           `json:"value_size"`
	KeySize   int           `json:"key_size"`
	Keys      uint64        `json:"keys"`
	KeyBase   uint64        `json:"key_base"`
	Dist      string        `json:"dist"`
	ZipfS     float64       `json:"zipf_s"`
	Prefill   bool          `json:"prefill"`
	Duration  time.Duration `json:"-"`
	GetCmd    string        `json:"get_cmd"` // "get", "gets" or "lease-get"
	ServerPID int           `json:"server_pid"`
	Seed      uint64        `json:"seed"`
	// GenThreads is the number of generator threads (0: DefaultGenThreads); the result carries the
	// number that ran.
	GenThreads int `json:"gen_threads"`
	// TLS makes every connection a TLS client; the handshakes happen before the measured window.
	TLS TLSOptions `json:"tls,omitzero"`
	// Binary speaks memcached's binary protocol (binary.go): GET, GETKQ x MultiGet closed by a NOOP, SET.
	// The prefill is written with the text protocol.
	Binary bool `json:"binary,omitempty"`
}

func (c *Config) validate() error {
	switch {
	case c.Conns < 1 || c.Conns > maxConns:
		return fmt.Errorf("-conns %d: must be between 1 and %d", c.Conns, maxConns)
	case c.Pipeline < 1 || c.Pipeline > maxPipeline:
		return fmt.Errorf("-pipeline %d: must be between 1 and %d", c.Pipeline, maxPipeline)
	case c.MultiGet < 1 || c.MultiGet > maxMultiGet:
		return fmt.Errorf("-multiget %d: must be between 1 and %d", c.MultiGet, maxMultiGet)
	case c.GetRatio < 0 || c.GetRatio > 1:
		return fmt.Errorf("-get-ratio %v: must be between 0 and 1", c.GetRatio)
	case c.Duration <= 0:
		return fmt.Errorf("-duration %v: must be positive", c.Duration)
	case c.GetCmd != "get" && c.GetCmd != "gets" && c.GetCmd != "lease-get":
		return fmt.Errorf("-get-cmd %q: want get, gets or lease-get", c.GetCmd)
	case c.Binary && c.GetCmd != "get":
		return fmt.Errorf("-get-cmd %q: the binary protocol has get only", c.GetCmd)
	case c.GenThreads < 0 || c.GenThreads > MaxGenThreads:
		return fmt.Errorf("-gen-threads %d: must be between 0 (automatic) and %d", c.GenThreads, MaxGenThreads)
	}
	return nil
}

// Result is one run's outcome; it is also the JSON line.
type Result struct {
	Mode   string `json:"mode"`
	Label  string `json:"label,omitempty"`
	Server string `json:"server,omitempty"`
	Config Config `json:"config"`

	Seconds    float64 `json:"seconds"`
	Requests   uint64  `json:"requests"` // commands sent (a multi-get is one)
	GetKeys    uint64  `json:"get_keys"`
	Hits       uint64  `json:"hits"`
	Sets       uint64  `json:"sets"`
	SetFailed  uint64  `json:"set_failed"`
	OpsPerSec  float64 `json:"ops_per_sec"`
	KeysPerSec float64 `json:"get_keys_per_sec"`
	HitRatio   float64 `json:"hit_ratio"`
	// Errors counts replies that were wrong but kept the framing (binary protocol: a wrong status, opcode,
	// length, flags, key or value); ErrorSample describes the first, with the reply header's bytes. A run
	// with errors has no valid numbers.
	Errors      uint64 `json:"errors"`
	ErrorSample string `json:"error_sample,omitempty"`
	// Failed, set by the harness, says why a run has no numbers: it ended in an error, or counted Errors.
	Failed string `json:"failed,omitempty"`

	LatencyPer string  `json:"latency_per"` // "request" or "batch of N"
	P50us      float64 `json:"p50_us"`
	P99us      float64 `json:"p99_us"`
	P999us     float64 `json:"p999_us"`
	MeanUs     float64 `json:"mean_us"`
	MaxUs      float64 `json:"max_us"`

	GenCores         float64 `json:"generator_cores"`
	ServerCores      float64 `json:"server_cores,omitempty"`
	ServerCPUUsPerOp float64 `json:"server_cpu_us_per_op,omitempty"`

	// TLSState is what the first connection negotiated, with TLS.
	TLSState *TLSState `json:"tls_state,omitempty"`
}

// Run runs the closed loop: every connection sends a batch, waits for all its replies, and repeats
// until the duration is up.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	ks, err := newKeySpace(cfg.KeyBase, cfg.Keys, cfg.KeySize)
	if err != nil {
		return nil, err
	}
	vs, err := newValueSource(cfg.ValueSize)
	if err != nil {
		return nil, err
	}
	if cfg.Prefill {
		fc := FillConfig{Addr: cfg.Addr, Conns: min(cfg.Conns, DefaultFillConns), Batch: DefaultFillBatch,
			Keys: cfg.Keys, KeyBase: cfg.KeyBase, KeySize: cfg.KeySize, ValueSize: cfg.ValueSize,
			MaxTime: DefaultFillMaxTime, TLS: cfg.TLS}
		fr, err := RunFill(ctx, fc)
		if err != nil {
			return nil, fmt.Errorf("prefill: %w", err)
		}
		if fr.Stored != cfg.Keys {
			return nil, fmt.Errorf("prefill: stored only %d of %d keys", fr.Stored, cfg.Keys)
		}
	}

	if cfg.GenThreads == 0 {
		cfg.GenThreads = DefaultGenThreads(cfg.Pipeline)
	}
	cfg.GenThreads = min(cfg.GenThreads, cfg.Conns)
	lt, err := dialLoad(&cfg, ks, vs, cfg.GenThreads)
	if err != nil {
		return nil, err
	}
	defer lt.close()

	// One P more than there are generator threads. Each thread waits for replies in a raw epoll_pwait
	// that keeps its P (genThread.run), so the run's other goroutines need one of their own. Before the
	// raw waits, this spare P was what kept sysmon from taking a waiting thread's P every 20 us (measured
	// with two threads at pipeline 1 against memcached: 81k ops/s at 11.7 us of generator CPU per request
	// with GOMAXPROCS 2, 101k at 9.5 us with 3; at pipeline 16 136k and 165k). More Ps buy nothing: the
	// threads are the only goroutines that run during the measurement.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(cfg.GenThreads + 1))

	end := time.Now().Add(cfg.Duration)
	meter := startCPUMeter(cfg.ServerPID)
	err = lt.run(ctx, end, end.Add(replyGrace))
	use := meter.stop()
	if err != nil {
		return nil, err
	}

	res := &Result{Mode: "load", Config: cfg, Seconds: use.wall.Seconds(), GenCores: use.genCores}
	if c := lt.conns[0]; c.tls != nil {
		st := stateOf(c.tls.ConnectionState())
		res.TLSState = &st
	}
	var h histogram
	for _, t := range lt.threads {
		h.merge(&t.hist)
	}
	for _, c := range lt.conns {
		res.Requests += c.requests
		res.GetKeys += c.getKeys
		if b := c.bin; b != nil {
			res.Hits += b.hits
			res.Sets += b.sets
			res.SetFailed += b.setFailed
			res.Errors += b.errors
			if res.ErrorSample == "" && b.firstErr != "" {
				res.ErrorSample = fmt.Sprintf("connection %d: %s", c.id, b.firstErr)
			}
			continue
		}
		res.Hits += c.parser.hits
		res.Sets += c.parser.sets
		res.SetFailed += c.parser.setFailed
	}
	res.OpsPerSec = float64(res.Requests) / res.Seconds
	res.KeysPerSec = float64(res.GetKeys) / res.Seconds
	if res.GetKeys > 0 {
		res.HitRatio = float64(res.Hits) / float64(res.GetKeys)
	}
	res.LatencyPer = "request"
	if cfg.Pipeline > 1 {
		res.LatencyPer = fmt.Sprintf("batch of %d", cfg.Pipeline)
	}
	res.P50us = us(h.percentile(0.50))
	res.P99us = us(h.percentile(0.99))
	res.P999us = us(h.percentile(0.999))
	res.MeanUs = us(h.mean())
	res.MaxUs = us(time.Duration(h.max))
	if use.serverKnown && res.Requests > 0 {
		res.ServerCores = use.serverCores
		res.ServerCPUUsPerOp = float64(use.serverCPU.Microseconds()) / float64(res.Requests)
	}
	return res, nil
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
