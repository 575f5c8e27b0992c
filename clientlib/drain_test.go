package clientlib

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSkipReadsWholeReplies: the drainer's skip consumes exactly the replies an abandoned request
// produces, whatever their shape, so the next reply read is the next request's (here the line "NEXT").
func TestSkipReadsWholeReplies(t *testing.T) {
	tests := []struct {
		name    string
		replies int
		stream  string
	}{
		{"store", 1, "STORED\r\n"},
		{"get miss", 1, "END\r\n"},
		{"get hit", 1, "VALUE k 0 5\r\nEND\r\n\r\nEND\r\n"}, // the value is "END\r\n": skipped as data
		{"gets hits", 1, "VALUE a 1 2 9\r\nxx\r\nVALUE b 0 0 7\r\n\r\nEND\r\n"},
		{"lease-get grant", 1, "LVALUE k 7 0 3\r\nold\r\nEND\r\n"},
		{"lease-get on memcached", 1, "ERROR\r\n"},
		{"two get lines", 2, "VALUE a 0 1\r\nx\r\nEND\r\nEND\r\n"},
		{"server error", 1, "SERVER_ERROR out of memory\r\n"},
		{"incr", 1, "42\r\n"},
		{"stats", 1, "STAT pid 1\r\nSTAT uptime 2\r\nEND\r\n"},
		{"mg hit", 1, "VA 3 f0 c9\r\nabc\r\n"},
		{"mg batch", 3, "VA 2 W\r\nHD\r\nVA 0 Z\r\n\r\nEN\r\n"}, // the first value is "HD"
		{"ms batch", 2, "HD\r\nNS\r\n"},
		{"quiet mg, suppressed", untilMN, "MN\r\n"},
		{"quiet mg, hit", untilMN, "VA 2 t-1\r\nMN\r\nMN\r\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := net.Pipe()
			defer a.Close()
			defer b.Close()
			cn := &conn{srv: &server{addr: "test"}, nc: a, timeout: time.Second,
				r: bufio.NewReader(strings.NewReader(tc.stream + "NEXT\r\n"))}
			tk := &ticket{replies: tc.replies, start: time.Now()}
			require.NoError(t, cn.skip(tk))
			line, err := cn.readLine()
			require.NoError(t, err)
			require.Equal(t, "NEXT", string(line))
		})
	}
}
