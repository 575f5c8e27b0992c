package load

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// Defaults of a hit-ratio run.
const (
	DefaultHitBatch   = 64
	defaultHitMaxTime = 10 * time.Minute
)

// HitConfig describes one hit-ratio run: a seeded cache-aside stream (get; on a miss, set).
type HitConfig struct {
	Addr      string        `json:"addr"`
	Conns     int           `json:"conns"`
	Batch     int           `json:"batch"`
	Keys      uint64        `json:"keys"`
	KeySize   int           `json:"key_size"`
	ValueSize int           `json:"value_size"`
	Dist      string        `json:"dist"`
	ZipfS     float64       `json:"zipf_s"`
	Seed      uint64        `json:"seed"`
	Warmup    uint64        `json:"warmup_requests"` // not counted
	Requests  uint64        `json:"requests"`        // counted
	ServerPID int           `json:"server_pid"`
	MaxTime   time.Duration `json:"-"`
	TLS       TLSOptions    `json:"tls,omitzero"`
}

// HitResult is one hit-ratio run's outcome; it is also the JSON line.
type HitResult struct {
	Mode        string    `json:"mode"`
	Server      string    `json:"server,omitempty"`
	Config      HitConfig `json:"config"`
	FootprintMB float64   `json:"footprint_mb"` // keys x (key + value)
	Requests    uint64    `json:"requests"`
	Hits        uint64    `json:"hits"`
	HitRatio    float64   `json:"hit_ratio"`
	Seconds     float64   `json:"seconds"`
	Evictions   uint64    `json:"evictions"`
	CurrItems   uint64    `json:"curr_items"`
}

// RunHitRatio replays the cache-aside loop: each connection draws a seeded Zipf stream of keys, sends a
// batch of gets, then sets every key that missed. With one connection (the default) the request stream
// a server sees is identical from run to run and from server to server; only the server's replies
// (what it kept) differ. A key drawn twice in one batch misses twice and is set twice: the same for
// every server.
func RunHitRatio(ctx context.Context, cfg HitConfig) (*HitResult, error) {
	if cfg.Conns < 1 || cfg.Conns > maxConns || cfg.Batch < 1 || cfg.Batch > maxPipeline {
		return nil, fmt.Errorf("hitratio: conns %d / batch %d out of range", cfg.Conns, cfg.Batch)
	}
	ks, err := newKeySpace(0, cfg.Keys, cfg.KeySize)
	if err != nil {
		return nil, err
	}
	vs, err := newValueSource(cfg.ValueSize)
	if err != nil {
		return nil, err
	}
	tc, err := cfg.TLS.clientConfig(cfg.Addr)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	deadline := start.Add(cfg.MaxTime)
	hits := make([]uint64, cfg.Conns)
	counted := make([]uint64, cfg.Conns)
	errs := make([]error, cfg.Conns)
	var wg sync.WaitGroup
	for c := 0; c < cfg.Conns; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			warm := cfg.Warmup / uint64(cfg.Conns)
			total := warm + cfg.Requests/uint64(cfg.Conns)
			hits[c], counted[c], errs[c] = hitStream(ctx, cfg, tc, ks, vs, uint64(c), warm, total, deadline)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	res := &HitResult{Mode: "hitratio", Config: cfg, Seconds: time.Since(start).Seconds(),
		FootprintMB: float64(cfg.Keys) * float64(cfg.KeySize+cfg.ValueSize) / (1 << 20)}
	for c := range hits {
		res.Hits += hits[c]
		res.Requests += counted[c]
	}
	if res.Requests > 0 {
		res.HitRatio = float64(res.Hits) / float64(res.Requests)
	}
	st, err := serverStats(cfg.Addr, tc)
	if err != nil {
		return nil, err
	}
	res.Evictions, res.CurrItems = statUint(st, "evictions"), statUint(st, "curr_items")
	return res, nil
}

func hitStream(ctx context.Context, cfg HitConfig, tc *tls.Config, ks keySpace, vs *valueSource, stream, warm, total uint64,
	deadline time.Time) (hits, counted uint64, err error) {
	conn, err := dialConn(cfg.Addr, dialTimeout, tc)
	if err != nil {
		return 0, 0, fmt.Errorf("connect %s: %w", cfg.Addr, err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(deadline.Add(replyGrace)); err != nil {
		return 0, 0, err
	}
	dist, err := newKeyDist(cfg.Dist, cfg.ZipfS, cfg.Keys, rand.New(rand.NewPCG(cfg.Seed, stream)))
	if err != nil {
		return 0, 0, err
	}
	rr := newReplyReader(conn)
	wbuf := make([]byte, 0, writeBufSize)
	ends := make([]int, 0, cfg.Batch)
	batch := make([]uint64, cfg.Batch)
	one := make([]uint64, 1)
	for done := uint64(0); done < total; {
		if err := ctx.Err(); err != nil {
			return hits, counted, err
		}
		if time.Now().After(deadline) {
			return hits, counted, fmt.Errorf("hitratio: not done after %v (%d of %d requests)", cfg.MaxTime, done, total)
		}
		n := min(uint64(cfg.Batch), total-done)
		wbuf, ends = wbuf[:0], ends[:0]
		for j := uint64(0); j < n; j++ {
			batch[j] = dist.next()
			one[0] = batch[j]
			wbuf = appendGet(wbuf, "get", ks, one)
			ends = append(ends, len(wbuf))
		}
		if err := writeBatch(conn, wbuf, ends); err != nil {
			return hits, counted, fmt.Errorf("send: %w", err)
		}
		wbuf, ends = wbuf[:0], ends[:0]
		sets := 0
		for j := uint64(0); j < n; j++ {
			h, err := rr.readGetReply(nil)
			if err != nil {
				return hits, counted, err
			}
			if done+j >= warm {
				counted++
				hits += uint64(h)
			}
			if h == 0 {
				wbuf = appendSet(wbuf, ks, vs, batch[j])
				ends = append(ends, len(wbuf))
				sets++
			}
		}
		if sets > 0 {
			if err := writeBatch(conn, wbuf, ends); err != nil {
				return hits, counted, fmt.Errorf("send: %w", err)
			}
			for ; sets > 0; sets-- {
				if _, err := rr.readStoreReply(); err != nil {
					return hits, counted, err
				}
			}
		}
		done += n
	}
	return hits, counted, nil
}
