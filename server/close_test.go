package server

import (
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/panjf2000/gnet/v2"
)

// resetConn is a connection whose peer has gone: its first write fails, and, as gnet does, the failing
// write closes the connection (OnClose) before it returns. It records any write or discard after that.
type resetConn struct {
	ctxConn
	srv      *Server
	closed   bool
	afterUse []string
}

func (c *resetConn) Context() any { return c.cn }

func (c *resetConn) SetContext(any) {}

func (c *resetConn) Write(p []byte) (int, error) {
	if c.closed {
		c.afterUse = append(c.afterUse, fmt.Sprintf("write of %d bytes", len(p)))
		return 0, net.ErrClosed
	}
	c.closed = true
	err := fmt.Errorf("write: %w", syscall.ECONNRESET)
	c.srv.OnClose(c, err)
	return 0, err
}

func (c *resetConn) Discard(n int) (int, error) {
	if c.closed {
		c.afterUse = append(c.afterUse, fmt.Sprintf("discard of %d bytes", n))
	}
	return c.ctxConn.Discard(n)
}

// TestServeStopsWhenAWriteCloses: a flush in the middle of serve (replies past flushThreshold) that fails
// closes the connection inside the write. serve must stop there: no request after it executed, nothing more
// written or discarded on a connection whose descriptor may already belong to another client.
func TestServeStopsWhenAWriteCloses(t *testing.T) {
	big := strings.Repeat("b", flushThreshold)
	cases := []struct {
		name, setup, read string
	}{
		{"pipelined gets", "set big 0 0 " + fmt.Sprint(len(big)) + "\r\n" + big + "\r\n",
			"get big\r\nset after 0 0 1\r\nx\r\nget big\r\n"},
		{"metadump", fillKeys(6000),
			"lru_crawler metadump all\r\nset after 0 0 1\r\nx\r\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestServer(t)
			setup := &fakeConn{}
			feed(newConn(s, nil), setup, tc.setup)
			if strings.Contains(setup.out.String(), "ERROR") {
				t.Fatalf("set-up failed: %q", trim(setup.out.String()))
			}
			c := &resetConn{srv: s}
			c.cn = newConn(s, nil)
			c.in.WriteString(tc.read)
			if act := s.OnTraffic(c); act != gnet.Close {
				t.Errorf("serve returned %v, want Close", act)
			}
			if !c.closed {
				t.Fatal("no write failed: the replies did not pass the flush threshold")
			}
			if len(c.afterUse) > 0 {
				t.Errorf("used after it closed: %v", c.afterUse)
			}
			check := &fakeConn{}
			if got, _ := feed(newConn(s, nil), check, "get after\r\n"); got != "END\r\n" {
				t.Errorf("a request after the failed write was executed: get after = %q", got)
			}
		})
	}
}

// fillKeys is n sets of distinct 30-byte keys: a metadump of them passes flushThreshold.
func fillKeys(n int) string {
	var w strings.Builder
	for i := range n {
		fmt.Fprintf(&w, "set metadump-key-%013d 0 0 1\r\nx\r\n", i)
	}
	return w.String()
}
