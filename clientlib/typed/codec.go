package typed

import (
	"bytes"
	"compress/zlib"
	"encoding/gob"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Codec turns values of T into the bytes a Cache stores, and back. Decode must return an error, never
// panic, on bytes it did not write (another writer's, a truncated or corrupt value).
type Codec[T any] interface {
	Encode(v T) ([]byte, error)
	Decode(data []byte) (T, error)
}

// ErrDecode wraps every error of decoding a cached value: the bytes under the key are not a value of T
// as the codec writes it (another writer, another type, corruption).
var ErrDecode = errors.New("typed: cached value does not decode")

// JSON stores values as encoding/json writes them: UTF-8 JSON text, readable by any client.
func JSON[T any]() Codec[T] { return jsonCodec[T]{} }

type jsonCodec[T any] struct{}

func (jsonCodec[T]) Encode(v T) ([]byte, error) { return json.Marshal(v) }

func (jsonCodec[T]) Decode(data []byte) (T, error) {
	var v T
	if err := json.Unmarshal(data, &v); err != nil {
		return v, fmt.Errorf("%w: json: %v", ErrDecode, err)
	}
	return v, nil
}

// Gob stores values as one encoding/gob stream each (the type's description, then the value), so each
// value decodes on its own, by any Go program.
func Gob[T any]() Codec[T] { return gobCodec[T]{} }

type gobCodec[T any] struct{}

func (gobCodec[T]) Encode(v T) ([]byte, error) {
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func (gobCodec[T]) Decode(data []byte) (v T, err error) {
	defer func() { // encoding/gob recovers its own panics; this is a second net for bytes it did not write
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: gob: %v", ErrDecode, p)
		}
	}()
	if err := gob.NewDecoder(bytes.NewReader(data)).Decode(&v); err != nil {
		return v, fmt.Errorf("%w: gob: %v", ErrDecode, err)
	}
	return v, nil
}

// zlibMagic begins every value Compressed compressed: the header compress/zlib writes at its default
// level (RFC 1950: deflate, 32 KiB window, level 6). Neither JSON (text begins with one of { [ " - t f
// n, a digit or white space) nor gob (a message begins with its length, then a type id whose first
// byte is below 0x80 or above 0xF7) can begin with it, so a reader tells a compressed value by it.
var zlibMagic = []byte{0x78, 0x9c}

// MaxInflated bounds what a compressed value may inflate to: a larger one is refused with ErrDecode
// rather than allocated.
const MaxInflated = 64 << 20

// Compressed wraps inner: an encoding longer than above bytes is stored compressed with zlib (RFC 1950,
// default level), which begins with the bytes 0x78 0x9c; shorter ones are stored as inner wrote them.
// Decode inflates a value that begins with those bytes and passes it to inner. inner must never write
// a value beginning with them itself (JSON and Gob never do).
func Compressed[T any](inner Codec[T], above int) Codec[T] {
	return compressed[T]{inner: inner, above: above}
}

type compressed[T any] struct {
	inner Codec[T]
	above int
}

func (c compressed[T]) Encode(v T) ([]byte, error) {
	data, err := c.inner.Encode(v)
	if err != nil || len(data) <= c.above {
		return data, err
	}
	var b bytes.Buffer
	w := zlib.NewWriter(&b)
	if _, err := w.Write(data); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func (c compressed[T]) Decode(data []byte) (T, error) {
	if !bytes.HasPrefix(data, zlibMagic) {
		return c.inner.Decode(data)
	}
	var zero T
	r, err := zlib.NewReader(bytes.NewReader(data))
	if err != nil {
		return zero, fmt.Errorf("%w: zlib: %v", ErrDecode, err)
	}
	plain, err := io.ReadAll(io.LimitReader(r, MaxInflated+1))
	if err == nil {
		err = r.Close()
	}
	switch {
	case err != nil:
		return zero, fmt.Errorf("%w: zlib: %v", ErrDecode, err)
	case len(plain) > MaxInflated:
		return zero, fmt.Errorf("%w: zlib: inflates to more than %d bytes", ErrDecode, MaxInflated)
	}
	return c.inner.Decode(plain)
}
