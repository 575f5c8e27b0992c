package server

import (
	"github.com/panjf2000/gnet/v2"

	"github.com/leasecached/leasecached/protocol/binprot"
	"github.com/leasecached/leasecached/shard"
)

// OnTrafficBatch serves the connections one poll found readable (gnet.TrafficBatchHandler, a leasecached
// patch of gnet). Before serving any of them it parses the first request of each and hands the keys of
// those that name one key, each alone in its read, to the store's Prefetch together.
//
// Why: at pipeline depth 1 a loop finds about 16 connections ready per poll (0.06 epoll waits per request
// on the benchmark's 90/10 load), each holding one request. Served one by one, every lookup waits for its
// index slot and then its item to come from memory, and those two misses were about a third of the
// server's user time. Prefetched together they overlap.
func (s *Server) OnTrafficBatch(cs []gnet.Conn, actions []gnet.Action) {
	if len(cs) > 1 {
		s.prefetchFirst(cs)
	}
	for i, c := range cs {
		actions[i] = s.OnTraffic(c)
	}
}

// prefetchFirst parses the first request of each connection in cs into its conn, for serve to execute
// without parsing it again. It prefetches the keys of those that name exactly one key and are alone in
// their connection's input, and leaves each of those conns its key's Hashed. A connection whose first
// request is incomplete or refused is left for serve to parse.
func (s *Server) prefetchFirst(cs []gnet.Conn) {
	var (
		keys   [shard.PrefetchMax][]byte
		hs     [shard.PrefetchMax]shard.Hashed
		owners [shard.PrefetchMax]*conn
	)
	n := 0
	for _, c := range cs {
		cn, ok := c.Context().(*conn)
		if !ok || cn.sw.n > 0 || cn.need > 0 || cn.big.active() || cn.parked || !cn.negotiated ||
			cn.watch != nil {
			continue // the input continues a data block, or its protocol is not known yet: serve decides
		}
		buf, _ := c.Peek(-1) // the connection's whole input: gnet batches only connections with none left over
		if cn.bin != nil {   // a binary get alone in its read; serve's binGet takes its Hashed (binary.go)
			if key := binprot.SoleGetKey(buf); key != nil {
				keys[n], owners[n] = key, cn
				if n++; n == len(keys) {
					break
				}
			}
			continue
		}
		m, err := cn.parser.Parse(buf, &cn.req)
		if err != nil || m == 0 {
			continue
		}
		cn.fast.preParsed = m
		if len(cn.req.Keys) != 1 || m < len(buf) {
			continue // serve prefetches a multi-key request's keys, and serveAhead a pipelined read's
		}
		keys[n], owners[n] = cn.req.Keys[0], cn
		if n++; n == len(keys) {
			break
		}
	}
	if n == 0 {
		return
	}
	s.store.Prefetch(keys[:n], hs[:])
	for i, cn := range owners[:n] {
		cn.fast.preHash, cn.fast.preHashed = hs[i], true
	}
}
