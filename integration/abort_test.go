package integration

import (
	"bytes"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
)

// abortClients is how many clients vanish mid-exchange in TestAbruptClients.
const abortClients = 50

// abortValueSize makes the replies to the aborted gets larger than socket
// buffers, so the server is still writing when the client disappears.
const abortValueSize = 512 << 10

// TestAbruptClients: clients that reset their connection in the middle of a
// large reply, or in the middle of a data block, must not disturb the
// server: afterwards it still answers, and the data is intact.
func TestAbruptClients(t *testing.T) {
	for _, which := range []string{"memcached", "leasecached"} {
		t.Run(which, func(t *testing.T) {
			var d *daemon
			if which == "memcached" {
				d = startMemcached(t)
			} else {
				d = startLeasecached(t)
			}
			val := strings.Repeat("v", abortValueSize)
			setup := dialRaw(t, d)
			rep := setup.exchange([]byte(fmt.Sprintf("set big 0 0 %d\r\n%s\r\nmn\r\n", abortValueSize, val)), wholeWrite, sentinelReply, defaultReplyTimeout)
			if string(rep.data) != "STORED\r\nMN\r\n" {
				t.Fatalf("setup set: %q", truncate(rep.data, 200))
			}
			var wg sync.WaitGroup
			errs := make(chan error, abortClients)
			for i := 0; i < abortClients; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c, err := net.DialTimeout("tcp", d.addr, dialTimeout)
					if err != nil {
						errs <- err
						return
					}
					script := "get big big big big\r\n"
					if i%2 == 1 { // die inside a data block instead
						script = fmt.Sprintf("set half%d 0 0 100\r\n0123456789", i)
					}
					_, _ = c.Write([]byte(script))
					_ = c.(*net.TCPConn).SetLinger(0) // close with RST
					_ = c.Close()
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Errorf("dial: %v", err)
			}
			after := dialRaw(t, d)
			// The server may still be building replies for the dead clients (50 MB under -race on a
			// loaded CI machine): this checks correctness, not speed, so allow for that.
			rep = after.exchange([]byte("get big half1\r\nmn\r\n"), wholeWrite, sentinelReply, 5*defaultReplyTimeout)
			want := fmt.Sprintf("VALUE big 0 %d\r\n%s\r\nEND\r\nMN\r\n", abortValueSize, val)
			if !bytes.Equal(rep.data, []byte(want)) {
				t.Errorf("after %d aborted clients: got %q (closed %v)", abortClients, truncate(rep.data, 200), rep.closed)
			}
		})
	}
}
