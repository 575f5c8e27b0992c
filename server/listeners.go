package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/panjf2000/gnet/v2"

	"github.com/leasecached/leasecached/protocol"
	"github.com/leasecached/leasecached/tlsconf"
)

// Which transport serves which listener (doc/design/listeners.md): every listener is gnet's (one event
// engine for all of them; TLS connections do their handshake on a goroutine, looptls.go), except TLS
// listeners where our gnet fork cannot lend a socket to that goroutine (gnet.Lender: not Linux), which are
// the stream transport's (stream.go). Both drive the same engine, conn.serve, and share the store, the
// stats and the -c limit.

// streamTLS serves TLS listeners with the stream transport instead of gnet's loops; tests set it
// (TestStreamTransport).
var streamTLS = runtime.GOOS != "linux"

// Listeners returns the addresses the server accepts connections on: cfg.Listeners, or one plaintext TCP
// listener on Listen:Port when none are given.
func (s *Server) Listeners() []Listener {
	if len(s.cfg.Listeners) > 0 {
		return s.cfg.Listeners
	}
	return []Listener{{Network: "tcp", Addr: net.JoinHostPort(s.cfg.Listen, strconv.Itoa(s.cfg.Port))}}
}

// String names l in logs and errors: tcp://127.0.0.1:11211, tls://..., unix:///run/mc.sock.
func (l Listener) String() string {
	if l.TLS {
		return "tls://" + l.Addr
	}
	return l.Network + "://" + l.Addr
}

// statsName is l as `stats conns` names a listener: tcp:127.0.0.1:11211, unix:/run/mc.sock.
func (l Listener) statsName() string { return l.Network + ":" + l.Addr }

// listenAddr is a connection's local address in `stats conns` form (gnet's connections).
func listenAddr(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.Network() + ":" + a.String()
}

// Run serves until Stop is called or a transport fails. It returns nil after Stop, and an error whenever the
// engine ended without Stop having been called (gnet stops its engine when a loop or the acceptor fails), so
// the daemon never mistakes such an end for a clean stop.
func (s *Server) Run() error {
	if s.authErr != nil {
		return s.authErr
	}
	if err := s.startMetrics(); err != nil {
		return err
	}
	defer s.stopMetrics()
	threads := s.cfg.Threads
	if threads <= 0 {
		threads = 1
	}
	raiseProcs(threads) // before the loops start: each keeps a P while busy (procs.go)
	done := make(chan struct{})
	defer close(done)
	var (
		gnetAddrs  []string
		streamLns  []net.Listener
		streamName []string
	)
	closeStreams := func() {
		for _, ln := range streamLns {
			_ = ln.Close()
		}
	}
	for _, l := range s.Listeners() {
		if l.TLS && s.certs.Load() == nil {
			certs, err := tlsconf.New(s.cfg.TLS)
			if err != nil {
				return err // memcached's words: "Error loading the key: ..."
			}
			s.certs.Store(certs)
			s.tlsBase = certs.Config()
		}
		switch {
		case l.TLS && !streamTLS:
			if err := s.tlsAddrs.add(l.Addr); err != nil {
				closeStreams()
				return fmt.Errorf("listen %s: %w", l, err)
			}
			gnetAddrs = append(gnetAddrs, "tcp://"+l.Addr)
		case l.TLS:
			ln, err := s.listenStream(l)
			if err != nil {
				closeStreams()
				return fmt.Errorf("listen %s: %w", l, err)
			}
			streamLns, streamName = append(streamLns, ln), append(streamName, l.statsName())
		case l.Network == "unix":
			if err := checkUnixPath(l.Addr); err != nil {
				closeStreams()
				return err
			}
			gnetAddrs = append(gnetAddrs, l.String())
		default:
			gnetAddrs = append(gnetAddrs, l.String())
		}
	}
	if !s.streams.start(s, streamLns) {
		closeStreams()
		return nil // Stop came first
	}
	for i, ln := range streamLns {
		s.streams.wg.Add(1)
		go s.serveStream(ln, streamName[i])
	}
	go s.releaseMemory(done)
	if len(gnetAddrs) == 0 {
		s.announce()
		close(s.ready)
		<-s.stopped
		return nil
	}
	s.setUmask(gnetAddrs)
	err := gnet.Rotate(s, gnetAddrs,
		gnet.WithMulticore(true),
		// Each loop keeps its own OS thread, as a memcached worker does. Our gnet's loops never yield
		// between rounds (third_party/gnet/LEASECACHED.md), so the lock costs a thread hand-off only when
		// the runtime preempts a loop; unlocked, each such preemption could move the loop to another
		// thread. At pipeline 1, p99 went from 1.9 ms to 1.5 ms (memcached: 1.5 ms).
		gnet.WithLockOSThread(true),
		gnet.WithNumEventLoop(threads),
		gnet.WithReuseAddr(true),
		gnet.WithTCPNoDelay(gnet.TCPNoDelay),
		gnet.WithLogger(gnetLogger{l: s.logger, lastErr: &s.gnetErr}),
		gnet.WithTicker(s.cfg.IdleTimeout > 0), // OnTick, the idle check (idle.go)
	)
	s.restoreUmask()
	s.handshakes.Wait() // gnet closed their connections: each ends at once
	if !s.stopping.Load() {
		_ = s.streams.stop(context.Background())
	}
	what := strings.Join(gnetAddrs, ", ")
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("serve %s: %w", what, err)
	}
	if !s.stopping.Load() {
		reason := "gnet logged no error"
		if e := s.gnetErr.Load(); e != nil {
			reason = "gnet's last error: " + *e
		}
		return fmt.Errorf("serve %s: the event engine stopped without being asked to (%s)", what, reason)
	}
	return nil
}

// announce logs the listeners once they accept connections (-v).
func (s *Server) announce() {
	if !s.logs(slog.LevelInfo) {
		return
	}
	names := make([]string, 0, len(s.Listeners()))
	for _, l := range s.Listeners() {
		names = append(names, l.String())
	}
	s.logger.Info("listening", "on", strings.Join(names, ", "), "event_loops", s.cfg.Threads)
}

// Stop closes the listeners and every connection of both transports at once, waiting at most until ctx
// ends.
func (s *Server) Stop(ctx context.Context) error {
	s.stopping.Store(true)
	s.stopOnce.Do(func() { close(s.stopped) })
	if s.store != nil {
		s.store.Stopping()
	}
	s.stopMetrics()
	streams := make(chan error, 1)
	go func() { streams <- s.streams.stop(ctx) }()
	var err error
	if eng := s.eng.Load(); eng != nil {
		err = eng.Stop(ctx)
	} else {
		select {
		case <-s.ready: // no gnet listener: Run returns on s.stopped
		default:
			err = errors.New("stop: server not running")
		}
	}
	return errors.Join(err, <-streams)
}

// checkUnixPath refuses a socket path that names anything but a socket: gnet removes what is there before
// it binds (a stale socket of an earlier run, as memcached unlinks one), and must never remove a file.
func checkUnixPath(path string) error {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("unix socket %s: %w", path, err)
	case fi.Mode()&os.ModeSocket == 0:
		return fmt.Errorf("unix socket %s: the path exists and is not a socket", path)
	}
	return nil
}

// setUmask makes the unix sockets gnet is about to create with -a's permissions, as memcached does (it
// sets the umask around bind, so the socket never exists with wider ones); OnBoot restores the umask once
// gnet has made every listener.
func (s *Server) setUmask(addrs []string) {
	for _, a := range addrs {
		if strings.HasPrefix(a, "unix://") {
			old := syscall.Umask(int(^s.unixMask() & 0o777))
			s.umask = sync.OnceFunc(func() { syscall.Umask(old) })
			return
		}
	}
}

// restoreUmask undoes setUmask (once; safe to call when it did nothing).
func (s *Server) restoreUmask() {
	if s.umask != nil {
		s.umask()
	}
}

// refreshCerts reloads the TLS certificates (SIGHUP, refresh_certs). Without TLS there is nothing to
// reload: SIGHUP ignores it, and refresh_certs answers tlsconf.ErrNotEnabled.
func (s *Server) refreshCerts() error {
	if c := s.certs.Load(); c != nil {
		return c.Reload()
	}
	return nil
}

// refreshCerts is the refresh_certs command: memcached's OK, or its error line for what did not load
// (tlsconf), the certificates loaded before staying in use.
func (cn *conn) refreshCerts(req *protocol.Request) {
	err := tlsconf.ErrNotEnabled
	if cn.srv.certs.Load() != nil {
		err = cn.srv.refreshCerts()
	}
	switch {
	case req.Noreply:
	case err == nil:
		cn.out = append(cn.out, protocol.ReplyOK...)
	default:
		cn.out = append(append(cn.out, err.Error()...), "\r\n"...)
	}
}
