package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
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

// loadConfig describes one closed-loop load run.
type loadConfig struct {
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
}

func (c *loadConfig) validate() error {
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
	}
	return nil
}

// loadResult is one run's outcome; it is also the JSON line.
type loadResult struct {
	Mode   string     `json:"mode"`
	Label  string     `json:"label,omitempty"`
	Server string     `json:"server,omitempty"`
	Config loadConfig `json:"config"`

	Seconds    float64 `json:"seconds"`
	Requests   uint64  `json:"requests"` // commands sent (a multi-get is one)
	GetKeys    uint64  `json:"get_keys"`
	Hits       uint64  `json:"hits"`
	Sets       uint64  `json:"sets"`
	SetFailed  uint64  `json:"set_failed"`
	OpsPerSec  float64 `json:"ops_per_sec"`
	KeysPerSec float64 `json:"get_keys_per_sec"`
	HitRatio   float64 `json:"hit_ratio"`

	LatencyPer string  `json:"latency_per"` // "request" or "batch of N"
	P50us      float64 `json:"p50_us"`
	P99us      float64 `json:"p99_us"`
	P999us     float64 `json:"p999_us"`
	MeanUs     float64 `json:"mean_us"`
	MaxUs      float64 `json:"max_us"`

	GenCores         float64 `json:"generator_cores"`
	ServerCores      float64 `json:"server_cores,omitempty"`
	ServerCPUUsPerOp float64 `json:"server_cpu_us_per_op,omitempty"`
}

// loadWorker is one connection's closed loop. Everything it needs per batch is allocated up front.
type loadWorker struct {
	cfg   *loadConfig
	ks    keySpace
	vs    *valueSource
	conn  net.Conn
	rr    *replyReader
	wbuf  []byte
	rng   *rand.Rand
	dist  keyDist
	idx   []uint64
	isGet []bool
	hist  histogram

	requests, getKeys, hits, sets, setFailed uint64
}

func newLoadWorker(cfg *loadConfig, ks keySpace, vs *valueSource, n int) (*loadWorker, error) {
	conn, err := net.DialTimeout("tcp", cfg.Addr, dialTimeout)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", cfg.Addr, err)
	}
	return newLoadWorkerOn(cfg, ks, vs, n, conn)
}

// newLoadWorkerOn builds connection n's worker on an open connection; it closes conn on error.
func newLoadWorkerOn(cfg *loadConfig, ks keySpace, vs *valueSource, n int, conn net.Conn) (*loadWorker, error) {
	r := rand.New(rand.NewPCG(cfg.Seed, uint64(n)))
	dist, err := newKeyDist(cfg.Dist, cfg.ZipfS, cfg.Keys, r)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return &loadWorker{cfg: cfg, ks: ks, vs: vs, conn: conn, rr: newReplyReader(conn),
		wbuf: make([]byte, 0, writeBufSize), rng: r, dist: dist,
		idx: make([]uint64, cfg.MultiGet), isGet: make([]bool, cfg.Pipeline)}, nil
}

// batch sends one pipeline of requests and reads all the replies; it allocates nothing.
func (w *loadWorker) batch() error {
	w.wbuf = w.wbuf[:0]
	for i := range w.isGet {
		get := w.rng.Float64() < w.cfg.GetRatio
		w.isGet[i] = get
		if get {
			for j := range w.idx {
				w.idx[j] = w.dist.next()
			}
			w.wbuf = appendGet(w.wbuf, w.cfg.GetCmd, w.ks, w.idx)
		} else {
			w.wbuf = appendSet(w.wbuf, w.ks, w.vs, w.dist.next())
		}
	}
	start := time.Now()
	if _, err := w.conn.Write(w.wbuf); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	for _, get := range w.isGet {
		if get {
			h, err := w.rr.readGetReply(nil)
			if err != nil {
				return err
			}
			w.hits += uint64(h)
			w.getKeys += uint64(len(w.idx))
		} else {
			res, err := w.rr.readStoreReply()
			if err != nil {
				return err
			}
			w.sets++
			if res != storeOK {
				w.setFailed++
			}
		}
	}
	w.hist.record(time.Since(start))
	w.requests += uint64(len(w.isGet))
	return nil
}

// runLoad runs the closed loop: every connection sends a batch, waits for all its replies, and repeats
// until the duration is up.
func runLoad(ctx context.Context, cfg loadConfig) (*loadResult, error) {
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
		fc := fillConfig{Addr: cfg.Addr, Conns: min(cfg.Conns, defaultFillConns), Batch: defaultFillBatch,
			Keys: cfg.Keys, KeyBase: cfg.KeyBase, KeySize: cfg.KeySize, ValueSize: cfg.ValueSize,
			MaxTime: defaultFillMaxTime}
		fr, err := runFill(ctx, fc)
		if err != nil {
			return nil, fmt.Errorf("prefill: %w", err)
		}
		if fr.Stored != cfg.Keys {
			return nil, fmt.Errorf("prefill: stored only %d of %d keys", fr.Stored, cfg.Keys)
		}
	}

	workers := make([]*loadWorker, 0, cfg.Conns)
	defer func() {
		for _, w := range workers {
			w.conn.Close()
		}
	}()
	for i := 0; i < cfg.Conns; i++ {
		w, err := newLoadWorker(&cfg, ks, vs, i)
		if err != nil {
			return nil, err
		}
		workers = append(workers, w)
	}

	end := time.Now().Add(cfg.Duration)
	for _, w := range workers {
		if err := w.conn.SetDeadline(end.Add(replyGrace)); err != nil {
			return nil, fmt.Errorf("set deadline: %w", err)
		}
	}
	meter := startCPUMeter(cfg.ServerPID)
	errs := make([]error, len(workers))
	var wg sync.WaitGroup
	for i, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && time.Now().Before(end) {
				if err := w.batch(); err != nil {
					errs[i] = fmt.Errorf("connection %d: %w", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	use := meter.stop()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	res := &loadResult{Mode: "load", Config: cfg, Seconds: use.wall.Seconds(), GenCores: use.genCores}
	var h histogram
	for _, w := range workers {
		h.merge(&w.hist)
		res.Requests += w.requests
		res.GetKeys += w.getKeys
		res.Hits += w.hits
		res.Sets += w.sets
		res.SetFailed += w.setFailed
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
