// Package typed is a typed cache over clientlib: Cache[T] stores values of T through a Codec (JSON,
// gob, either compressed above a size), and reads them back with clientlib's herd-safe GetOrFill and
// GetMultiOrFill. A service that wants only bytes does not import it.
//
// What is stored is the codec's bytes, and nothing else: JSON text, or a gob stream, or (with
// Compressed, for an encoding over its threshold) a zlib stream of them, which begins with the bytes
// 0x78 0x9c. The client flags are FillOptions.Flags (0 unless set). Any memcached client can read the
// value as bytes (clientlib/README.md, "Typed values").
package typed

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasecached/leasecached/clientlib"
)

// Cache reads and writes values of T through a clientlib.Client. It is safe for concurrent use.
type Cache[T any] struct {
	c     *clientlib.Client
	codec Codec[T]
	opts  clientlib.FillOptions
}

// New returns a Cache over c with codec; opts (nil: c's defaults) apply to every GetOrFill and
// GetMultiOrFill, and their TTL and Flags to Set.
func New[T any](c *clientlib.Client, codec Codec[T], opts *clientlib.FillOptions) *Cache[T] {
	tc := &Cache[T]{c: c, codec: codec}
	if opts != nil {
		tc.opts = *opts
	}
	return tc
}

// decode decodes key's cached bytes, naming the key in the error.
func (tc *Cache[T]) decode(key string, data []byte) (T, error) {
	v, err := tc.codec.Decode(data)
	if err != nil {
		return v, fmt.Errorf("typed: %q: %w", key, err)
	}
	return v, nil
}

// Get returns key's value; clientlib.ErrCacheMiss when it is not cached, an error wrapping ErrDecode
// when its bytes do not decode.
func (tc *Cache[T]) Get(ctx context.Context, key string) (T, error) {
	it, err := tc.c.Get(ctx, key)
	if err != nil {
		var zero T
		return zero, err
	}
	return tc.decode(key, it.Value)
}

// Set stores v under key for ttl (0: the options' TTL; clientlib.NeverExpire: no expiry), with the
// options' Flags.
func (tc *Cache[T]) Set(ctx context.Context, key string, v T, ttl time.Duration) error {
	data, err := tc.codec.Encode(v)
	if err != nil {
		return fmt.Errorf("typed: %q: encode: %w", key, err)
	}
	switch {
	case ttl == 0 && tc.opts.TTL != 0:
		ttl = tc.opts.TTL
	case ttl == 0:
		ttl = 5 * time.Minute // clientlib's default fill TTL
	}
	if ttl == clientlib.NeverExpire {
		ttl = 0
	}
	return tc.c.Set(ctx, &clientlib.Item{Key: key, Value: data, Flags: tc.opts.Flags, TTL: ttl})
}

// errEncode marks a fill whose value did not encode: the key is given back as for any failed fill.
var errEncode = errors.New("typed: encode")

// GetOrFill is clientlib.Client.GetOrFill for values of T: fill's value is encoded and cached, and every
// caller, in any process, gets it decoded. A fill that returns clientlib.ErrNotFound is an answer (cached
// with NegativeTTL); one whose value does not encode fails like a fill that failed.
func (tc *Cache[T]) GetOrFill(ctx context.Context, key string, fill func(ctx context.Context, key string) (T, error)) (T, error) {
	var filled T
	ran := false
	v, err := tc.c.GetOrFill(ctx, key, func(ctx context.Context, key string) ([]byte, error) {
		x, err := fill(ctx, key)
		if err != nil {
			return nil, err
		}
		data, err := tc.codec.Encode(x)
		if err != nil {
			return nil, fmt.Errorf("%w: %q: %v", errEncode, key, err)
		}
		filled, ran = x, true
		return data, nil
	}, &tc.opts)
	if err != nil {
		var zero T
		return zero, err
	}
	// This caller's own fill, run before GetOrFill returned (Source is checked first: a background
	// refresh may be running the closure now): no need to decode what it just encoded.
	if (v.Source == clientlib.SourceFill || v.Source == clientlib.SourceFallback) && ran {
		return filled, nil
	}
	return tc.decode(key, v.Data)
}

// GetMultiOrFill is clientlib.Client.GetMultiOrFill for values of T: keys not cached go to one call of
// fill; keys it leaves out are not found (absent from the result). A key whose cached bytes do not
// decode is absent too, and its error (wrapping ErrDecode) is joined in the error.
func (tc *Cache[T]) GetMultiOrFill(ctx context.Context, keys []string, fill func(ctx context.Context, keys []string) (map[string]T, error)) (map[string]T, error) {
	got, err := tc.c.GetMultiOrFill(ctx, keys, func(ctx context.Context, keys []string) (map[string][]byte, error) {
		xs, err := fill(ctx, keys)
		if err != nil {
			return nil, err
		}
		out := make(map[string][]byte, len(xs))
		for k, x := range xs {
			data, err := tc.codec.Encode(x)
			if err != nil {
				return nil, fmt.Errorf("%w: %q: %v", errEncode, k, err)
			}
			out[k] = data
		}
		return out, nil
	}, &tc.opts)
	out := make(map[string]T, len(got))
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for k, v := range got {
		x, err := tc.decode(k, v.Data)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out[k] = x
	}
	return out, errors.Join(errs...)
}
