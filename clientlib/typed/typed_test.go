package typed_test

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasecached/leasecached/clientlib"
	"github.com/leasecached/leasecached/clientlib/typed"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type user struct {
	ID    int
	Name  string
	Tags  []string
	Score float64
}

func small() user { return user{ID: 42, Name: "Ada", Tags: []string{"admin"}, Score: 1.5} }

// big encodes to about 9 KB, far over the compression threshold, and compresses well.
func big() user {
	return user{ID: 7, Name: strings.Repeat("Lovelace ", 1000), Tags: []string{"a", "b"}, Score: -2}
}

const threshold = 256

var codecs = []struct {
	name       string
	codec      typed.Codec[user]
	compresses bool
	json       bool // the stored (inflated) bytes are JSON text
}{
	{"json", typed.JSON[user](), false, true},
	{"gob", typed.Gob[user](), false, false},
	{"json+zlib", typed.Compressed(typed.JSON[user](), threshold), true, true},
	{"gob+zlib", typed.Compressed(typed.Gob[user](), threshold), true, false},
}

func newClient(t *testing.T, addr string) *clientlib.Client {
	t.Helper()
	c, err := clientlib.NewFromAddrs(addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// inflate returns what a plain client reads under a key, inflated when it begins with zlib's header.
func inflate(t *testing.T, data []byte) (plain []byte, compressed bool) {
	if !bytes.HasPrefix(data, []byte{0x78, 0x9c}) {
		return data, false
	}
	r, err := zlib.NewReader(bytes.NewReader(data))
	require.NoError(t, err)
	plain, err = io.ReadAll(r)
	require.NoError(t, err)
	return plain, true
}

// TestRoundTrip: each codec, with and without compression, round-trips a small and a large value through
// Set and Get, GetOrFill (filled once, then decoded from the cache by another client) and GetMultiOrFill,
// against leasecached and memcached; a plain client reads the stored bytes: JSON text (inflated first
// when compressed), and only values over the threshold are compressed.
func TestRoundTrip(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			addr := be.start(t)
			plain := newClient(t, addr)
			for _, cd := range codecs {
				t.Run(cd.name, func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					a := typed.New(newClient(t, addr), cd.codec, &clientlib.FillOptions{TTL: time.Minute, Flags: 7})
					b := typed.New(newClient(t, addr), cd.codec, &clientlib.FillOptions{TTL: time.Minute, Flags: 7})
					for _, tc := range []struct {
						name string
						v    user
					}{{"small", small()}, {"big", big()}} {
						key := cd.name + ":" + tc.name
						require.NoError(t, a.Set(ctx, key+":set", tc.v, 0))
						got, err := b.Get(ctx, key+":set")
						require.NoError(t, err)
						require.Equal(t, tc.v, got)

						it, err := plain.Get(ctx, key+":set")
						require.NoError(t, err)
						require.Equal(t, uint32(7), it.Flags, "the options' flags are stored")
						stored, compressed := inflate(t, it.Value)
						require.Equal(t, cd.compresses && tc.name == "big", compressed, "compressed only above the threshold")
						if cd.json {
							var m map[string]any
							require.NoError(t, json.Unmarshal(stored, &m), "a plain client reads JSON text")
							require.Equal(t, tc.v.Name, m["Name"])
						}
						if compressed {
							t.Logf("%s %s: %d bytes stored for %d encoded", cd.name, tc.name, len(it.Value), len(stored))
						}

						var fills atomic.Int32
						fill := func(context.Context, string) (user, error) { fills.Add(1); return tc.v, nil }
						got, err = a.GetOrFill(ctx, key+":fill", fill)
						require.NoError(t, err)
						require.Equal(t, tc.v, got)
						got, err = b.GetOrFill(ctx, key+":fill", fill)
						require.NoError(t, err)
						require.Equal(t, tc.v, got, "decoded from the cache")
						require.Equal(t, int32(1), fills.Load())

						keys := []string{key + ":m1", key + ":m2", key + ":fill"}
						multi := func(_ context.Context, ks []string) (map[string]user, error) {
							out := map[string]user{}
							for _, k := range ks {
								out[k] = tc.v
							}
							return out, nil
						}
						ms, err := a.GetMultiOrFill(ctx, keys, multi)
						require.NoError(t, err)
						require.Len(t, ms, 3)
						ms, err = b.GetMultiOrFill(ctx, keys, func(context.Context, []string) (map[string]user, error) {
							t.Error("all three are cached")
							return nil, nil
						})
						require.NoError(t, err)
						for _, k := range keys {
							require.Equal(t, tc.v, ms[k], k)
						}
					}
				})
			}
		})
	}
}

// corrupt are byte strings no codec wrote.
func corrupt(t *testing.T) map[string][]byte {
	zl := func(b []byte) []byte {
		var buf bytes.Buffer
		w := zlib.NewWriter(&buf)
		_, _ = w.Write(b)
		require.NoError(t, w.Close())
		return buf.Bytes()
	}
	goodJSON, _ := typed.JSON[user]().Encode(small())
	goodGob, _ := typed.Gob[user]().Encode(small())
	goodZ := zl(goodJSON)
	return map[string][]byte{
		"garbage":              []byte("\x01\x02\xff garbage"),
		"empty":                {},
		"truncated json":       goodJSON[:len(goodJSON)/2],
		"truncated gob":        goodGob[:len(goodGob)/2],
		"json of another type": []byte(`{"ID":"not a number"}`),
		"zlib header only":     {0x78, 0x9c},
		"truncated zlib":       goodZ[:len(goodZ)/2],
		"zlib bad checksum":    append(append([]byte{}, goodZ[:len(goodZ)-1]...), goodZ[len(goodZ)-1]^0xff),
		"zlib of garbage":      zl([]byte("\x00\x01 not a value")),
	}
}

// TestCorruptValue: bytes no codec wrote, stored by a plain client, give an error wrapping ErrDecode
// from Get, GetOrFill and GetMultiOrFill, never a panic, for every codec.
func TestCorruptValue(t *testing.T) {
	addr := startLeasecached(t)
	plain := newClient(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	bad := corrupt(t)
	for name, data := range bad {
		key := "bad:" + strings.ReplaceAll(name, " ", "-")
		require.NoError(t, plain.Set(ctx, &clientlib.Item{Key: key, Value: data, TTL: time.Minute}))
	}
	for _, cd := range codecs {
		t.Run(cd.name, func(t *testing.T) {
			tc := typed.New(newClient(t, addr), cd.codec, nil)
			for name := range bad {
				key := "bad:" + strings.ReplaceAll(name, " ", "-")
				_, err := tc.Get(ctx, key)
				require.ErrorIs(t, err, typed.ErrDecode, name)
				require.Contains(t, err.Error(), key, "the error names the key")
				_, err = tc.GetOrFill(ctx, key, func(context.Context, string) (user, error) { return small(), nil })
				require.ErrorIs(t, err, typed.ErrDecode, name)
				got, err := tc.GetMultiOrFill(ctx, []string{key}, func(context.Context, []string) (map[string]user, error) { return nil, nil })
				require.ErrorIs(t, err, typed.ErrDecode, name)
				require.Empty(t, got)
			}
		})
	}
}

// TestZlibBomb: a compressed value that inflates past MaxInflated is refused with ErrDecode.
func TestZlibBomb(t *testing.T) {
	var buf bytes.Buffer
	w := zlib.NewWriter(&buf)
	_, _ = w.Write(make([]byte, typed.MaxInflated+1))
	require.NoError(t, w.Close())
	_, err := typed.Compressed(typed.JSON[user](), threshold).Decode(buf.Bytes())
	require.ErrorIs(t, err, typed.ErrDecode)
	require.Contains(t, err.Error(), "inflates to more than")
}

// TestDecodeRandomBytes: 1,000 random byte strings per codec (half of them behind zlib's header, half
// of those a real zlib stream of random bytes) decode to an error or a value, never a panic.
func TestDecodeRandomBytes(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, cd := range codecs {
		t.Run(cd.name, func(t *testing.T) {
			errs := 0
			for i := range 1000 {
				b := make([]byte, r.IntN(64))
				for j := range b {
					b[j] = byte(r.Uint32())
				}
				switch i % 4 {
				case 1:
					b = append([]byte{0x78, 0x9c}, b...)
				case 2:
					var buf bytes.Buffer
					w := zlib.NewWriter(&buf)
					_, _ = w.Write(b)
					_ = w.Close()
					b = buf.Bytes()
				}
				if _, err := cd.codec.Decode(b); err != nil {
					errs++
					assert.ErrorIs(t, err, typed.ErrDecode)
				}
			}
			t.Logf("%s: %d of 1000 random values refused", cd.name, errs)
		})
	}
}

// TestFailedEncodeGivesKeyBack: a fill whose value does not encode (JSON of a channel) fails the call
// and caches nothing: the next fill runs.
func TestFailedEncodeGivesKeyBack(t *testing.T) {
	addr := startLeasecached(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tc := typed.New(newClient(t, addr), typed.JSON[any](), nil)
	_, err := tc.GetOrFill(ctx, "enc", func(context.Context, string) (any, error) { return make(chan int), nil })
	require.Error(t, err)
	v, err := tc.GetOrFill(ctx, "enc", func(context.Context, string) (any, error) { return "ok", nil })
	require.NoError(t, err)
	require.Equal(t, "ok", v)
}
