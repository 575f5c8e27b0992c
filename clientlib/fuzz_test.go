package clientlib

import (
	"bufio"
	"bytes"
	"net"
	"testing"
)

// replyConn is a conn whose replies come from a fixed byte string: the client's reply parsers run on
// arbitrary server output without a network.
func replyConn(reply []byte) *conn {
	var nc net.Conn // never touched by the readers
	return &conn{srv: &server{addr: "fuzz"}, nc: nc, r: bufio.NewReaderSize(bytes.NewReader(reply), readBufferSize)}
}

// FuzzReplyParsers feeds arbitrary bytes to every reply reader of the client: whatever a server (or a
// man in the middle) sends, the client must return an error or a well-formed result, never panic, never
// hand out a value longer than the reply announced, and never read past a declared size limit.
func FuzzReplyParsers(f *testing.F) {
	seeds := []string{
		"END\r\n",
		"VALUE k 0 1\r\nx\r\nEND\r\n",
		"VALUE k 5 3 77\r\nabc\r\nVALUE j 0 0\r\n\r\nEND\r\n",
		"LVALUE k 12345 0 0\r\n\r\nEND\r\n",
		"LVALUE k 1 7 2\r\nhi\r\nEND\r\n",
		"STORED\r\n", "NOT_STORED\r\n", "EXISTS\r\n", "NOT_FOUND\r\n", "ERROR\r\n",
		"SERVER_ERROR object too large for cache\r\n", "CLIENT_ERROR bad data chunk\r\n",
		"VA 2 s2 t-1 f0 c5\r\nhi\r\n", "HD c7\r\n", "EN\r\n", "NF\r\n", "NS\r\n", "EX\r\n", "MN\r\n",
		"VALUE k 0 4294967296\r\n", "VALUE k 0 -1\r\n", "VALUE k 0 3\r\nabcEND\r\n", "\n", "\r\n",
	}
	for _, s := range seeds {
		f.Add([]byte(s), uint16(1024))
	}
	f.Fuzz(func(t *testing.T, reply []byte, maxSize uint16) {
		limit := int(maxSize)
		_ = replyConn(reply).readValues(limit, true, func(key string, h valueHeader, data []byte) {
			if len(data) != h.size || h.size > limit+(1<<10) {
				t.Fatalf("value of %d bytes for a header of %d (limit %d)", len(data), h.size, limit)
			}
		})
		_ = replyConn(reply).readStoreReply()
		for _, quiet := range []bool{false, true} {
			var res MetaResult
			if err := replyConn(reply).readMeta(&res, quiet, "HD", limit); err == nil && len(res.Value) > limit+(1<<10) {
				t.Fatalf("meta value of %d bytes past the limit %d", len(res.Value), limit)
			}
		}
		if line, err := replyConn(reply).readLine(); err == nil {
			_, _ = replyConn(reply).parseValue(line, limit)
		}
	})
}
