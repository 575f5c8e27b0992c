package integration

import (
	"bytes"
	"testing"
	"time"
)

// Bounds of the connection-limit test. memcached counts reserved file
// descriptors against -c, so the number of usable connections differs
// between the servers by design; what must agree is how a connection over
// the limit is refused, and that closed connections free their slots.
const (
	connLimit      = "20"
	connLimitTries = 40
	connLimitWait  = 300 * time.Millisecond
)

// rejectReply is memcached's answer to a connection over -c, before it
// closes it.
var rejectReply = []byte("ERROR Too many open connections\r\n")

// TestConnLimit opens connLimitTries connections to each server started
// with -c connLimit, requires every one to be either usable or refused
// with memcached's exact line and closed, then closes them all and checks
// that new connections are accepted again.
func TestConnLimit(t *testing.T) {
	mc, lc := startPair(t, "-c", connLimit)
	for _, d := range []*daemon{mc, lc} {
		t.Run(d.name, func(t *testing.T) {
			usable, refused := 0, 0
			var conns []*rawConn
			for i := 0; i < connLimitTries; i++ {
				rc, err := dialRawErr(d)
				if err != nil {
					t.Fatalf("connection %d: %v", i, err)
				}
				conns = append(conns, rc)
			}
			// Let the server accept (and refuse) everything first, as a
			// client would see it under a connection storm.
			time.Sleep(connLimitWait)
			for i, rc := range conns {
				// A refusal ends with the close, an answer with the sentinel: the wait is only for a slow server.
				rep := rc.exchange(sentinelCmd, wholeWrite, sentinelReply, defaultReplyTimeout)
				switch {
				case bytes.Equal(rep.data, sentinelReply):
					usable++
				case bytes.Equal(rep.data, rejectReply) && rep.closed:
					refused++
				case bytes.Equal(rep.data, rejectReply):
					t.Errorf("connection %d: refused with the right line but left open", i)
				default:
					t.Errorf("connection %d: got %q (closed %v), want %q or %q then close",
						i, rep.data, rep.closed, sentinelReply, rejectReply)
				}
			}
			t.Logf("%s with -c %s: %d usable, %d refused of %d", d.name, connLimit, usable, refused, connLimitTries)
			if usable == 0 || refused == 0 {
				t.Errorf("want some connections usable and some refused, got %d usable, %d refused", usable, refused)
			}
			for _, rc := range conns {
				rc.c.Close()
			}
			// A server frees a slot when it has seen the close: poll, bounded, with new connections.
			var rep reply
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(connLimitWait) {
				if rep = dialRaw(t, d).exchange(sentinelCmd, wholeWrite, sentinelReply, defaultReplyTimeout); bytes.Equal(rep.data, sentinelReply) {
					break
				}
			}
			if !bytes.Equal(rep.data, sentinelReply) {
				t.Errorf("after closing every connection, a new one gets %q (closed %v): slots were not freed", rep.data, rep.closed)
			}
		})
	}
}
