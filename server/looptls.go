package server

import (
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"
)

// TLS on the event loops: a TLS connection of a gnet listener does its handshake on a goroutine of its own,
// then is served on its event loop as a plaintext one is, plus the crypto. See doc/design/listeners.md.
//
// crypto/tls drives a net.Conn; tlsWire is the one it is given, in two modes. During the handshake the
// loop lends the socket to the handshake's goroutine (gnet.Lender, a patch of our fork): the wire reads
// and writes a duplicate of the descriptor (hs) with Go's own blocking I/O and deadlines, and the loop
// reads nothing, so whatever the client sends after its handshake, an end of input included, waits in
// the kernel. Once the handshake is done the goroutine closes its duplicate and wakes the connection; the
// loop takes the socket back and switches the wire to loop mode: Read takes what gnet has read and, when
// that is empty, returns errWouldBlock, a net.Error whose Temporary() is true, which crypto/tls's Read
// does not keep as the connection's error; Write appends to a buffer that loopTLS.Write hands to gnet.
// OnTraffic then decrypts everything gnet read into the plaintext buffer, and serves it with loopTLS as
// the Transport, exactly as a plaintext connection.

// tlsOutKeep is how much ciphertext is gathered before it is handed to gnet: a large reply goes out in
// pieces of about this size, so the loop's buffer (loopShared.tlsOut) stays below twice it.
const tlsOutKeep = 64 << 10

// errWouldBlock is what tlsWire's Read returns in loop mode when gnet holds no more input.
var errWouldBlock net.Error = wouldBlock{}

type wouldBlock struct{}

func (wouldBlock) Error() string   { return "tls wire: no more input" }
func (wouldBlock) Timeout() bool   { return false }
func (wouldBlock) Temporary() bool { return true }

// loopTLS is a TLS connection of a gnet listener: gnet.Conn's context, and its engine's Transport once
// the handshake is done.
type loopTLS struct {
	s      *Server
	gc     gnet.Conn
	tc     *tls.Conn
	remote net.Addr
	local  net.Addr

	// hs is the handshake's connection, over a duplicate of gc's descriptor: closed when the handshake
	// ends or the connection closes (Close is safe from both), then dropped.
	hs net.Conn
	mu sync.Mutex // guards hs, done and closed
	// done: the handshake succeeded and its goroutine no longer touches the wire; the loop takes the
	// socket back at its next OnTraffic.
	done   bool
	closed bool // OnClose ran

	// Loop mode: touched only on the connection's event loop.
	onLoop bool
	cn     *conn       // nil until admitted
	inbuf              // decrypted input not yet consumed
	ls     *loopShared // the loop's: its tlsOut gathers the ciphertext crypto/tls writes during one call
}

// tlsWire is the net.Conn crypto/tls drives (see above). In handshake mode every method is the
// handshake connection's; only the handshake's goroutine (and crypto/tls's, which closes it when the
// handshake's time is up) call it then.
type tlsWire struct{ lt *loopTLS }

func (w tlsWire) Read(p []byte) (int, error) {
	lt := w.lt
	if !lt.onLoop {
		return lt.hs.Read(p)
	}
	n, _ := lt.gc.Read(p)
	if n == 0 {
		return 0, errWouldBlock
	}
	return n, nil
}

func (w tlsWire) Write(p []byte) (int, error) {
	lt := w.lt
	if !lt.onLoop {
		return lt.hs.Write(p)
	}
	ls := lt.ls
	if len(ls.tlsOut) > 0 && len(ls.tlsOut)+len(p) > tlsOutKeep { // a large reply: hand gnet the records so far
		if err := lt.sendOut(); err != nil {
			return 0, err
		}
	}
	ls.tlsOut = append(ls.tlsOut, p...)
	return len(p), nil
}

// Close is called by crypto/tls only when a handshake's time is up: it ends the handshake.
func (w tlsWire) Close() error {
	if w.lt.onLoop {
		return nil
	}
	return w.lt.hs.Close()
}

func (w tlsWire) LocalAddr() net.Addr  { return w.lt.local }
func (w tlsWire) RemoteAddr() net.Addr { return w.lt.remote }

func (w tlsWire) SetDeadline(t time.Time) error {
	if w.lt.onLoop {
		return nil
	}
	return w.lt.hs.SetDeadline(t)
}

func (w tlsWire) SetReadDeadline(t time.Time) error {
	if w.lt.onLoop {
		return nil
	}
	return w.lt.hs.SetReadDeadline(t)
}

func (w tlsWire) SetWriteDeadline(t time.Time) error {
	if w.lt.onLoop {
		return nil
	}
	return w.lt.hs.SetWriteDeadline(t)
}

// The Transport, over the plaintext buffer.

func (lt *loopTLS) OutboundBuffered() int { return lt.gc.OutboundBuffered() }

// Write encrypts p and hands the records to gnet, which sends what the socket takes and keeps the rest.
func (lt *loopTLS) Write(p []byte) (int, error) {
	if lt.cn != nil && lt.cn.closed {
		return 0, net.ErrClosed
	}
	n, err := lt.tc.Write(p)
	if werr := lt.sendOut(); err == nil {
		err = werr
	}
	return n, err
}

// Wake has the connection served again (wakerOf: -Y's checks).
func (lt *loopTLS) Wake(cb gnet.AsyncCallback) error { return lt.gc.Wake(cb) }

// sendOut hands what crypto/tls wrote to gnet, which copies what the socket does not take: the loop's
// buffer is empty again before any other connection of the loop is served.
func (lt *loopTLS) sendOut() error {
	ls := lt.ls
	if len(ls.tlsOut) == 0 {
		return nil
	}
	_, err := lt.gc.Write(ls.tlsOut)
	if cap(ls.tlsOut) > 2*tlsOutKeep {
		ls.tlsOut = nil
	} else {
		ls.tlsOut = ls.tlsOut[:0]
	}
	return err
}

// closeNotify sends a close_notify alert ahead of a close the server decided (quit, an error, the idle
// timeout, -c): OpenSSL 3 clients call a close without one an error, and the stream transport sends one
// (tls.Conn.Close).
func (lt *loopTLS) closeNotify() {
	if lt.onLoop {
		_ = lt.tc.CloseWrite()
		_ = lt.sendOut()
	}
}

// decrypt reads every whole record gnet has into the plaintext buffer. It returns nil once crypto/tls
// needs more bytes, or the error that ends the connection (a close_notify: io.EOF).
func (lt *loopTLS) decrypt() error {
	for {
		n, err := lt.tc.Read(lt.room())
		lt.w += n
		if err != nil {
			if errors.Is(err, errWouldBlock) {
				return nil
			}
			return err
		}
	}
}

// openTLS starts the handshake of a connection of a TLS listener (OnOpen): the loop lends the socket to
// the handshake's goroutine. The -c slot is taken after the handshake, as the stream transport does.
func (s *Server) openTLS(c gnet.Conn) gnet.Action {
	fd, err := unix.FcntlInt(uintptr(c.Fd()), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		s.logConn(slog.LevelWarn, "TLS handshake not started", c.Fd(), addrString(c.RemoteAddr()), slog.Any("err", err))
		return gnet.Close
	}
	if err := c.(gnet.Lender).Lend(); err != nil {
		_ = unix.Close(fd)
		s.logConn(slog.LevelWarn, "TLS handshake not started", c.Fd(), addrString(c.RemoteAddr()), slog.Any("err", err))
		return gnet.Close
	}
	lt := &loopTLS{s: s, gc: c, remote: c.RemoteAddr(), local: c.LocalAddr()}
	lt.tc = tls.Server(tlsWire{lt}, s.tlsBase)
	c.SetContext(lt)
	s.handshakes.Add(1)
	go s.handshakeTLS(lt, fd, c.Fd())
	return gnet.None
}

// handshakeTLS runs on a goroutine of its own: the handshake over fd, a duplicate of the connection's
// descriptor, then the wake-up that has the loop take the socket back.
func (s *Server) handshakeTLS(lt *loopTLS, fd, connFd int) {
	defer s.handshakes.Done()
	f := os.NewFile(uintptr(fd), "tls handshake")
	hs, err := net.FileConn(f) // a descriptor of its own, watched by Go's poller
	_ = f.Close()
	if err != nil {
		s.logConn(slog.LevelWarn, "TLS handshake not started", connFd, addrString(lt.remote), slog.Any("err", err))
		_ = lt.gc.Close()
		return
	}
	lt.mu.Lock()
	lt.hs = hs
	closed := lt.closed
	lt.mu.Unlock()
	ok := !closed && s.handshake(lt.tc, connFd) // OnClose closes hs from here on, ending a handshake in progress
	_ = hs.Close()
	lt.mu.Lock()
	lt.done, lt.hs = ok, nil
	closed = lt.closed
	lt.mu.Unlock()
	switch {
	case closed:
	case !ok:
		_ = lt.gc.Close()
	default:
		if err := lt.gc.Wake(nil); err != nil { // the engine is stopping
			_ = lt.gc.Close()
		}
	}
}

// startLoopTLS takes the socket back from the handshake and admits the connection, on its loop. It
// reports false when the connection is to be closed.
func (s *Server) startLoopTLS(lt *loopTLS) bool {
	c := lt.gc
	if err := c.(gnet.Lender).TakeBack(); err != nil {
		return false
	}
	lt.onLoop, lt.ls = true, s.loopOf(c.EventLoop())
	if !s.admit() {
		_, _ = lt.tc.Write(tooManyConns)
		lt.closeNotify()
		return false
	}
	lt.buf = make([]byte, streamReadMin)
	lt.cn = newConn(s, lt.ls)
	s.openConn(lt.cn, c, c.Fd(), addrString(lt.remote), listenAddr(lt.local))
	return true
}

// trafficTLS is OnTraffic for a TLS connection.
func (s *Server) trafficTLS(c gnet.Conn, lt *loopTLS) gnet.Action {
	if !lt.onLoop {
		lt.mu.Lock()
		done := lt.done
		lt.mu.Unlock()
		if !done {
			return gnet.None // the socket is lent: nothing was read
		}
		if !s.startLoopTLS(lt) {
			return gnet.Close
		}
	}
	cn := lt.cn
	rerr := lt.decrypt()
	if err := lt.sendOut(); err != nil || cn.closed { // what crypto/tls answered itself (KeyUpdate, alerts)
		return gnet.Close
	}
	action := cn.serve(lt)
	lt.shrink()
	if rerr != nil || action == Close { // a close_notify or an error: served what came before it
		if !cn.closed {
			lt.closeNotify()
		}
		return gnet.Close
	}
	return afterServe(c, action)
}

// closeTLS is OnClose for a TLS connection: it ends a handshake in progress.
func (s *Server) closeTLS(lt *loopTLS, err error) {
	lt.mu.Lock()
	lt.closed = true
	hs := lt.hs
	lt.mu.Unlock()
	if !lt.onLoop && hs != nil {
		_ = hs.Close()
	}
	if lt.cn != nil {
		s.closeConn(lt.cn, err)
	}
}

// tlsAddrs says which local addresses of gnet's connections are TLS listeners'.
type tlsAddrs struct {
	exact    map[string]bool // ip (16-byte form) + port
	wildcard map[int]bool    // ports of TLS listeners on every interface
}

func tlsAddrKey(ip net.IP, port int) string { return string(ip.To16()) + strconv.Itoa(port) }

// add records a TLS listener's address.
func (ta *tlsAddrs) add(addr string) error {
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	port, err := strconv.Atoi(ps)
	if err != nil {
		return err
	}
	if ta.exact == nil {
		ta.exact, ta.wildcard = make(map[string]bool), make(map[int]bool)
	}
	ips := []net.IP{net.ParseIP(host)}
	switch {
	case host == "":
		ta.wildcard[port] = true
		return nil
	case ips[0] != nil:
		if ips[0].IsUnspecified() {
			ta.wildcard[port] = true
			return nil
		}
	default:
		if ips, err = net.LookupIP(host); err != nil {
			return err
		}
	}
	for _, ip := range ips {
		ta.exact[tlsAddrKey(ip, port)] = true
	}
	return nil
}

// is reports whether a connection whose local address is a came from a TLS listener.
func (ta *tlsAddrs) is(a net.Addr) bool {
	if ta.exact == nil {
		return false
	}
	t, ok := a.(*net.TCPAddr)
	if !ok {
		return false
	}
	return ta.wildcard[t.Port] || ta.exact[tlsAddrKey(t.IP, t.Port)]
}
