package binprot

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func header(op Opcode, key, ext int, body uint32) Header {
	return Header{Magic: MagicRequest, Opcode: op, KeyLen: uint16(key), ExtLen: uint8(ext), BodyLen: body}
}

// Check follows dispatch_bin_command's rules, one row per rule and its edges.
func TestCheck(t *testing.T) {
	cases := []struct {
		name string
		h    Header
		want Verdict
	}{
		{"get", header(OpGet, 3, 0, 3), Valid},
		{"getkq", header(OpGetKQ, 3, 0, 3), Valid},
		{"get without key", header(OpGet, 0, 0, 0), Invalid},
		{"get with extras", header(OpGet, 3, 4, 7), Invalid},
		{"get with a longer body", header(OpGet, 3, 0, 4), Invalid},
		{"key over 250", header(OpGet, 251, 0, 251), Invalid},
		{"key of 250", header(OpGet, 250, 0, 250), Valid},
		{"unknown with a long key is invalid first", header(0x3d, 251, 0, 251), Invalid},
		{"set", header(OpSet, 1, 8, 9), Valid},
		{"setq with a value", header(OpSetQ, 1, 8, 20), Valid},
		{"set with 4 bytes of extras", header(OpSet, 1, 4, 5), Invalid},
		{"set without key", header(OpSet, 0, 8, 8), Invalid},
		{"append", header(OpAppend, 1, 0, 5), Valid},
		{"append with extras", header(OpAppend, 1, 8, 9), Invalid},
		{"delete", header(OpDelete, 1, 0, 1), Valid},
		{"delete with a value", header(OpDelete, 1, 0, 2), Invalid},
		{"incr", header(OpIncrement, 1, 20, 21), Valid},
		{"decrq", header(OpDecrementQ, 1, 20, 21), Valid},
		{"incr with a value", header(OpIncrement, 1, 20, 22), Invalid},
		{"flush", header(OpFlush, 0, 0, 0), Valid},
		{"flush with delay", header(OpFlushQ, 0, 4, 4), Valid},
		{"flush with 8 bytes of extras", header(OpFlush, 0, 8, 8), Invalid},
		{"flush with a key", header(OpFlush, 1, 0, 1), Invalid},
		{"noop", header(OpNoop, 0, 0, 0), Valid},
		{"noop with a body", header(OpNoop, 0, 0, 1), Invalid},
		{"version", header(OpVersion, 0, 0, 0), Valid},
		{"quitq", header(OpQuitQ, 0, 0, 0), Valid},
		{"stat", header(OpStat, 0, 0, 0), Valid},
		{"stat with a longer body", header(OpStat, 5, 0, 9), Valid},
		{"stat with extras", header(OpStat, 0, 4, 4), Invalid},
		{"touch", header(OpTouch, 1, 4, 5), Valid},
		{"gatkq", header(OpGatKQ, 1, 4, 5), Valid},
		{"gat without extras", header(OpGat, 1, 0, 1), Invalid},
		{"sasl list", header(OpSASLListMechs, 0, 0, 0), Valid},
		{"sasl auth", header(OpSASLAuth, 5, 0, 20), Valid},
		{"sasl auth without mechanism", header(OpSASLAuth, 0, 0, 20), Invalid},
		{"range get", header(0x30, 1, 0, 1), Unknown},
		{"0x1b", header(0x1b, 0, 0, 0), Unknown},
		{"0xff", header(0xff, 0, 0, 0), Unknown},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := c.h
			assert.Equal(t, c.want, h.Check())
		})
	}
}

func TestLengthsFit(t *testing.T) {
	fits := func(h Header) bool { return h.LengthsFit() }
	assert.True(t, fits(header(OpGet, 3, 0, 3)))
	assert.False(t, fits(header(OpGet, 3, 0, 2)))
	assert.False(t, fits(header(OpSet, 3, 8, 10)))
	assert.True(t, fits(header(OpSet, 3, 8, 11)))
}

func TestQuietForms(t *testing.T) {
	for quiet, base := range quietOf {
		assert.True(t, quiet.Quiet(), "%#x", quiet)
		assert.Equal(t, base, quiet.Base())
		assert.False(t, base.Quiet(), "%#x", base)
		assert.Equal(t, base, base.Base())
	}
	assert.Len(t, quietOf, 14)
}

func TestReadHeaderAndSlice(t *testing.T) {
	p := []byte{0x80, byte(OpSet), 0, 1, 8, 0, 0, 0, 0, 0, 0, 11, 1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 9}
	p = binary.BigEndian.AppendUint32(p, 7)   // flags
	p = binary.BigEndian.AppendUint32(p, 100) // expiry
	p = append(p, "kvv"...)
	h := ReadHeader(p)
	require.Equal(t, Header{Magic: 0x80, Opcode: OpSet, KeyLen: 1, ExtLen: 8, BodyLen: 11, Opaque: 0x01020304, Cas: 9}, h)
	assert.Equal(t, 33, h.Prefix())
	assert.True(t, h.HasValue())
	assert.Equal(t, 2, h.ValueLen())
	var r Request
	r.Slice(h, p)
	assert.Equal(t, "k", string(r.Key))
	assert.Equal(t, "vv", string(r.Value))
	assert.Equal(t, uint32(7), r.Uint32(0))
	assert.Equal(t, uint32(100), r.Uint32(4))
}

func TestReplies(t *testing.T) {
	h := Header{Opcode: OpGetK, Opaque: 0xdeadbeef}
	got := AppendItemHeader(nil, &h, []byte("key"), true, 5, 2, 77)
	want := []byte{0x81, byte(OpGetK), 0, 3, 4, 0, 0, 0, 0, 0, 0, 9, 0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0, 0, 0, 0, 77,
		0, 0, 0, 5, 'k', 'e', 'y'}
	assert.Equal(t, want, got)
	miss := AppendMiss(nil, &h, []byte("key"), true)
	assert.Equal(t, []byte{0x81, byte(OpGetK), 0, 3, 0, 0, 0, 1, 0, 0, 0, 3, 0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0, 0, 0, 0, 0,
		'k', 'e', 'y'}, miss)
	e := AppendError(nil, &Header{Opcode: OpSet}, StatusE2BIG)
	assert.Equal(t, "Too large.", string(e[HeaderLen:]))
	assert.Equal(t, uint16(StatusE2BIG), binary.BigEndian.Uint16(e[6:]))
	for _, s := range []Status{StatusKeyENOENT, StatusKeyEEXISTS, StatusE2BIG, StatusEINVAL, StatusNotStored,
		StatusDeltaBadval, StatusAuthError, StatusUnknownCommand, StatusENOMEM} {
		assert.NotEqual(t, "UNHANDLED ERROR", s.Text(), "%#x", s)
	}
}

func TestSoleGetKey(t *testing.T) {
	get := func(op Opcode, key string, ext int) []byte {
		h := []byte{MagicRequest, byte(op), 0, byte(len(key)), byte(ext), 0, 0, 0}
		h = binary.BigEndian.AppendUint32(h, uint32(len(key)+ext))
		h = append(h, make([]byte, 12+ext)...)
		return append(h, key...)
	}
	cases := []struct {
		name string
		in   []byte
		want string
	}{
		{"get", get(OpGet, "key", 0), "key"},
		{"getkq", get(OpGetKQ, "key", 0), "key"},
		{"gat", get(OpGat, "key", 4), ""},
		{"set", get(OpSet, "key", 8), ""},
		{"get with extras", get(OpGet, "key", 4), ""},
		{"get and more", append(get(OpGet, "key", 0), 0x80), ""},
		{"half a get", get(OpGet, "key", 0)[:25], ""},
		{"no key", get(OpGet, "", 0), ""},
		{"text", []byte("get key\r\n"), ""},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, string(SoleGetKey(c.in)), c.name)
	}
}
