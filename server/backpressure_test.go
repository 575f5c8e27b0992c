package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBackpressure serves scripts to a client that reads nothing until the server pauses reading its
// connection, then takes every reply at once (as gnet's writes drain the buffer and resume the
// connection). Each script must get the replies it gets from a client that always reads, while no serve
// call leaves more than the bound unsent, and every pause must come with input still unserved or
// replies still unsent (nothing to resume from would hang the client).
func TestBackpressure(t *testing.T) {
	value := strings.Repeat("v", 100_000)
	var pipelined, metadumpSet strings.Builder
	for range 400 {
		pipelined.WriteString("get big\r\n")
	}
	for i := range 20_000 {
		fmt.Fprintf(&metadumpSet, "set item:%05d 0 0 1 noreply\r\nx\r\n", i)
	}
	setBig := "set big 0 0 100000\r\n" + value + "\r\n"
	cases := []struct {
		name, setup, script string
	}{
		{"pipelined gets of a large value", setBig, pipelined.String() + "mn\r\n"},
		{"one get naming a large value 2000 times", setBig,
			"get" + strings.Repeat(" big", 2000) + "\r\nmn\r\n"},
		{"gets and lease-get variants", setBig,
			"gets" + strings.Repeat(" big", 300) + "\r\nlease-get" + strings.Repeat(" big", 300) + "\r\nmn\r\n"},
		{"metadump of many items", metadumpSet.String(), "lru_crawler metadump all\r\nmn\r\n"},
	}
	// bound is what a stuck client may leave unsent after a serve: outboundLimit, plus one flush of
	// replies built past flushThreshold, plus one value's reply.
	bound := outboundLimit + flushThreshold + len(value) + 100
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestServer(t)
			setup := &fakeConn{}
			feed(newConn(s, nil), setup, tc.setup)
			want, _ := feed(newConn(s, nil), &fakeConn{}, tc.script)
			require.True(t, strings.HasSuffix(want, "MN\r\n"), "script ends with mn: %q", trim(want))

			cn, fc := newConn(s, nil), &fakeConn{stuck: true}
			fc.in.WriteString(tc.script)
			var got strings.Builder
			pauses := 0
			for round := 0; round < 100_000 && !strings.HasSuffix(got.String(), "MN\r\n"); round++ {
				act := serveWoken(cn, fc)
				require.Equal(t, Continue, act)
				require.LessOrEqual(t, fc.out.Len(), bound, "unsent replies after serve %d", round)
				if fc.paused {
					pauses++
					require.Positive(t, fc.out.Len(), "paused with nothing unsent: nothing would resume it")
				}
				got.Write(fc.out.Bytes()) // the client takes every reply; gnet resumes the connection
				fc.out.Reset()
				fc.paused = false
			}
			require.Equal(t, len(want), got.Len())
			require.True(t, want == got.String(), "replies differ from those of a client that reads")
			require.Greater(t, pauses, 1, "a client that does not read must pause its connection")
			require.Zero(t, fc.in.Len(), "input left over")
		})
	}
}
