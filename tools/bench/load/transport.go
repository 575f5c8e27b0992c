package load

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasecached/leasecached/tools/bench/rawio"
	"golang.org/x/sys/unix"
)

// The load transport drives every connection of a load run from a few OS threads, as a C load tool
// (memtier, mc-crusher) does: the generator shares the machine with the server it measures and must cost
// as little CPU per request as it can. With Go's net package every Read that finds no data is an EAGAIN
// read, a goroutine park, a netpoll, futex wake-ups and a second read, and sysmon wakes every 20 us while
// all Ps sit in system calls. Here each thread owns some connections (nonblocking sockets the Go runtime
// does not know about) and one level-triggered epoll instance: a reply costs one read and a share of an
// epoll_wait, a batch one write. What is left is almost all the kernel's loopback TCP path (the sender of
// a segment also pays for delivering it and for waking the receiver): on the development VM a minimal C
// epoll client costs as much per request.

// Thread and buffer limits of the transport.
const (
	MaxGenThreads = 64
	// epollEvents is how many ready connections one epoll_wait returns at most.
	epollEvents = 256
	// pollSlice bounds one epoll_wait, so that a thread with no replies still notices cancellation and
	// the reply deadline.
	pollSlice = 100 * time.Millisecond
	// rawPollSlice bounds the raw epoll_pwait a thread first waits in (rawio.EpollWait), which keeps the
	// thread's P: sysmon sees no system call to retake a P from, so it backs off to its 10 ms tick instead
	// of waking every 20 us. Only a thread that hears nothing for this long waits in an ordinary epoll_wait.
	rawPollSlice = 2 * time.Millisecond
	// minReadBuf is the smallest read buffer of a connection: it must hold a reply line (maxReplyLine);
	// data blocks stream through it.
	minReadBuf = 4 << 10
)

// DefaultGenThreads is the number of generator threads when -gen-threads is 0 (its default): two at
// pipeline depth 1, one for pipelined batches. Measured on the 2-core development VM (50 connections,
// Zipf, medians of 3 runs of 3 s): at pipeline 1 a single thread is busy most of the time and caps the
// run, while two cost no more CPU per request (memcached 72k ops/s and 10.7 us per request with one
// thread, 111k and 8.9 us with two; leasecached 53k and 13.2 us, 66k and 12.4 us). With 16-request
// batches one thread is the cheaper: a busier thread finds more of a batch's replies in one read, which
// matters most against memcached, which sends every reply in its own segment (one thread 198k ops/s at
// 2.6 us per request, two 144k at 5.4 us; leasecached 1.4 and 1.5 us, the ops/s within the noise). Since
// then leasecached has become cheap enough per request that two threads serve it better; compare runs
// pipelined rows with both (the harness's genChoices).
func DefaultGenThreads(pipeline int) int {
	if pipeline == 1 {
		return 2
	}
	return 1
}

// errStopped ends a thread that saw another thread fail or the run being cancelled.
var errStopped = errors.New("stopped")

// genConn is one connection's closed loop: write a batch, parse the replies as they arrive, and when the
// last one is in, record the batch's latency and write the next. Its buffers are allocated up front.
type genConn struct {
	id    int // connection number, for errors
	fd    int
	slot  int32 // index in its thread's conns (the epoll event's data)
	cfg   *Config
	ks    keySpace
	vs    *valueSource
	rng   *rand.Rand
	dist  keyDist
	idx   []uint64
	isGet []bool
	gets  int // retrieval commands in the current batch

	wbuf    []byte
	woff    int  // bytes of wire() written so far
	wantOut bool // EPOLLOUT is registered: the batch did not fit into the socket at once

	// With TLS (nil without): the connection, and the socket under it, whose out buffer holds the
	// batch's records until they are written (tls.go).
	tls  *tls.Conn
	sock *tlsSocket
	ends []int // with TLS: where each request of the batch ends in wbuf (writeRecords)

	rbuf         []byte
	rstart, rend int // unconsumed bytes (a partial reply line) are rbuf[rstart:rend]
	parser       replyParser

	// With -binary (nil without): the binary protocol's reply parser (binary.go), and the opaque of the
	// connection's next packet.
	bin    *binParser
	opaque uint32

	start    time.Duration // when the current batch's write started (since the thread's clock base)
	busy     bool          // a batch is outstanding
	requests uint64
	getKeys  uint64
}

// requestSizes bounds the size of one request of the configuration and of its reply when every key hits
// with a -value-size value, to size a connection's buffers (replies of any size still stream through).
func requestSizes(cfg *Config) (request, reply int) {
	if cfg.Binary {
		set := binHeaderLen + binSetExtras + cfg.KeySize + cfg.ValueSize
		get := cfg.MultiGet * (binHeaderLen + cfg.KeySize)
		value := binHeaderLen + 4 + cfg.KeySize + cfg.ValueSize
		if cfg.MultiGet > 1 {
			get += binHeaderLen // the NOOP
		}
		return max(set, get), cfg.MultiGet*value + binHeaderLen
	}
	const numLen = 20 // digits of a uint64
	set := len("set ") + cfg.KeySize + 1 + numLen + len(" 0 ") + numLen + 2 + cfg.ValueSize + 2
	get := len(cfg.GetCmd) + cfg.MultiGet*(cfg.KeySize+1) + 2
	value := len("LVALUE ") + cfg.KeySize + 3*(1+numLen) + 2 + cfg.ValueSize + 2
	return max(set, get), cfg.MultiGet*value + len("END\r\n")
}

func newGenConn(cfg *Config, ks keySpace, vs *valueSource, id, fd int) (*genConn, error) {
	r := rand.New(rand.NewPCG(cfg.Seed, uint64(id)))
	dist, err := newKeyDist(cfg.Dist, cfg.ZipfS, cfg.Keys, r)
	if err != nil {
		return nil, err
	}
	req, reply := requestSizes(cfg)
	rsize := min(max(cfg.Pipeline*reply, minReadBuf), readBufSize)
	c := &genConn{id: id, fd: fd, cfg: cfg, ks: ks, vs: vs, rng: r, dist: dist,
		idx: make([]uint64, cfg.MultiGet), isGet: make([]bool, cfg.Pipeline),
		wbuf: make([]byte, 0, cfg.Pipeline*req), rbuf: make([]byte, rsize)}
	if cfg.Binary {
		c.bin = newBinParser(ks, vs, cfg.Pipeline*(cfg.MultiGet+1))
		c.opaque = uint32(id) << 24 // connections' opaques differ: a reply sent to the wrong one shows
	}
	return c, nil
}

// encode draws the next batch and encodes it into wbuf; it allocates nothing.
func (c *genConn) encode() {
	c.wbuf, c.woff, c.gets = c.wbuf[:0], 0, 0
	c.ends = c.ends[:0]
	if c.bin != nil {
		c.encodeBinary()
		return
	}
	for i := range c.isGet {
		get := c.rng.Float64() < c.cfg.GetRatio
		c.isGet[i] = get
		if get {
			for j := range c.idx {
				c.idx[j] = c.dist.next()
			}
			c.wbuf = appendGet(c.wbuf, c.cfg.GetCmd, c.ks, c.idx)
			c.gets++
		} else {
			c.wbuf = appendSet(c.wbuf, c.ks, c.vs, c.dist.next())
		}
		if c.tls != nil {
			c.ends = append(c.ends, len(c.wbuf))
		}
	}
	c.parser.reset(c.isGet)
}

// encodeBinary is encode with the binary protocol: a get is a GET, a multi-get a GETKQ per key closed by
// a NOOP, a set a SET; every packet gets the connection's next opaque, and the parser learns what each
// must be answered with.
func (c *genConn) encodeBinary() {
	c.bin.reset()
	for i := range c.isGet {
		get := c.rng.Float64() < c.cfg.GetRatio
		c.isGet[i] = get
		switch {
		case get && len(c.idx) == 1:
			k := c.dist.next()
			c.wbuf = appendBinGet(c.wbuf, binOpGet, c.ks, k, c.opaque)
			c.bin.expect(binOpGet, c.opaque, k)
			c.opaque++
			c.gets++
		case get:
			for range c.idx {
				k := c.dist.next()
				c.wbuf = appendBinGet(c.wbuf, binOpGetKQ, c.ks, k, c.opaque)
				c.bin.expect(binOpGetKQ, c.opaque, k)
				c.opaque++
			}
			c.wbuf = appendBinNoop(c.wbuf, c.opaque)
			c.bin.expect(binOpNoop, c.opaque, 0)
			c.opaque++
			c.gets++
		default:
			k := c.dist.next()
			c.wbuf = appendBinSet(c.wbuf, c.ks, c.vs, k, c.opaque)
			c.bin.expect(binOpSet, c.opaque, k)
			c.opaque++
		}
		if c.tls != nil {
			c.ends = append(c.ends, len(c.wbuf))
		}
	}
}

// replyDone reports whether the current batch's last reply has been parsed.
func (c *genConn) replyDone() bool {
	if c.bin != nil {
		return c.bin.done()
	}
	return c.parser.done()
}

// wire is what goes onto the socket for the current batch: the requests, or with TLS their records.
func (c *genConn) wire() []byte {
	if c.sock != nil {
		return c.sock.out
	}
	return c.wbuf
}

// receive reads what has arrived and parses it; complete says the batch's last reply is in.
func (c *genConn) receive() (complete bool, err error) {
	if c.tls != nil {
		return c.receiveTLS()
	}
	if c.rend == len(c.rbuf) { // cannot happen: the parser leaves at most a partial line behind
		return false, errReplyLineTooLong
	}
	n, err := rawio.Read(c.fd, c.rbuf[c.rend:])
	switch {
	case err == unix.EAGAIN || err == unix.EINTR:
		return false, nil // level-triggered: epoll reports the connection again
	case err != nil:
		return false, fmt.Errorf("receive: %w", err)
	case n == 0:
		return false, fmt.Errorf("receive: connection closed by the server: %w", io.ErrUnexpectedEOF)
	}
	return c.parse(n)
}

// receiveTLS is receive over TLS. One read of the socket may bring several records, which crypto/tls
// then hands out one at a time without reading the socket again, and epoll would not report them: so it
// reads until the socket has nothing more or the batch is complete.
func (c *genConn) receiveTLS() (complete bool, err error) {
	for {
		if c.rend == len(c.rbuf) {
			return false, errReplyLineTooLong
		}
		n, err := tlsRead(c.tls, c.rbuf[c.rend:])
		switch {
		case err == errWouldBlock:
			return false, nil
		case err == io.EOF:
			return false, fmt.Errorf("receive: connection closed by the server: %w", io.ErrUnexpectedEOF)
		case err != nil:
			return false, fmt.Errorf("receive: %w", err)
		}
		if complete, err = c.parse(n); complete || err != nil {
			return complete, err
		}
	}
}

// parse feeds the n bytes just read into rbuf to the parser; complete says the batch's last reply is in.
func (c *genConn) parse(n int) (complete bool, err error) {
	c.rend += n
	var used int
	if c.bin != nil {
		used, err = c.bin.feed(c.rbuf[c.rstart:c.rend])
	} else {
		used, err = c.parser.feed(c.rbuf[c.rstart:c.rend])
	}
	c.rstart += used
	if err != nil {
		return false, err
	}
	if c.replyDone() {
		if c.rend > c.rstart {
			return false, fmt.Errorf("%d unexpected bytes after the last reply of a batch: %q", c.rend-c.rstart,
				c.rbuf[c.rstart:min(c.rend, c.rstart+64)])
		}
		if c.woff < len(c.wire()) {
			return false, fmt.Errorf("all replies arrived before the batch was sent")
		}
		c.rstart, c.rend = 0, 0
		return true, nil
	}
	// Keep the partial line (at most maxReplyLine bytes) at the front of the buffer.
	c.rend = copy(c.rbuf, c.rbuf[c.rstart:c.rend])
	c.rstart = 0
	return false, nil
}

// genThread is one OS thread of the transport: its connections, its epoll instance, and what they
// measured.
type genThread struct {
	epfd   int
	conns  []*genConn
	events []unix.EpollEvent
	base   time.Time // clock base: time.Since(base) reads only the monotonic clock
	hist   histogram
}

func newGenThread(base time.Time) (*genThread, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create: %w", err)
	}
	return &genThread{epfd: epfd, events: make([]unix.EpollEvent, epollEvents), base: base}, nil
}

// add registers a connection for readability (level-triggered).
func (t *genThread) add(c *genConn) error {
	c.slot = int32(len(t.conns))
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: c.slot}
	if err := unix.EpollCtl(t.epfd, unix.EPOLL_CTL_ADD, c.fd, &ev); err != nil {
		return fmt.Errorf("epoll_ctl: %w", err)
	}
	t.conns = append(t.conns, c)
	return nil
}

func (t *genThread) close() {
	for _, c := range t.conns {
		unix.Close(c.fd)
	}
	unix.Close(t.epfd)
}

// send starts connection c's next batch.
func (t *genThread) send(c *genConn) error {
	c.encode()
	c.busy = true
	c.start = time.Since(t.base)
	if c.tls != nil {
		// Encrypts the batch into c.sock.out; it cannot fail but for a broken connection.
		if err := writeRecords(c.tls, c.wbuf, c.ends); err != nil {
			return fmt.Errorf("send: %w", err)
		}
	}
	return t.flush(c)
}

// flush writes what is left of c's batch; when the socket takes only part of it, it waits for EPOLLOUT.
func (t *genThread) flush(c *genConn) error {
	out := c.wire()
	for c.woff < len(out) {
		n, err := rawio.Write(c.fd, out[c.woff:])
		if err == unix.EAGAIN {
			if !c.wantOut {
				c.wantOut = true
				return t.watch(c, unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLOUT)
			}
			return nil
		}
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("send: %w", err)
		}
		c.woff += n
	}
	if c.sock != nil { // all the records are out: the buffer is free for the next batch's
		c.sock.out, c.woff = c.sock.out[:0], 0
	}
	if c.wantOut {
		c.wantOut = false
		return t.watch(c, unix.EPOLLIN|unix.EPOLLRDHUP)
	}
	return nil
}

func (t *genThread) watch(c *genConn, events uint32) error {
	ev := unix.EpollEvent{Events: events, Fd: c.slot}
	if err := unix.EpollCtl(t.epfd, unix.EPOLL_CTL_MOD, c.fd, &ev); err != nil {
		return fmt.Errorf("epoll_ctl: %w", err)
	}
	return nil
}

// complete accounts for c's finished batch and, before the end of the run, sends the next one.
func (t *genThread) complete(c *genConn, now, end time.Duration, stop *atomic.Bool) error {
	t.hist.record(now - c.start)
	c.requests += uint64(len(c.isGet))
	c.getKeys += uint64(c.gets * len(c.idx))
	c.busy = false
	if now >= end || stop.Load() {
		return nil
	}
	return t.send(c)
}

// run is the thread's event loop; it returns when every connection's last batch is in (the first batch
// not started before end), or with the first error, or errStopped when stop is set. A connection still
// waiting for replies at deadline fails the run.
func (t *genThread) run(end, deadline time.Duration, stop *atomic.Bool) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	busy := 0
	if time.Since(t.base) < end {
		for _, c := range t.conns {
			if err := t.send(c); err != nil {
				return fmt.Errorf("connection %d: %w", c.id, err)
			}
			busy++
		}
	}
	for busy > 0 {
		if stop.Load() {
			return errStopped
		}
		now := time.Since(t.base)
		if now >= deadline {
			for _, c := range t.conns {
				if c.busy {
					return fmt.Errorf("connection %d: no reply %v after the end of the run: %w",
						c.id, (now - end).Round(time.Millisecond), os.ErrDeadlineExceeded)
				}
			}
		}
		wait := min(deadline-now, pollSlice)
		n, err := rawio.EpollWait(t.epfd, t.events, rawio.CeilMsec(min(wait, rawPollSlice)))
		if n == 0 && err == nil && wait > rawPollSlice {
			n, err = unix.EpollWait(t.epfd, t.events, rawio.CeilMsec(wait-rawPollSlice))
		}
		if err == unix.EINTR {
			runtime.Gosched() // a preemption signal ended the wait: let the runtime have its way
			continue
		}
		if err != nil {
			return fmt.Errorf("epoll_wait: %w", err)
		}
		for _, ev := range t.events[:n] {
			c := t.conns[ev.Fd]
			if ev.Events&unix.EPOLLOUT != 0 && c.wantOut {
				if err := t.flush(c); err != nil {
					return fmt.Errorf("connection %d: %w", c.id, err)
				}
			}
			if ev.Events&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) == 0 {
				continue
			}
			if !c.busy {
				// Replies are all in, so anything readable is an error or the server closing.
				_, err := c.receive()
				if err == nil {
					err = errors.New("server sent bytes with no request outstanding")
				}
				return fmt.Errorf("connection %d: %w", c.id, err)
			}
			done, err := c.receive()
			if err != nil {
				return fmt.Errorf("connection %d: %w", c.id, err)
			}
			if done {
				if err := t.complete(c, time.Since(t.base), end, stop); err != nil {
					return fmt.Errorf("connection %d: %w", c.id, err)
				}
				if !c.busy {
					busy--
				}
			}
		}
	}
	return nil
}

// loadTransport is a load run's connections spread over its threads.
type loadTransport struct {
	threads []*genThread
	conns   []*genConn
	base    time.Time
}

// dialLoad opens cfg.Conns connections to cfg.Addr and spreads them round-robin over threads threads. With
// TLS it also does every handshake (startTLS): none falls into the measured window.
func dialLoad(cfg *Config, ks keySpace, vs *valueSource, threads int) (*loadTransport, error) {
	sa, family, err := rawio.ResolveSockaddr(cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", cfg.Addr, err)
	}
	tcfg, err := cfg.TLS.clientConfig(cfg.Addr)
	if err != nil {
		return nil, err
	}
	lt := &loadTransport{base: time.Now()}
	for range min(threads, cfg.Conns) {
		t, err := newGenThread(lt.base)
		if err != nil {
			lt.close()
			return nil, err
		}
		lt.threads = append(lt.threads, t)
	}
	for i := range cfg.Conns {
		fd, err := dialRaw(sa, family, dialTimeout)
		if err != nil {
			lt.close()
			return nil, fmt.Errorf("connect %s: %w", cfg.Addr, err)
		}
		c, err := newGenConn(cfg, ks, vs, i, fd)
		if err == nil && tcfg != nil {
			if c.tls, c.sock, err = startTLS(fd, tcfg, dialTimeout); err == nil {
				// Room for a batch's records: the requests and 22 bytes of record overhead per 16 KB.
				c.sock.out = make([]byte, 0, cap(c.wbuf)+cap(c.wbuf)/(16<<10)*22+64)
				c.ends = make([]int, 0, cfg.Pipeline)
			}
		}
		if err == nil {
			err = lt.threads[i%len(lt.threads)].add(c)
		}
		if err != nil {
			unix.Close(fd)
			lt.close()
			return nil, err
		}
		lt.conns = append(lt.conns, c)
	}
	return lt, nil
}

func (lt *loadTransport) close() {
	for _, t := range lt.threads {
		t.close()
	}
	lt.threads = nil
}

// run runs the closed loop on every thread until end; a reply still missing at deadline fails the run.
func (lt *loadTransport) run(ctx context.Context, end, deadline time.Time) error {
	var stop atomic.Bool
	defer context.AfterFunc(ctx, func() { stop.Store(true) })()
	errs := make([]error, len(lt.threads))
	var wg sync.WaitGroup
	for i, t := range lt.threads {
		wg.Go(func() {
			if errs[i] = t.run(end.Sub(lt.base), deadline.Sub(lt.base), &stop); errs[i] != nil {
				stop.Store(true) // one failure ends the run: the others stop at once
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	var failed []error
	for _, err := range errs {
		if err != nil && err != errStopped {
			failed = append(failed, err)
		}
	}
	return errors.Join(failed...)
}

// dialRaw connects a nonblocking TCP socket with TCP_NODELAY, waiting at most timeout.
func dialRaw(sa unix.Sockaddr, family int, timeout time.Duration) (fd int, err error) {
	fd, err = unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if err != nil {
		return -1, fmt.Errorf("socket: %w", err)
	}
	defer func() {
		if err != nil {
			unix.Close(fd)
		}
	}()
	err = unix.Connect(fd, sa)
	if err == unix.EINPROGRESS {
		deadline := time.Now().Add(timeout)
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		for {
			left := time.Until(deadline)
			if left <= 0 {
				return -1, fmt.Errorf("connect: %w", os.ErrDeadlineExceeded)
			}
			n, perr := unix.Poll(pfd, rawio.CeilMsec(left))
			if perr == unix.EINTR || (perr == nil && n == 0) {
				continue
			}
			if perr != nil {
				return -1, fmt.Errorf("connect: poll: %w", perr)
			}
			break
		}
		soErr, gerr := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
		if gerr != nil {
			return -1, fmt.Errorf("connect: %w", gerr)
		}
		err = nil
		if soErr != 0 {
			err = unix.Errno(soErr)
		}
	}
	if err != nil {
		return -1, fmt.Errorf("connect: %w", err)
	}
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1); err != nil {
		return -1, fmt.Errorf("TCP_NODELAY: %w", err)
	}
	return fd, nil
}
