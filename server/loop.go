package server

import (
	"sync"

	"github.com/panjf2000/gnet/v2"

	"github.com/leasecached/leasecached/hotkeys"
	"github.com/leasecached/leasecached/metrics"
	"github.com/leasecached/leasecached/watch"
)

// loopShared is the state that every connection of one event loop shares: the batch of a pipelined read
// (ahead) and the buffer replies are built in. A loop serves one connection at a time, and neither
// outlives the serve call that uses it: a serve executes every request it parsed ahead before it returns,
// and hands its replies to gnet, which copies what the socket does not take.
//
// Why shared: per connection they were a 2.7 KiB batch and a reply buffer of 4 KiB or more, which is memory
// an idle connection holds for nothing: 3000 connections that had pipelined grew the daemon by 9.2 KB each,
// and by 2.1 KB now (memcached 1.6, whose read buffers are per worker thread too: 0.6 KB). The hope that one
// copy per loop would also stay in the CPU caches better than 25 copies did (the kernel's socket work between
// two reads of a connection pushes a loop's state out) did not show in interleaved A/Bs at pipeline 16.
type loopShared struct {
	ahead ahead
	// counts is the loop's share of the server's counts: its connections' serve calls add theirs to it.
	counts *statShare
	// out is the reply buffer while no connection borrows it (borrowOut). It keeps its capacity across
	// reads up to keepBufferCap.
	out []byte
	// tlsOut gathers the ciphertext of one TLS write of a connection on this loop (looptls.go); empty
	// between calls.
	tlsOut []byte
	// hot picks the requests hot-key detection counts, into hotKeys: the loop's own tracker for an event
	// loop, one shared by the others (hotkeys.go).
	hot     hotkeys.Sampler
	hotKeys *hotkeys.Tracker
	// lat is the loop's request timings with --metrics-listen, nil without (conn.runTimed).
	lat *metrics.LoopLatency
	// wsink is where the loop's connections format watch lines (watch.go): the loop's own for a gnet
	// loop, the hub's shared one otherwise.
	wsink *watch.Sink
}

// borrowOut hands out the loop's reply buffer for a serve call, if the connection's own (mine) is empty;
// a connection that has unsent replies keeps appending to them.
func (ls *loopShared) borrowOut(mine []byte) []byte {
	if len(mine) > 0 {
		return mine
	}
	b := ls.out
	ls.out = nil
	if b == nil {
		b = make([]byte, 0, initialOutCap)
	}
	return b[:0]
}

// returnOut takes the buffer back after the serve call has flushed it, and returns what the connection keeps
// (nothing). A buffer that grew past keepBufferCap for one large reply is dropped, so an idle server does not
// pin it.
func (ls *loopShared) returnOut(b []byte) []byte {
	if cap(b) <= keepBufferCap && cap(b) > cap(ls.out) {
		ls.out = b[:0]
	}
	return nil
}

// newLoopShared returns a loopShared whose counts the server's stats include. An event loop's (own) has a
// hot-key tracker and a watch sink of its own; the others share one of each (hotkeys.go, watch.go). With
// --metrics-listen it also has request timings the endpoint includes.
func (s *Server) newLoopShared(own bool) *loopShared {
	ls := &loopShared{counts: s.stats.newShare(), wsink: s.watch.Shared()}
	ls.hot, ls.hotKeys = s.hot.newLoop(own)
	if s.latencies != nil {
		ls.lat = s.latencies.New()
	}
	if own {
		ls.wsink = s.watch.NewSink()
	}
	return ls
}

// loops maps each gnet event loop to its loopShared.
type loops struct {
	mu sync.Mutex
	m  map[gnet.EventLoop]*loopShared
}

// loopOf returns el's loopShared, made on first use. It is called once per connection, when it opens.
func (s *Server) loopOf(el gnet.EventLoop) *loopShared {
	l := &s.loops
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = make(map[gnet.EventLoop]*loopShared)
	}
	ls := l.m[el]
	if ls == nil {
		ls = s.newLoopShared(true)
		l.m[el] = ls
	}
	return ls
}
