package slab

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestFlushMarksWhole checks which stored flush_all marks OpenBacking trusts.
func TestFlushMarksWhole(t *testing.T) {
	le := binary.LittleEndian
	header := func(mark1, mark2, live, cas, check uint64) []byte {
		hdr := make([]byte, headerBytes)
		le.PutUint64(hdr[hdrCasHigh:], mark1)
		le.PutUint64(hdr[hdrCasHigh2:], mark2)
		le.PutUint64(hdr[hdrOldestLive:], live)
		le.PutUint64(hdr[hdrOldestCas:], cas)
		le.PutUint64(hdr[hdrFlushCheck:], check)
		return hdr
	}
	for _, tc := range []struct {
		name string
		hdr  []byte
		want bool
	}{
		{"never flushed", header(0, 0, 0, 0, flushCheck(0, 0)), true},
		{"flushed below the mark", header(500, 500, 1700000000, 400, flushCheck(1700000000, 400)), true},
		{"the larger copy of the mark counts", header(0, 500, 1700000000, 400, flushCheck(1700000000, 400)), true},
		{"check word off", header(500, 500, 1700000000, 400, flushCheck(1700000000, 401)), false},
		{"oldest_live changed", header(500, 500, 1700000001, 400, flushCheck(1700000000, 400)), false},
		{"oldest CAS above the mark, check word consistent", header(500, 500, 0, 501, flushCheck(0, 501)), false},
	} {
		assert.Equal(t, tc.want, flushMarksWhole(tc.hdr), tc.name)
	}
}

// TestParkedRecord checks that a parked page's record reads back as written, never as a page in use, and
// that a damaged one (any bit flipped) is not taken for a parked page of other values.
func TestParkedRecord(t *testing.T) {
	for _, tc := range []struct {
		class, owner uint8
		syncs        uint64
	}{
		{0, 0, 0},
		{61, 63, 1},
		{7, 3, 1<<32 + 5}, // the record keeps the low 32 bits
		{255, 255, 1<<32 - 1},
	} {
		v := encodeParked(tc.class, tc.owner, tc.syncs)
		class, owner, at, ok := decodeParked(v)
		assert.True(t, ok)
		assert.Equal(t, []any{tc.class, tc.owner, uint32(tc.syncs)}, []any{class, owner, at})
		_, _, inUse := decodeRecord(v)
		assert.False(t, inUse, "a parked page is not in use")
		_, _, _, ok = decodeParked(encodeRecord(tc.class, tc.owner))
		assert.False(t, ok, "a page in use is not parked")
		for bit := range 64 {
			c, o, a, ok := decodeParked(v ^ 1<<bit)
			assert.False(t, ok && (c != tc.class || o != tc.owner || a != uint32(tc.syncs)),
				"bit %d flipped reads as another parked page", bit)
			_, _, inUse := decodeRecord(v ^ 1<<bit)
			assert.False(t, inUse, "bit %d flipped reads as a page in use", bit)
		}
	}
}
