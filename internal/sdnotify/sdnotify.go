// Package sdnotify tells the service manager what state the daemon is in: systemd's sd_notify protocol,
// one datagram of NAME=value lines sent to the unix socket $NOTIFY_SOCKET names (an abstract socket when
// the name starts with "@"). Without $NOTIFY_SOCKET (started by hand, in a container) it sends nothing.
// See doc/design/deploy.md for when the daemon sends what.
package sdnotify

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// EnvSocket is the variable systemd names the socket in.
const EnvSocket = "NOTIFY_SOCKET"

// The states the daemon reports (sd_notify(3)).
const (
	// Ready: the listeners accept connections; also the end of a reload.
	Ready = "READY=1"
	// Stopping: the shutdown has begun.
	Stopping = "STOPPING=1"
)

// Reloading is the start of a reload (SIGHUP). systemd 253's Type=notify-reload needs the
// CLOCK_MONOTONIC time with it, to tell this reload's message from an older one's; earlier
// systemds ignore the field.
func Reloading() string {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) // cannot fail for CLOCK_MONOTONIC on Linux
	return "RELOADING=1\nMONOTONIC_USEC=" + strconv.FormatInt(ts.Nano()/1000, 10)
}

// Notifier sends states to one socket. The zero Notifier, and a nil one, send nothing.
type Notifier struct {
	addr *net.UnixAddr
	err  error // why $NOTIFY_SOCKET cannot be used, reported by every Notify
}

// FromEnv is the Notifier for the socket $NOTIFY_SOCKET names, or one that sends nothing when it is unset.
func FromEnv() *Notifier { return New(os.Getenv(EnvSocket)) }

// New is the Notifier for socket, a $NOTIFY_SOCKET value: a path, or "@name" for an abstract socket
// (Go's net package maps the "@" to the leading NUL byte). "" sends nothing. systemd 254's
// "vsock:" sockets (for virtual machines) are not supported: Notify says so.
func New(socket string) *Notifier {
	switch {
	case socket == "":
		return &Notifier{}
	case socket[0] != '/' && socket[0] != '@':
		return &Notifier{err: fmt.Errorf("%s=%q: only unix sockets (a path or @name) are supported", EnvSocket, socket)}
	}
	return &Notifier{addr: &net.UnixAddr{Name: socket, Net: "unixgram"}}
}

// Enabled reports whether Notify sends anything.
func (n *Notifier) Enabled() bool { return n != nil && (n.addr != nil || n.err != nil) }

// Notify sends state, one or more NAME=value lines, in one datagram.
func (n *Notifier) Notify(state string) error {
	if !n.Enabled() {
		return nil
	}
	if n.err != nil {
		return n.err
	}
	c, err := net.DialUnix("unixgram", nil, n.addr)
	if err != nil {
		return fmt.Errorf("notify %s: %w", n.addr.Name, err)
	}
	_, err = c.Write([]byte(state))
	return errors.Join(err, c.Close())
}
