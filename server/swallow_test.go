package server

import (
	"strings"
	"testing"
)

// A refused data block's reply is written only once the whole block has been swallowed, as memcached
// does (conn_swallow runs before the reply is transmitted), and replies keep request order.
func TestRefusalHeldUntilSwallowed(t *testing.T) {
	const size = 2 << 20 // over the 1 MiB item limit
	tooLarge := "SERVER_ERROR object too large for cache\r\n"
	cases := []struct {
		name   string
		pieces []string // one read event each
		want   []string // replies after each read event
	}{
		{"block arrives in pieces", []string{
			"set k 0 0 2097152\r\n",
			strings.Repeat("x", size/2),
			strings.Repeat("x", size/2),
			"\r\nmn\r\n",
		}, []string{"", "", "", tooLarge + "MN\r\n"}},
		{"block and next command in the last piece", []string{
			"mn\r\nset k 0 0 2097152\r\n" + strings.Repeat("x", 100),
			strings.Repeat("x", size-100) + "\r\nget k\r\n",
		}, []string{"MN\r\n", tooLarge + "END\r\n"}},
		{"whole block in one read", []string{
			"set k 0 0 2097152\r\n" + strings.Repeat("x", size) + "\r\nmn\r\n",
		}, []string{tooLarge + "MN\r\n"}},
		{"noreply refusal stays silent", []string{
			"set k 0 0 2097152 noreply\r\n" + strings.Repeat("x", 10),
			strings.Repeat("x", size-10) + "\r\nmn\r\n",
		}, []string{"", "MN\r\n"}},
		{"meta set refusal", []string{
			"ms k 2097152 T0\r\n" + strings.Repeat("x", 10),
			strings.Repeat("x", size-10+1),
			"\nmn\r\n",
		}, []string{"", "", tooLarge + "MN\r\n"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestServer(t)
			cn, fc := newConn(s, nil), &fakeConn{}
			for i, p := range tc.pieces {
				fc.out.Reset()
				got, _ := feed(cn, fc, p)
				if got != tc.want[i] {
					t.Fatalf("after read %d: replies %q, want %q", i, trim(got), tc.want[i])
				}
			}
		})
	}
}
