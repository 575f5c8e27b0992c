package server

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TLS connections are served on gnet's event loops (looptls.go), with TLS 1.2 and 1.3: a pipelined burst
// of sets and gets larger than a record is answered byte for byte, the connection is a gnet one in `stats
// conns`'s table, and quit ends it with a close_notify (io.EOF, not an unexpected EOF).
func TestTLSOnEventLoops(t *testing.T) {
	ts := startTLS(t, func(c *Config) { c.TLS.MinVersion = 1 }) // TLS 1.1 and up
	for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		t.Run(tls.VersionName(v), func(t *testing.T) {
			cfg, err := ts.certs.ClientConfig(nil)
			require.NoError(t, err)
			cfg.MinVersion, cfg.MaxVersion = v, v
			c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ts.tlsAddr, cfg)
			require.NoError(t, err)
			defer c.Close()
			require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
			var req, want strings.Builder
			for i := range 300 {
				val := strings.Repeat(string(rune('a'+i%26)), 100+i*37)
				fmt.Fprintf(&req, "set k%d 0 0 %d\r\n%s\r\nget k%d\r\n", i, len(val), val, i)
				fmt.Fprintf(&want, "STORED\r\nVALUE k%d 0 %d\r\n%s\r\nEND\r\n", i, len(val), val)
			}
			go func() { _, _ = io.WriteString(c, req.String()+"mn\r\n") }()
			got := readUntil(t, c, "MN\r\n")
			assert.True(t, got == want.String()+"MN\r\n", "replies differ (%d bytes, want %d)", len(got), want.Len()+4)
			assert.Equal(t, v, c.ConnectionState().Version)

			onLoop := 0
			ts.s.conns.Range(func(_, h any) bool {
				if _, ok := h.(gnet.Conn); ok {
					onLoop++
				}
				return true
			})
			assert.Positive(t, onLoop, "the TLS connection is a gnet one")

			_, err = io.WriteString(c, "quit\r\n")
			require.NoError(t, err)
			rest, err := io.ReadAll(c)
			assert.NoError(t, err, "close_notify before the close")
			assert.Empty(t, rest)
		})
	}
}
