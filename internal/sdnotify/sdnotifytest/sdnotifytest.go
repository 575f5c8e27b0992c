// Package sdnotifytest is a service manager's notify socket for tests: a unix datagram socket, as systemd
// makes one, that records what a daemon tells it (package sdnotify).
package sdnotifytest

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Socket is one notify socket; Name is the $NOTIFY_SOCKET value that reaches it.
type Socket struct {
	Name string
	conn *net.UnixConn
}

// Listen makes a Socket at a path in a short temporary directory (a socket path has at most 107 bytes,
// which a subtest's t.TempDir() can pass), closed and removed when the test ends.
func Listen(t testing.TB) *Socket {
	t.Helper()
	dir, err := os.MkdirTemp("", "sdn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return ListenAt(t, filepath.Join(dir, "notify"))
}

// ListenAt makes a Socket named name: a path, or "@name" for an abstract socket.
func ListenAt(t testing.TB, name string) *Socket {
	t.Helper()
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &Socket{Name: name, conn: c}
}

// Next is the next datagram, or ok false when none comes within wait.
func (s *Socket) Next(wait time.Duration) (msg string, ok bool) {
	if err := s.conn.SetReadDeadline(time.Now().Add(wait)); err != nil {
		return "", false
	}
	buf := make([]byte, 4096)
	n, err := s.conn.Read(buf)
	if err != nil {
		return "", false
	}
	return string(buf[:n]), true
}
