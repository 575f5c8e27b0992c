package server

import (
	"crypto/tls"
	"errors"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// TLS on the event loops: a TLS connection of a gnet listener does its handshake on a goroutine of its own,
// then is served on its event loop as a plaintext one is, plus the crypto. See doc/design/listeners.md.
//
// crypto/tls drives a net.Conn; tlsWire is one over the gnet connection. During the handshake its Read
// waits for the bytes OnTraffic hands over and its Write queues with gnet's AsyncWrite. Once the handshake
// is done the connection switches to loop mode, on its loop: Read takes what gnet has read and, when that
// is empty, returns errWouldBlock, a net.Error whose Temporary() is true, which crypto/tls's Read does not
// keep as the connection's error; Write appends to a buffer that loopTLS.Write hands to gnet. OnTraffic
// then decrypts everything gnet read into the plaintext buffer, and serves it with loopTLS as the
// Transport, exactly as a plaintext connection.
//
// Order: the handshake's writes are AsyncWrites (gnet's high-priority queue, FIFO); the switch to loop mode
// is the callback of one more AsyncWrite, queued after the handshake returned, so every handshake byte is
// handed to the socket before any reply.

// tlsOutKeep is how much ciphertext is gathered before it is handed to gnet: a large reply goes out in
// pieces of about this size, so the loop's buffer (loopShared.tlsOut) stays below twice it.
const tlsOutKeep = 64 << 10

// tlsHandshakeInputLimit bounds what a client may send before its handshake is done.
const tlsHandshakeInputLimit = 256 << 10

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
	wire   tlsWire
	remote net.Addr
	local  net.Addr

	mu     sync.Mutex // guards raw and closed during the handshake
	cond   sync.Cond
	raw    []byte // ciphertext OnTraffic handed over during the handshake, not yet read by crypto/tls
	closed bool   // OnClose ran

	// Loop mode: touched only on the connection's event loop.
	onLoop bool
	cn     *conn  // nil until admitted
	plain  []byte // plain[r:w]: decrypted input not yet consumed
	r, w   int
	ls     *loopShared // the loop's: its tlsOut gathers the ciphertext crypto/tls writes during one call
}

// tlsWire is the net.Conn crypto/tls drives (see above).
type tlsWire struct{ lt *loopTLS }

func (w tlsWire) Read(p []byte) (int, error) {
	lt := w.lt
	if lt.onLoop {
		if len(lt.raw) > 0 { // left over from the handshake (only the loop touches raw now)
			n := copy(p, lt.raw)
			lt.raw = lt.raw[n:]
			if len(lt.raw) == 0 {
				lt.raw = nil
			}
			return n, nil
		}
		n, _ := lt.gc.Read(p)
		if n == 0 {
			return 0, errWouldBlock
		}
		return n, nil
	}
	lt.mu.Lock()
	defer lt.mu.Unlock()
	for len(lt.raw) == 0 && !lt.closed {
		lt.cond.Wait()
	}
	if len(lt.raw) == 0 {
		return 0, net.ErrClosed
	}
	n := copy(p, lt.raw)
	lt.raw = lt.raw[n:]
	return n, nil
}

func (w tlsWire) Write(p []byte) (int, error) {
	lt := w.lt
	if lt.onLoop {
		ls := lt.ls
		if len(ls.tlsOut) > 0 && len(ls.tlsOut)+len(p) > tlsOutKeep { // a large reply: hand gnet the records so far
			if err := lt.sendOut(); err != nil {
				return 0, err
			}
		}
		ls.tlsOut = append(ls.tlsOut, p...)
		return len(p), nil
	}
	if err := lt.gc.AsyncWrite(append([]byte(nil), p...), nil); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Close is called by crypto/tls only when a handshake's context ends (handshakeTimeout): it ends the
// handshake's Read and closes the connection.
func (w tlsWire) Close() error {
	lt := w.lt
	lt.mu.Lock()
	lt.closed = true
	lt.cond.Broadcast()
	lt.mu.Unlock()
	return lt.gc.Close()
}

func (w tlsWire) LocalAddr() net.Addr              { return w.lt.local }
func (w tlsWire) RemoteAddr() net.Addr             { return w.lt.remote }
func (w tlsWire) SetDeadline(time.Time) error      { return nil }
func (w tlsWire) SetReadDeadline(time.Time) error  { return nil }
func (w tlsWire) SetWriteDeadline(time.Time) error { return nil }

// The Transport, over the plaintext buffer.

func (lt *loopTLS) Peek(int) ([]byte, error) { return lt.plain[lt.r:lt.w], nil }
func (lt *loopTLS) InboundBuffered() int     { return lt.w - lt.r }
func (lt *loopTLS) OutboundBuffered() int    { return lt.gc.OutboundBuffered() }

func (lt *loopTLS) Discard(n int) (int, error) {
	n = min(n, lt.w-lt.r)
	lt.r += n
	if lt.r == lt.w {
		lt.r, lt.w = 0, 0
	}
	return n, nil
}

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
		if lt.r > 0 && lt.r == lt.w {
			lt.r, lt.w = 0, 0
		}
		if len(lt.plain)-lt.w < streamReadMin {
			if lt.r > 0 {
				lt.w = copy(lt.plain, lt.plain[lt.r:lt.w])
				lt.r = 0
			}
			if len(lt.plain)-lt.w < streamReadMin {
				grown := make([]byte, max(2*len(lt.plain), lt.w+streamReadMin))
				copy(grown, lt.plain[:lt.w])
				lt.plain = grown
			}
		}
		n, err := lt.tc.Read(lt.plain[lt.w:])
		lt.w += n
		if err != nil {
			if errors.Is(err, errWouldBlock) {
				return nil
			}
			return err
		}
	}
}

// shrink gives back a plaintext buffer a large request grew, once nothing is left in it.
func (lt *loopTLS) shrink() {
	if lt.w == 0 && len(lt.plain) > keepBufferCap/4 {
		lt.plain = make([]byte, streamReadMin)
	}
}

// openTLS starts the handshake of a connection of a TLS listener (OnOpen). The -c slot is taken after
// it, as the stream transport does.
func (s *Server) openTLS(c gnet.Conn) {
	lt := &loopTLS{s: s, gc: c, remote: c.RemoteAddr(), local: c.LocalAddr()}
	lt.cond.L = &lt.mu
	lt.wire = tlsWire{lt}
	lt.tc = tls.Server(lt.wire, s.tlsBase)
	c.SetContext(lt)
	s.handshakes.Add(1)
	go s.handshakeTLS(lt)
}

// handshakeTLS runs on a goroutine of its own: the handshake, then the switch to loop mode on the loop.
func (s *Server) handshakeTLS(lt *loopTLS) {
	defer s.handshakes.Done()
	if !s.handshake(lt.tc) {
		_ = lt.gc.Close()
		return
	}
	// Queued after every handshake write: runs on the loop once gnet has written (or buffered) them.
	err := lt.gc.AsyncWrite(nil, func(gnet.Conn, error) error {
		s.startLoopTLS(lt)
		return nil
	})
	if err != nil {
		_ = lt.gc.Close()
	}
}

// startLoopTLS switches lt to loop mode and admits it, on its loop.
func (s *Server) startLoopTLS(lt *loopTLS) {
	lt.mu.Lock()
	closed := lt.closed
	lt.onLoop, lt.ls = true, s.loopOf(lt.gc.EventLoop())
	lt.mu.Unlock()
	if closed {
		return
	}
	c := lt.gc
	if !s.admit() {
		_, _ = lt.tc.Write(tooManyConns)
		lt.closeNotify()
		_ = c.Close()
		return
	}
	lt.plain = make([]byte, streamReadMin)
	lt.cn = newConn(s, lt.ls)
	s.openConn(lt.cn, c, c.Fd(), addrString(lt.remote), listenAddr(lt.local))
	_ = c.Wake(nil) // serve what arrived during the switch
}

// trafficTLS is OnTraffic for a TLS connection.
func (s *Server) trafficTLS(c gnet.Conn, lt *loopTLS) gnet.Action {
	if !lt.onLoop { // handshake: hand the bytes to its goroutine
		buf, _ := c.Next(-1)
		lt.mu.Lock()
		lt.raw = append(lt.raw, buf...)
		over := len(lt.raw) > tlsHandshakeInputLimit
		lt.cond.Broadcast()
		lt.mu.Unlock()
		if over {
			return gnet.Close
		}
		return gnet.None
	}
	cn := lt.cn
	if cn == nil {
		return gnet.Close
	}
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
	switch action {
	case PauseRead:
		if p, ok := c.(gnet.ReadPauser); ok {
			_ = p.PauseRead()
		}
	case ServeAgain:
		_ = c.Wake(nil)
	}
	return gnet.None
}

// closeTLS is OnClose for a TLS connection.
func (s *Server) closeTLS(lt *loopTLS, err error) {
	lt.mu.Lock()
	lt.closed = true
	lt.cond.Broadcast()
	lt.mu.Unlock()
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
