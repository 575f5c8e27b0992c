package protocol

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestAppendMetaFlags(t *testing.T) {
	e := MetaEcho{Key: []byte("k"), Len: 5, Cas: 7, Flags: 3, Idle: 2, Fetched: true,
		TTLs: []int64{-1, 30, 60}, ExpOps: "TNR"}
	bin := MetaEcho{Key: []byte("bin"), KeyBinary: true}
	cases := []struct {
		name, toks, echo string
		e                *MetaEcho
		want             string
	}{
		{"mg hit in request order", "v k s c f Oab l h t", EchoGet, &e, " kk s5 c7 f3 Oab l2 h1 t-1"},
		{"t after each exptime op", "t T30 t N5 t", EchoGet, &e, " t-1 t30 t60"},
		{"miss echoes only O and k", "s v Oxy k c", EchoMiss, &e, " Oxy kk"},
		{"ms echoes O, k and c", "T5 c k s", EchoSet, &e, " c7 kk"},
		{"binary key in base64", "k", EchoMiss, &bin, " kYmlu b"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var toks [][]byte
			for _, s := range strings.Fields(c.toks) {
				toks = append(toks, []byte(s))
			}
			assert.Equal(t, c.want, string(AppendMetaFlags(nil, toks, c.echo, c.e)))
		})
	}
	assert.Equal(t, "VA 12", string(AppendMetaHead(nil, true, 12)))
	assert.Equal(t, "HD", string(AppendMetaHead(nil, false, 12)))
}
