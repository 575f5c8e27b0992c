// Package ceiling is the ceiling responder: it answers the text protocol's get and set without being a
// cache. It keeps nothing, looks nothing up and answers every get with a hit whose value is filler bytes of
// a size that depends only on the key's number (the load tool names its keys, load.KeyNumber; -sizes maps
// number ranges to value sizes). It runs as a C event loop would, a locked OS thread per -t with its own
// level-triggered epoll instance, and raw reads, writes and (for up to ceilingRawWait) waits (package
// rawio). A wait through the Go runtime's system call path would let sysmon hand the loop's P to another
// thread after 20 us and cost thread hand-offs on every wake-up: the responder then cost more per request
// at pipeline 1 than memcached (14-17 against 11-13 us on the development VM), no ceiling at all.
//
// It exists to calibrate the generator. On a machine that the generator shares with the server, a run's
// ops/s is bounded by what the generator and the kernel's loopback path cost, whatever the server does;
// the ceiling's ops/s under the same workload is that bound, measured. A cache server cannot beat it by
// more than noise, so a target above it cannot be met on that machine with this generator.
//
// With -keys, gets are answered from values kept in memory (one slot per key, as large as the data set the
// benchmark fills a server with) instead of filler. Where the data set is larger than the CPU's caches,
// every get then reads its value cold, as a cache's get does, and the bound is that much tighter; it still
// looks nothing up and stores nothing.
package ceiling

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leasecached/leasecached/tools/bench/load"
	"github.com/leasecached/leasecached/tools/bench/rawio"
	"golang.org/x/sys/unix"
)

// Limits of the ceiling responder.
const (
	ceilingEvents = 256
	// ceilingReadBuf is one read's buffer; a connection keeps only a partial line between reads.
	ceilingReadBuf = 64 << 10
	// ceilingMaxLine bounds a request line: a 250-byte key and a few numbers, or a multi-get of many keys.
	ceilingMaxLine = 64 << 10
	// ceilingPoll bounds one blocking epoll_wait, so that a loop notices shutdown.
	ceilingPoll = 100 * time.Millisecond
	// ceilingRawWait bounds a raw epoll_pwait, which keeps the loop's P while it sleeps; an idle loop then
	// blocks in an ordinary one, so an idle responder does not hold its Ps (and a GC does not wait on
	// them) for long.
	ceilingRawWait = 2 * time.Millisecond
	// ceilingMaxValue bounds -sizes: memcached's default item size limit.
	ceilingMaxValue = 1 << 20
	// ceilingMaxMemory bounds the values -keys keeps, over all ranges.
	ceilingMaxMemory = 16 << 30
	// ceilingTouchMax bounds the cache lines touchValuesAhead loads for one read (a pipelined batch of 16
	// ten-key gets of 100-byte values needs about 480), and ceilingTouchBytes how much of each value:
	// leasecached's Prefetch asks for four lines of each item.
	ceilingTouchMax   = 1024
	ceilingTouchBytes = 256
)

// Range gives keys numbered from base (up to the next range's base) values of size bytes.
type Range struct {
	base uint64
	size int
}

// ParseSizes parses "base:size,base:size": a size for each range of key numbers. A range runs up
// to the next larger base; keys below the smallest base, and keys the load tool did not name, get the
// first range's size.
func ParseSizes(s string) ([]Range, error) {
	var rs []Range
	for _, f := range strings.Split(s, ",") {
		b, z, ok := strings.Cut(strings.TrimSpace(f), ":")
		base, err1 := strconv.ParseUint(b, 10, 64)
		size, err2 := strconv.Atoi(z)
		if !ok || err1 != nil || err2 != nil || size < 0 || size > ceilingMaxValue {
			return nil, fmt.Errorf("-sizes %q: want base:size[,base:size...] with sizes from 0 to %d", s,
				ceilingMaxValue)
		}
		rs = append(rs, Range{base: base, size: size})
	}
	slices.SortFunc(rs, func(a, b Range) int { return cmp.Compare(a.base, b.base) })
	for i := 1; i < len(rs); i++ {
		if rs[i].base == rs[i-1].base {
			return nil, fmt.Errorf("-sizes %q: base %d given twice", s, rs[i].base)
		}
	}
	return rs, nil
}

// ceiling is the responder's shared, read-only state.
type ceiling struct {
	ranges []Range
	filler []byte // at least as long as the largest size
	// With -keys, values[i] holds the values of the first keys of ranges[i], one after another, in memory
	// of their own: a get copies its value from there, as a cache must, instead of from the few cached
	// bytes of filler. With values as large as a server's data set, most of those reads miss every cache.
	values [][]byte
}

// newCeiling makes the responder's state; with keys above 0 it maps, advises huge and touches keys values
// of each range (undo with release).
func newCeiling(ranges []Range, keys uint64) (*ceiling, error) {
	longest := 0
	for _, r := range ranges {
		longest = max(longest, r.size)
	}
	c := &ceiling{ranges: ranges, filler: bytes.Repeat([]byte{'x'}, longest)}
	if keys == 0 {
		return c, nil
	}
	// Sizes first, so that too much is refused before anything is mapped.
	sizes := make([]uint64, len(ranges))
	total := uint64(0)
	for i, r := range ranges {
		n := keys
		if i+1 < len(ranges) {
			n = min(n, ranges[i+1].base-r.base)
		}
		if r.size > 0 && n > (ceilingMaxMemory-total)/uint64(r.size) { // by division: n * size can overflow
			return nil, fmt.Errorf("-keys %d: more than %d bytes of values in all", keys, ceilingMaxMemory)
		}
		sizes[i] = n * uint64(r.size)
		total += sizes[i]
	}
	for _, size := range sizes {
		if size == 0 {
			c.values = append(c.values, nil)
			continue
		}
		b, err := unix.Mmap(-1, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
		if err != nil {
			c.release()
			return nil, fmt.Errorf("-keys %d: mapping %d bytes of values: %w", keys, size, err)
		}
		// Huge pages where the kernel gives them: a real server's best case, so the bound stays a bound.
		_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
		b[0] = 'x'
		for done := 1; done < len(b); done *= 2 {
			copy(b[done:], b[:done])
		}
		c.values = append(c.values, b)
	}
	return c, nil
}

// release unmaps the values newCeiling mapped.
func (c *ceiling) release() {
	for _, b := range c.values {
		if b != nil {
			_ = unix.Munmap(b)
		}
	}
	c.values = nil
}

// value is the value the responder returns for key: its own bytes with -keys, when key is one of them.
func (c *ceiling) value(key []byte) []byte {
	i := 0
	v, ok := load.KeyNumber(key)
	if ok {
		for i+1 < len(c.ranges) && v >= c.ranges[i+1].base {
			i++
		}
	}
	r := c.ranges[i]
	if ok && v >= r.base && c.values != nil {
		if slot := v - r.base; slot < uint64(len(c.values[i])/max(r.size, 1)) {
			off := slot * uint64(r.size)
			return c.values[i][off : off+uint64(r.size)]
		}
	}
	return c.filler[:r.size]
}

// touchValuesAhead loads the first lines of every value that the complete get requests in buf (after
// discard bytes of a data block) will copy, before any is copied: the loads do not depend on one another,
// so their cache misses overlap, as leasecached's Store.Prefetch makes them overlap. Without it the
// responder missed once per value in turn, and leasecached beat it on 10-key gets. Filler stays cached:
// only values in memory are touched.
// It returns a byte computed from the loads, for the caller to keep, so that they are not optimised away.
func (c *ceiling) touchValuesAhead(buf []byte, discard int) byte {
	if c.values == nil {
		return 0
	}
	var lines [ceilingTouchMax]*byte
	n := 0
	for i := min(discard, len(buf)); i < len(buf) && n < len(lines); {
		j := bytes.IndexByte(buf[i:], '\n')
		if j < 0 {
			break
		}
		name, rest := load.NextField(bytes.TrimSuffix(buf[i:i+j], []byte{'\r'}))
		i += j + 1
		switch string(name) {
		case "get", "gets":
			for n < len(lines) {
				var key []byte
				if key, rest = load.NextField(rest); len(key) == 0 {
					break
				}
				v := c.value(key)
				if len(v) == 0 || &v[0] == &c.filler[0] {
					continue // filler is cached already
				}
				v = v[:min(len(v), ceilingTouchBytes)]
				for off := 0; off < len(v) && n < len(lines); off += 64 {
					lines[n] = &v[off]
					n++
				}
				if len(v) > 1 && n < len(lines) { // values start anywhere in a line: the stride can miss the last
					lines[n] = &v[len(v)-1]
					n++
				}
			}
		case "set":
			if size, ok := setBlockSize(rest); ok {
				i += size + 2
			}
		}
	}
	var sum byte
	for _, p := range lines[:n] {
		sum += *p
	}
	return sum
}

// setBlockSize is the data block size a set's arguments (key flags exptime bytes) announce, and whether
// they are acceptable.
func setBlockSize(args []byte) (int, bool) {
	var f [4][]byte
	for k := range f {
		f[k], args = load.NextField(args)
	}
	n, ok := load.ParseUint(f[3])
	if len(f[0]) == 0 || !ok || n > ceilingMaxValue {
		return 0, false
	}
	return int(n), true
}

// ceilingConn is one client connection's state: its unparsed input (at most a partial line), the data
// bytes of a set still to discard, and replies not yet written.
type ceilingConn struct {
	in      []byte
	discard int
	out     []byte
	sent    int  // bytes of out already written while blocked: kept, not copied down on every EAGAIN
	blocked bool // out[sent:] waits for EPOLLOUT; the connection is not read meanwhile
	closing bool // "quit" seen: close once out is written
	touched byte // what touchValuesAhead's loads summed to: kept so that they are made
}

// respond consumes every complete request in cn.in (plus data) and appends the replies to cn.out.
func (c *ceiling) respond(cn *ceilingConn, data []byte) error {
	buf := data
	if len(cn.in) > 0 {
		cn.in = append(cn.in, data...)
		buf = cn.in
	}
	cn.touched += c.touchValuesAhead(buf, cn.discard)
	i := 0
	for i < len(buf) && !cn.closing {
		if cn.discard > 0 {
			n := min(cn.discard, len(buf)-i)
			i += n
			if cn.discard -= n; cn.discard == 0 {
				cn.out = append(cn.out, "STORED\r\n"...)
			}
			continue
		}
		j := bytes.IndexByte(buf[i:], '\n')
		if j < 0 {
			if len(buf)-i > ceilingMaxLine {
				return fmt.Errorf("request line longer than %d bytes", ceilingMaxLine)
			}
			break
		}
		line := bytes.TrimSuffix(buf[i:i+j], []byte{'\r'})
		i += j + 1
		c.command(cn, line)
	}
	// Keep the unparsed rest; copy, since data belongs to the caller's read buffer.
	cn.in = append(cn.in[:0], buf[i:]...)
	return nil
}

// command answers one request line.
func (c *ceiling) command(cn *ceilingConn, line []byte) {
	name, rest := load.NextField(line)
	switch string(name) {
	case "get", "gets":
		cas := len(name) == 4
		for {
			var key []byte
			if key, rest = load.NextField(rest); len(key) == 0 {
				break
			}
			v := c.value(key)
			cn.out = append(cn.out, "VALUE "...)
			cn.out = append(cn.out, key...)
			cn.out = append(cn.out, " 0 "...)
			cn.out = strconv.AppendUint(cn.out, uint64(len(v)), 10)
			if cas {
				cn.out = append(cn.out, " 1"...)
			}
			cn.out = append(cn.out, "\r\n"...)
			cn.out = append(cn.out, v...)
			cn.out = append(cn.out, "\r\n"...)
		}
		cn.out = append(cn.out, "END\r\n"...)
	case "set":
		n, ok := setBlockSize(rest)
		if !ok {
			cn.out = append(cn.out, "CLIENT_ERROR bad command line format\r\n"...)
			return
		}
		cn.discard = n + 2
	case "version":
		cn.out = append(cn.out, "VERSION leasecached-bench-ceiling\r\n"...)
	case "stats":
		cn.out = append(cn.out, "END\r\n"...)
	case "quit":
		cn.closing = true
	default:
		cn.out = append(cn.out, "ERROR\r\n"...)
	}
}

// ceilingLoop is one event loop: its epoll instance and connections. The first loop also owns the
// listener and deals the accepted connections out round-robin, as memcached's dispatcher and gnet do: with
// a listener per loop (SO_REUSEPORT) the kernel's hash of 50 connections split them unevenly, and the
// busier loop set the tail (p99 6 ms against 4 ms).
type ceilingLoop struct {
	c      *ceiling
	epfd   int
	conns  map[int32]*ceilingConn // only this loop's thread touches it; filled on a connection's first event
	events []unix.EpollEvent
	rbuf   []byte
	// The first loop only: the listener, every loop, and the loop the next connection goes to.
	lfd   int
	loops []*ceilingLoop
	next  int
}

func newCeilingLoop(c *ceiling) (*ceilingLoop, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll: %w", err)
	}
	return &ceilingLoop{c: c, epfd: epfd, lfd: -1, conns: map[int32]*ceilingConn{},
		events: make([]unix.EpollEvent, ceilingEvents), rbuf: make([]byte, ceilingReadBuf)}, nil
}

// listen makes l the accepting loop for all of loops.
func (l *ceilingLoop) listen(sa unix.Sockaddr, family int, loops []*ceilingLoop) error {
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	l.lfd, l.loops = fd, loops
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return fmt.Errorf("setsockopt: %w", err)
	}
	if err := unix.Bind(fd, sa); err != nil {
		return fmt.Errorf("bind: %w", err)
	}
	if err := unix.Listen(fd, 1024); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	return l.watch(unix.EPOLL_CTL_ADD, fd, unix.EPOLLIN)
}

func (l *ceilingLoop) watch(op, fd int, events uint32) error {
	ev := unix.EpollEvent{Events: events, Fd: int32(fd)}
	if err := unix.EpollCtl(l.epfd, op, fd, &ev); err != nil {
		return fmt.Errorf("epoll_ctl: %w", err)
	}
	return nil
}

// close closes the loop's connections, listener and epoll instance; a connection dealt to a loop that
// never saw an event from it is closed with the whole process (or by the peer).
func (l *ceilingLoop) close() {
	for fd := range l.conns {
		unix.Close(int(fd))
	}
	for _, fd := range []int{l.lfd, l.epfd} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}

// run serves until stop is closed; the first listener or epoll failure ends it.
func (l *ceilingLoop) run(stop <-chan struct{}) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		n, err := rawio.EpollWait(l.epfd, l.events, int(ceilingRawWait/time.Millisecond))
		if n == 0 && err == nil {
			n, err = unix.EpollWait(l.epfd, l.events, int(ceilingPoll/time.Millisecond))
		}
		if err == unix.EINTR {
			runtime.Gosched() // a preemption signal ended the wait: let the runtime have its way
			continue
		}
		if err != nil {
			return fmt.Errorf("epoll_wait: %w", err)
		}
		for _, ev := range l.events[:n] {
			if int(ev.Fd) == l.lfd {
				if err := l.accept(); err != nil {
					return err
				}
				continue
			}
			if err := l.serve(int(ev.Fd), ev.Events); err != nil {
				l.drop(int(ev.Fd))
			}
		}
	}
}

func (l *ceilingLoop) accept() error {
	for {
		fd, _, err := unix.Accept4(l.lfd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		switch {
		case err == unix.EAGAIN:
			return nil
		case err == unix.EINTR || err == unix.ECONNABORTED:
			continue
		case err != nil:
			return fmt.Errorf("accept: %w", err)
		}
		_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1) // as memcached does; best effort
		to := l.loops[l.next%len(l.loops)]
		l.next++
		// epoll_ctl on another loop's instance is safe; that loop makes the connection's state when the
		// first event arrives.
		if err := to.watch(unix.EPOLL_CTL_ADD, fd, unix.EPOLLIN|unix.EPOLLRDHUP); err != nil {
			unix.Close(fd)
			return err
		}
	}
}

func (l *ceilingLoop) drop(fd int) {
	delete(l.conns, int32(fd))
	unix.Close(fd) // closing removes it from the epoll set
}

var errCeilingClosed = errors.New("connection closed")

// serve handles one readiness event: write what is pending, or read, answer and write.
func (l *ceilingLoop) serve(fd int, events uint32) error {
	cn := l.conns[int32(fd)]
	if cn == nil {
		cn = &ceilingConn{}
		l.conns[int32(fd)] = cn
	}
	if !cn.blocked {
		n, err := rawio.Read(fd, l.rbuf)
		switch {
		case err == unix.EAGAIN || err == unix.EINTR:
			return nil
		case err != nil:
			return err
		case n == 0:
			return errCeilingClosed
		}
		if err := l.c.respond(cn, l.rbuf[:n]); err != nil {
			return err
		}
	}
	return l.flush(fd, cn)
}

// flush writes cn.out. What the socket does not take waits for EPOLLOUT, and the connection is not read
// meanwhile, so a client that does not read its replies cannot make the responder buffer without bound.
func (l *ceilingLoop) flush(fd int, cn *ceilingConn) error {
	for cn.sent < len(cn.out) {
		n, err := rawio.Write(fd, cn.out[cn.sent:])
		if err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN {
			if cn.blocked {
				return nil
			}
			cn.blocked = true
			// EPOLLOUT only: a peer that half-closes while its replies back up would otherwise report
			// EPOLLRDHUP on every wait, and the loop would spin until it reads. A closed peer fails the
			// next write instead.
			return l.watch(unix.EPOLL_CTL_MOD, fd, unix.EPOLLOUT)
		}
		if err != nil {
			return err
		}
		cn.sent += n
	}
	cn.out, cn.sent = cn.out[:0], 0
	if cn.closing {
		return errCeilingClosed
	}
	if cn.blocked {
		cn.blocked = false
		return l.watch(unix.EPOLL_CTL_MOD, fd, unix.EPOLLIN|unix.EPOLLRDHUP)
	}
	return nil
}

// Run serves on addr with threads loops until ctx ends; ready (if not nil) is called once the
// listener is bound, with its address (port 0 in addr picks a free port).
func Run(ctx context.Context, addr string, threads int, ranges []Range, keys uint64,
	ready func(bound string)) error {
	sa, family, err := rawio.ResolveSockaddr(addr)
	if err != nil {
		return err
	}
	c, err := newCeiling(ranges, keys)
	if err != nil {
		return fmt.Errorf("ceiling: %w", err)
	}
	defer c.release()
	loops := make([]*ceilingLoop, 0, threads)
	defer func() {
		for _, l := range loops {
			l.close()
		}
	}()
	for range threads {
		l, err := newCeilingLoop(c)
		if err != nil {
			return fmt.Errorf("ceiling on %s: %w", addr, err)
		}
		loops = append(loops, l)
	}
	if err := loops[0].listen(sa, family, loops); err != nil {
		return fmt.Errorf("ceiling on %s: %w", addr, err)
	}
	// Every loop keeps a P while it waits (rawio.EpollWait): leave one for everything else.
	if procs := runtime.GOMAXPROCS(0); procs < threads+1 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(threads + 1))
	}
	if ready != nil {
		bound, err := unix.Getsockname(loops[0].lfd)
		if err != nil {
			return fmt.Errorf("ceiling on %s: %w", addr, err)
		}
		ready(sockaddrString(bound))
	}
	stop := make(chan struct{})
	errs := make(chan error, threads)
	var wg sync.WaitGroup
	for _, l := range loops {
		wg.Go(func() { errs <- l.run(stop) })
	}
	var first error
	select {
	case <-ctx.Done():
	case first = <-errs:
	}
	close(stop)
	wg.Wait()
	return first
}

// sockaddrString formats a bound TCP address as host:port.
func sockaddrString(sa unix.Sockaddr) string {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return net.JoinHostPort(net.IP(a.Addr[:]).String(), strconv.Itoa(a.Port))
	case *unix.SockaddrInet6:
		return net.JoinHostPort(net.IP(a.Addr[:]).String(), strconv.Itoa(a.Port))
	}
	return fmt.Sprint(sa)
}

// maxCeilingLoops bounds -t: a thread each, and a P each while busy.
const maxCeilingLoops = 1024

// Main is the ceiling subcommand: it serves until ctx ends.
func Main(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("ceiling", flag.ContinueOnError)
	port := fs.Int("p", 11211, "TCP port")
	listen := fs.String("l", "127.0.0.1", "address to listen on")
	threads := fs.Int("t", 2, "event loops (OS threads)")
	sizes := fs.String("sizes", "0:100", "value size by key number: base:size[,base:size...]")
	keys := fs.Uint64("keys", 0, "keep the values of this many keys of each range in memory and answer "+
		"gets from there (0: filler bytes; the reads of a cache, without its lookups)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *threads < 1 || *threads > maxCeilingLoops {
		return fmt.Errorf("ceiling: -t %d: must be between 1 and %d", *threads, maxCeilingLoops)
	}
	ranges, err := ParseSizes(*sizes)
	if err != nil {
		return fmt.Errorf("ceiling: %w", err)
	}
	addr := fmt.Sprintf("%s:%d", *listen, *port)
	return Run(ctx, addr, *threads, ranges, *keys, func(bound string) {
		fmt.Fprintf(out, "ceiling responder on %s, %d loops\n", bound, *threads)
	})
}
