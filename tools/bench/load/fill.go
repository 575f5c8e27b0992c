package load

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults and limits of a fill.
const (
	DefaultFillConns   = 4
	DefaultFillBatch   = 128 // sets per pipelined write
	DefaultFillMaxTime = 10 * time.Minute
	// verifyBatch is how many keys one verification get asks for.
	verifyBatch = 100
	// rssSettle is the pause before the second RSS reading, so that memory the server is still touching
	// for the last writes (or a collector finishing) is counted.
	rssSettle = 500 * time.Millisecond
)

// FillConfig describes one fill: Keys items written in pipelined sets, then Verify of them read back.
type FillConfig struct {
	Addr      string        `json:"addr"`
	Conns     int           `json:"conns"`
	Batch     int           `json:"batch"`
	Keys      uint64        `json:"keys"`
	KeyBase   uint64        `json:"key_base"`
	KeySize   int           `json:"key_size"`
	ValueSize int           `json:"value_size"`
	Verify    uint64        `json:"verify"` // sample size read back; 0 none; >= Keys all
	ServerPID int           `json:"server_pid"`
	MaxTime   time.Duration `json:"-"`
	TLS       TLSOptions    `json:"tls,omitzero"`
}

// FillResult is one fill's outcome; it is also the JSON line.
type FillResult struct {
	Mode         string     `json:"mode"`
	Server       string     `json:"server,omitempty"`
	Config       FillConfig `json:"config"`
	Written      uint64     `json:"written"`
	Stored       uint64     `json:"stored"`
	NotStored    uint64     `json:"not_stored"`
	ServerErrors uint64     `json:"server_errors"`
	Seconds      float64    `json:"seconds"`
	SetsPerSec   float64    `json:"sets_per_sec"`
	TimedOut     bool       `json:"timed_out"`
	GenCores     float64    `json:"generator_cores"`
	ServerCores  float64    `json:"server_cores,omitempty"`

	RSSBefore    uint64  `json:"rss_before,omitempty"`
	RSSAfter     uint64  `json:"rss_after,omitempty"`
	BytesPerItem float64 `json:"bytes_per_item_overhead,omitempty"` // (RSS growth - key and value bytes) / items

	Verified uint64 `json:"verified"`
	Present  uint64 `json:"present"`
	Missing  uint64 `json:"missing"`
	Corrupt  uint64 `json:"corrupt"`

	CurrItems     uint64 `json:"curr_items"`
	Evictions     uint64 `json:"evictions"`
	LimitMaxbytes uint64 `json:"limit_maxbytes"`
}

// RunFill writes keys [0, Keys) with pipelined sets over Conns connections, connection c taking the
// indexes c, c+Conns, ... so that the global write order follows the index order (under eviction the
// survivors are the high indexes). Then it verifies a sample and reads the server's stats.
func RunFill(ctx context.Context, cfg FillConfig) (*FillResult, error) {
	if cfg.Conns < 1 || cfg.Conns > maxConns || cfg.Batch < 1 || cfg.Batch > maxPipeline {
		return nil, fmt.Errorf("fill: conns %d / batch %d out of range", cfg.Conns, cfg.Batch)
	}
	ks, vs, tc, err := cfg.inputs()
	if err != nil {
		return nil, err
	}
	res := &FillResult{Mode: "fill", Config: cfg}
	if cfg.ServerPID > 0 {
		if res.RSSBefore, err = procRSS(cfg.ServerPID); err != nil {
			return nil, err
		}
	}
	deadline := time.Now().Add(cfg.MaxTime)
	meter := startCPUMeter(cfg.ServerPID)
	var stored, notStored, srvErr atomic.Uint64
	var timedOut atomic.Bool
	errs := make([]error, cfg.Conns)
	var wg sync.WaitGroup
	for c := 0; c < cfg.Conns; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, ns, se, to, err := fillStripe(ctx, cfg, tc, ks, vs, uint64(c), deadline)
			stored.Add(st)
			notStored.Add(ns)
			srvErr.Add(se)
			if to {
				timedOut.Store(true)
			}
			if err != nil {
				errs[c] = fmt.Errorf("fill connection %d: %w", c, err)
			}
		}()
	}
	wg.Wait()
	use := meter.stop()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	res.Stored, res.NotStored, res.ServerErrors = stored.Load(), notStored.Load(), srvErr.Load()
	res.Written = res.Stored + res.NotStored + res.ServerErrors
	res.TimedOut = timedOut.Load()
	res.Seconds = use.wall.Seconds()
	res.SetsPerSec = float64(res.Written) / res.Seconds
	res.GenCores, res.ServerCores = use.genCores, use.serverCores

	if cfg.ServerPID > 0 {
		time.Sleep(rssSettle)
		if res.RSSAfter, err = procRSS(cfg.ServerPID); err != nil {
			return nil, err
		}
		if res.Written > 0 {
			payload := float64(res.Written) * float64(cfg.KeySize+cfg.ValueSize)
			res.BytesPerItem = (float64(res.RSSAfter) - float64(res.RSSBefore) - payload) / float64(res.Written)
		}
	}
	if cfg.Verify > 0 {
		if err := verifySample(ctx, cfg, tc, ks, vs, res); err != nil {
			return nil, err
		}
	}
	st, err := serverStats(cfg.Addr, tc)
	if err != nil {
		return nil, err
	}
	res.CurrItems, res.Evictions = statUint(st, "curr_items"), statUint(st, "evictions")
	res.LimitMaxbytes = statUint(st, "limit_maxbytes")
	if res.Evictions > 0 {
		// Evicted items hold no memory: RSS growth per written item means nothing then.
		res.BytesPerItem = 0
	}
	return res, nil
}

// inputs is what a fill and its verification draw from: the keys, the values and the TLS configuration.
func (cfg FillConfig) inputs() (keySpace, *valueSource, *tls.Config, error) {
	ks, err := newKeySpace(cfg.KeyBase, cfg.Keys, cfg.KeySize)
	if err != nil {
		return keySpace{}, nil, nil, err
	}
	vs, err := newValueSource(cfg.ValueSize)
	if err != nil {
		return keySpace{}, nil, nil, err
	}
	tc, err := cfg.TLS.clientConfig(cfg.Addr)
	return ks, vs, tc, err
}

// VerifySample reads back a sample of a fill that happened earlier (cfg.Verify keys spread over [0, Keys),
// as RunFill picks them), possibly in another server process: after a restart. It writes nothing. The
// error says a value read back was wrong (the counts are set then too) or the exchange failed (no result).
func VerifySample(ctx context.Context, cfg FillConfig) (*FillResult, error) {
	ks, vs, tc, err := cfg.inputs()
	if err != nil {
		return nil, err
	}
	res := &FillResult{Mode: "verify", Config: cfg}
	if err := verifySample(ctx, cfg, tc, ks, vs, res); err != nil && res.Verified == 0 {
		return nil, err
	} else if err != nil {
		return res, err
	}
	return res, nil
}

// fillStripe writes one connection's share of the keys.
func fillStripe(ctx context.Context, cfg FillConfig, tc *tls.Config, ks keySpace, vs *valueSource, first uint64,
	deadline time.Time) (stored, notStored, srvErr uint64, timedOut bool, err error) {
	conn, err := dialConn(cfg.Addr, dialTimeout, tc)
	if err != nil {
		return 0, 0, 0, false, fmt.Errorf("connect %s: %w", cfg.Addr, err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(deadline.Add(replyGrace)); err != nil {
		return 0, 0, 0, false, err
	}
	rr := newReplyReader(conn)
	wbuf := make([]byte, 0, writeBufSize)
	ends := make([]int, 0, cfg.Batch)
	step := uint64(cfg.Conns)
	for i := first; i < cfg.Keys; {
		if ctx.Err() != nil {
			return stored, notStored, srvErr, false, ctx.Err()
		}
		if time.Now().After(deadline) {
			return stored, notStored, srvErr, true, nil
		}
		wbuf, ends = wbuf[:0], ends[:0]
		n := 0
		for ; n < cfg.Batch && i < cfg.Keys; n++ {
			wbuf = appendSet(wbuf, ks, vs, i)
			ends = append(ends, len(wbuf))
			i += step
		}
		if err := writeBatch(conn, wbuf, ends); err != nil {
			return stored, notStored, srvErr, false, fmt.Errorf("send: %w", err)
		}
		for ; n > 0; n-- {
			r, err := rr.readStoreReply()
			if err != nil {
				return stored, notStored, srvErr, false, err
			}
			switch r {
			case storeOK:
				stored++
			case storeNotStored:
				notStored++
			default:
				srvErr++
			}
		}
	}
	return stored, notStored, srvErr, false, nil
}

// fillChecker verifies values read back byte for byte against what the fill wrote.
type fillChecker struct {
	ks               keySpace
	vs               *valueSource
	present, corrupt uint64
	firstCorrupt     string
}

func (fc *fillChecker) check(key []byte, flags uint64, data []byte) {
	i, ok := fc.ks.index(key)
	if ok && flags == uint64(fc.vs.flags(i)) && bytes.Equal(data, fc.vs.value(i)) {
		fc.present++
		return
	}
	fc.corrupt++
	if fc.firstCorrupt == "" {
		fc.firstCorrupt = fmt.Sprintf("key %q flags %d, %d bytes", key, flags, len(data))
	}
}

// verifySample reads back Verify keys spread evenly over the key range (all of them when Verify >= Keys)
// with multi-gets and counts present, missing and corrupt values.
func verifySample(ctx context.Context, cfg FillConfig, tc *tls.Config, ks keySpace, vs *valueSource, res *FillResult) error {
	n := min(cfg.Verify, cfg.Keys)
	conn, err := dialConn(cfg.Addr, dialTimeout, tc)
	if err != nil {
		return fmt.Errorf("verify: connect: %w", err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(cfg.MaxTime + replyGrace)); err != nil {
		return err
	}
	rr := newReplyReader(conn)
	fc := &fillChecker{ks: ks, vs: vs}
	idx := make([]uint64, 0, verifyBatch)
	wbuf := make([]byte, 0, writeBufSize)
	flush := func() error {
		if len(idx) == 0 {
			return nil
		}
		wbuf = appendGet(wbuf[:0], "get", ks, idx)
		if _, err := conn.Write(wbuf); err != nil {
			return fmt.Errorf("verify: send: %w", err)
		}
		if _, err := rr.readGetReply(fc); err != nil {
			return fmt.Errorf("verify: %w", err)
		}
		idx = idx[:0]
		return ctx.Err()
	}
	for j := uint64(0); j < n; j++ {
		// Spread the sample: index j*Keys/n, computed without overflow for any realistic count.
		idx = append(idx, uint64(float64(j)*float64(cfg.Keys)/float64(n)))
		if len(idx) == verifyBatch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	res.Verified, res.Present, res.Corrupt = n, fc.present, fc.corrupt
	res.Missing = n - fc.present - fc.corrupt
	if fc.corrupt > 0 {
		return fmt.Errorf("verify: %d of %d values read back differ from what was written (first: %s)",
			fc.corrupt, n, fc.firstCorrupt)
	}
	return nil
}
