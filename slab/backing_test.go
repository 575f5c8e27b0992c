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
