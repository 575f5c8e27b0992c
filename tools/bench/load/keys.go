package load

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
)

// Limits of generated keys and values.
const (
	// maxKeyLen is memcached's key length limit.
	maxKeyLen = 250
	// keyPrefix starts every generated key, so a stray key from elsewhere cannot pass verification.
	keyPrefix = 'k'
	// valuePeriod is the number of distinct value offsets into the pattern block. It is prime so that
	// neighbouring indexes get unrelated-looking values, and a value read back under the wrong key is
	// caught by verification.
	valuePeriod = 4093
	// valueSeed fixes the pattern block, so a fill and a later verify in another process agree.
	valueSeed = 0x6c656173656361
	// maxValueSize bounds -value-size: the default item size limit of both servers is 1 MiB.
	maxValueSize = 1 << 20
)

// keySpace names items: index i (0 <= i < count) is the key keyPrefix followed by base+i in decimal,
// zero-padded so that every key has exactly size bytes.
type keySpace struct {
	base  uint64
	count uint64
	size  int
}

func newKeySpace(base, count uint64, size int) (keySpace, error) {
	if count == 0 {
		return keySpace{}, fmt.Errorf("key count must be positive")
	}
	need := 1 + decimalLen(base+count-1)
	if size < need || size > maxKeyLen {
		return keySpace{}, fmt.Errorf("key size %d: must be between %d (to number %d keys from %d) and %d",
			size, need, count, base, maxKeyLen)
	}
	return keySpace{base: base, count: count, size: size}, nil
}

func decimalLen(v uint64) int {
	n := 1
	for v >= 10 {
		v /= 10
		n++
	}
	return n
}

// appendKey appends the key of index i; it does not allocate when dst has room.
//
// The generator shares the cores with the server it measures, so its own CPU per request counts against
// every server (a pipelined batch's encoding and reply parsing cost about 1800 instructions a request
// before the keys, numbers and lines were written and read in larger steps; BenchmarkGenBatch).
func (ks keySpace) appendKey(dst []byte, i uint64) []byte {
	start := len(dst)
	dst = append(dst, keyPadding[:ks.size]...)
	dst[start] = keyPrefix
	v := ks.base + i
	p := start + ks.size
	for ; v >= 10; v /= 100 { // two digits a step: half the divisions (BenchmarkGenBatchMultiGet)
		p -= 2
		d := v % 100 * 2
		dst[p], dst[p+1] = digitPairs[d], digitPairs[d+1]
	}
	if v > 0 {
		dst[p-1] = byte('0' + v)
	}
	return dst
}

// digitPairs holds "00" through "99".
var digitPairs = func() (t [200]byte) {
	for i := range 100 {
		t[2*i], t[2*i+1] = byte('0'+i/10), byte('0'+i%10)
	}
	return t
}()

// keyPadding is the zeros a key's number is padded with.
var keyPadding = [maxKeyLen]byte(bytes.Repeat([]byte{'0'}, maxKeyLen))

// index parses a key produced by appendKey back into its index; ok is false for any other key.
func (ks keySpace) index(key []byte) (uint64, bool) {
	if len(key) != ks.size {
		return 0, false
	}
	v, ok := KeyNumber(key)
	if !ok || v < ks.base || v-ks.base >= ks.count {
		return 0, false
	}
	return v - ks.base, true
}

// KeyNumber parses the number in a key of the form appendKey writes (keyPrefix, then decimal digits,
// whatever the key space); ok is false for any other key, and for a number beyond a uint64.
func KeyNumber(key []byte) (uint64, bool) {
	if len(key) < 2 || key[0] != keyPrefix {
		return 0, false
	}
	var v uint64
	for _, c := range key[1:] {
		if c < '0' || c > '9' || v > (math.MaxUint64-uint64(c-'0'))/10 {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	return v, true
}

// valueSource gives every index a deterministic value and flags word, so that anything read back can be
// checked byte for byte without remembering what was written.
type valueSource struct {
	size  int
	block []byte
}

func newValueSource(size int) (*valueSource, error) {
	if size < 0 || size > maxValueSize {
		return nil, fmt.Errorf("value size %d: must be between 0 and %d", size, maxValueSize)
	}
	r := rand.New(rand.NewPCG(valueSeed, valueSeed))
	block := make([]byte, size+valuePeriod)
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	for i := range block {
		block[i] = letters[r.IntN(len(letters))]
	}
	return &valueSource{size: size, block: block}, nil
}

// value returns the value of index i: a view into the shared block, never to be modified.
func (vs *valueSource) value(i uint64) []byte {
	off := int(i % valuePeriod)
	return vs.block[off : off+vs.size]
}

// flags returns the client flags stored with index i (a multiplicative hash, so mix-ups show).
func (vs *valueSource) flags(i uint64) uint32 {
	return uint32(i * 2654435761)
}
