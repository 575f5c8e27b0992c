package clientlib

import (
	"context"
	"errors"
	"sync"
)

// GetMulti fetches many keys: one round trip per server (all of a server's "gets" lines are written
// before any reply is read), servers in parallel. Missing keys are absent from the map. On a partial
// failure the map holds what was read and the error joins each failing server's error.
func (c *Client) GetMulti(ctx context.Context, keys []string) (map[string]*Item, error) {
	r := c.ring.Load()
	byServer := make(map[*server][]string)
	for _, k := range keys {
		if !validKey(k) {
			return nil, ErrMalformedKey
		}
		srv, err := r.pick(k)
		if err != nil {
			return nil, err
		}
		byServer[srv] = append(byServer[srv], k)
	}
	out := make(map[string]*Item, len(keys))
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, 0, len(byServer))
	for srv, ks := range byServer {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := c.do(ctx, srv, "gets", len(ks), func(cn *conn) error { return c.getBatch(cn, ks, out, &mu) })
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

func (c *Client) getBatch(cn *conn, keys []string, out map[string]*Item, mu *sync.Mutex) error {
	batches := 0
	for start := 0; start < len(keys); start += maxKeysPerGet {
		cn.w.WriteString("gets")
		for _, k := range keys[start:min(start+maxKeysPerGet, len(keys))] {
			cn.w.WriteByte(' ')
			cn.w.WriteString(k)
		}
		cn.w.Write(crlf)
		batches++
	}
	if err := cn.send(batches); err != nil {
		return err
	}
	for ; batches > 0; batches-- {
		err := cn.readValues(c.cfg.MaxValueSize, true, func(key string, h valueHeader, data []byte) {
			mu.Lock()
			out[key] = &Item{Key: key, Value: data, Flags: h.flags, CAS: h.cas}
			mu.Unlock()
		})
		if err != nil {
			return err
		}
	}
	return nil
}
