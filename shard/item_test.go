package shard

import (
	"bytes"
	"testing"

	"github.com/leasecached/leasecached/slab"
)

// Every combination of optional header fields round-trips, and the header is as small as documented.
func TestItemHeaderLayouts(t *testing.T) {
	for _, tc := range []struct {
		name       string
		flags, exp uint32
		vlen       int
		header     int
	}{
		{"bare", 0, 0, 5, 16},
		{"flags", 7, 0, 100, 20},
		{"exptime", 0, 1_800_000_000, 100, 20},
		{"both", 0xffffffff, 1, 255, 24},
		{"two-byte length", 3, 0, 256, 21},
		{"two-byte max", 0, 0, vlen2Max, 17},
		{"four-byte length", 0, 9, vlen2Max + 1, 23},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lay := layoutOf(tc.flags, tc.exp, tc.vlen)
			if got := headerLen(lay, false); got != tc.header {
				t.Fatalf("header %d bytes, want %d", got, tc.header)
			}
			key := []byte("some-key")
			b := make([]byte, tc.header+len(key)+tc.vlen)
			b[offState] = kindHead
			b[offMeta] = lay
			writeHeader(b, 0x0102030405060708, tc.exp, 1234, tc.flags, key, tc.vlen, metaStale|metaKeyBinary)
			if itemCas(b) != 0x0102030405060708 || itemTime(b) != 1234 || itemFlags(b) != tc.flags ||
				itemExp(b) != tc.exp || itemVlen(b) != tc.vlen || !bytes.Equal(itemKey(b), key) ||
				itemMeta(b) != metaStale|metaKeyBinary || dataOff(b) != tc.header+len(key) ||
				itemBytes(b) != int64(len(b)) {
				t.Fatalf("read back cas %x time %d flags %d exp %d vlen %d key %q meta %x",
					itemCas(b), itemTime(b), itemFlags(b), itemExp(b), itemVlen(b), itemKey(b), itemMeta(b))
			}
			setItemMeta(b, metaTokenSent)
			if itemMeta(b) != metaTokenSent || b[offMeta]&metaLayout != lay {
				t.Fatalf("meta bits %x disturbed the layout %x", b[offMeta], lay)
			}
			if canSetExp(b, 77) != (tc.exp != 0) || !canSetExp(b, 0) && tc.exp == 0 {
				t.Fatal("canSetExp disagrees with the layout")
			}
		})
	}
}

// An exptime set on an item stored without one moves the item, keeping everything else; the memory
// and item counts stay the same.
func TestTouchRelocatesItemWithoutExptime(t *testing.T) {
	s, clk := newStore(t, Config{})
	v := pattern(300, 1)
	if r := s.Store(ModeSet, []byte("k"), 42, 0, v, 0); r != Stored {
		t.Fatal(r)
	}
	_, before := mustGet(t, s, "k")
	st0 := s.Stats()
	for _, tc := range []struct {
		name string
		op   func() bool
	}{
		{"touch", func() bool { return s.Touch([]byte("k"), 100) == Touched }},
		{"gat", func() bool { _, _, ok := s.GetAndTouch(nil, []byte("k"), 200); return ok }},
	} {
		if !tc.op() {
			t.Fatalf("%s failed", tc.name)
		}
		got, info := mustGet(t, s, "k")
		if got != string(v) || info.Flags != 42 || info.Cas != before.Cas || info.Exptime == 0 {
			t.Fatalf("%s: read back flags %d cas %d exp %d equal %v", tc.name, info.Flags, info.Cas, info.Exptime, got == string(v))
		}
	}
	st := s.Stats()
	if st.CurrItems != 1 || st.TotalItems != st0.TotalItems || st.Bytes != st0.Bytes+4 {
		t.Fatalf("items %d total %d bytes %d (before %d)", st.CurrItems, st.TotalItems, st.Bytes, st0.Bytes)
	}
	clk.advance(201)
	miss(t, s, "k")
}

// keyOff's table agrees with headerLen for every meta byte, chained or not.
func TestKeyOffMatchesHeaderLen(t *testing.T) {
	b := make([]byte, headerMax)
	for m := range 256 {
		for _, chained := range []bool{false, true} {
			b[offMeta], b[offState] = byte(m), kindHead
			if chained {
				b[offState] |= flagChained
			}
			if got, want := keyOff(b), headerLen(byte(m), chained); got != want {
				t.Fatalf("meta %#x chained %v: keyOff %d, headerLen %d", m, chained, got, want)
			}
		}
	}
}

// valueFields agrees with the one-field accessors for every layout, value length width and chained state,
// in the smallest chunk that can hold the item: its four-byte read of the length field stays inside the
// chunk (an out-of-range read panics) and masks away whatever follows a shorter field.
func TestValueFieldsSmallestChunks(t *testing.T) {
	for _, flags := range []uint32{0, 1, 0xffffffff} {
		for _, exp := range []uint32{0, 1_800_000_000} {
			for _, vlen := range []int{0, 1, vlen1Max, vlen1Max + 1, vlen2Max, vlen2Max + 1} {
				for _, chained := range []bool{false, true} {
					lay := layoutOf(flags, exp, vlen)
					key := []byte("k")
					size := headerLen(lay, chained) + len(key)
					if !chained {
						size += vlen
					}
					size = (size + slab.ChunkAlign - 1) / slab.ChunkAlign * slab.ChunkAlign
					b := bytes.Repeat([]byte{0xa5}, size) // garbage past the header, as in a reused chunk
					b[offState] = kindHead
					if chained {
						b[offState] |= flagChained
					}
					b[offMeta] = lay
					writeHeader(b, 1, exp, 2, flags, key, vlen, 0)
					gotFlags, gotVlen, data := valueFields(b)
					if gotFlags != flags || gotVlen != vlen || (!chained && data != dataOff(b)) {
						t.Errorf("flags %d exp %d vlen %d chained %v in %d bytes: valueFields = %d, %d, %d; want %d, %d, %d",
							flags, exp, vlen, chained, size, gotFlags, gotVlen, data, flags, vlen, dataOff(b))
					}
				}
			}
		}
	}
}
