package server

import (
	"bytes"
	"time"

	"github.com/leasecached/leasecached/metrics"
	"github.com/leasecached/leasecached/protocol"
	bp "github.com/leasecached/leasecached/protocol/binprot"
)

// --metrics-listen: the Prometheus endpoint reads the server's own stats replies (StatsGroup) and the event
// loops' request timings (runTimed, runBinary). See doc/design/metrics.md.

// metricsGroups are the stats groups StatsGroup answers: the read-only ones.
var metricsGroups = map[string]bool{"": true, "settings": true, "items": true, "slabs": true, "hotkeys": true}

// StatsGroup returns the STAT lines `stats <group>` answers ("" for plain `stats`), without the END, or nil
// for a group the server does not answer or that changes state. It runs the stats command itself, so the
// endpoint and the protocol share one definition of every number.
func (s *Server) StatsGroup(group string) []byte {
	if !metricsGroups[group] {
		return nil
	}
	// A connection of its own, with a loop state whose counts no one reads: it has nothing of its own to add.
	cn := &conn{srv: s, loop: &loopShared{counts: new(statShare)}}
	req := protocol.Request{Cmd: protocol.CmdStats}
	if group != "" {
		req.Args = [][]byte{[]byte(group)}
	}
	cn.statsCmd(&req)
	out, ok := bytes.CutSuffix(cn.out, protocol.ReplyEnd)
	if !ok {
		return nil // ERROR: a group this server does not have
	}
	return out
}

// runTimed executes req with the endpoint on (lat is the loop's timings), timing it if the loop's sampler
// picks it. Its callers (serveOne, serveAhead) test cn.loop.lat themselves, so that with the endpoint off
// the request path pays one predictable branch and no call (a wrapper of both paths does not inline).
// What is timed: from the start of executing the parsed request to its reply appended to the output (not
// parsing, not the write to the socket). A request that stops part-way (outcome suspended: a large
// multi-key fetch, a parked read) is timed by the execution that finishes it.
func (cn *conn) runTimed(req *protocol.Request, lat *metrics.LoopLatency) outcome {
	if !lat.Sample() {
		return cn.execute(req)
	}
	start := time.Now()
	out := cn.execute(req)
	if out != suspended {
		lat.Observe(req.Cmd, time.Since(start))
	}
	return out
}

// startMetrics binds --metrics-listen before anything is served, so that a bind failure is a start-up
// error, and serves it until stopMetrics.
func (s *Server) startMetrics() error {
	if s.cfg.MetricsListen == "" {
		return nil
	}
	ep, err := metrics.Listen(s.cfg.MetricsListen, s, s.latencies)
	if err != nil {
		return err
	}
	s.metrics.Store(ep)
	go ep.Serve()
	return nil
}

// stopMetrics closes the endpoint (Stop, and Run's return); safe to call more than once.
func (s *Server) stopMetrics() {
	if ep := s.metrics.Swap(nil); ep != nil {
		_ = ep.Close()
	}
}

// MetricsAddr is the address the metrics endpoint listens on, "" when off or not started.
func (s *Server) MetricsAddr() string {
	if ep := s.metrics.Load(); ep != nil {
		return ep.Addr().String()
	}
	return ""
}

// binCommands label a binary request's timing with the text command it does (the quiet forms are their
// Base). SASL is not timed: its checks run beside the loop (auth.go).
var binCommands = [256]protocol.Command{
	bp.OpGet: protocol.CmdGet, bp.OpGetK: protocol.CmdGet,
	bp.OpSet: protocol.CmdSet, bp.OpAdd: protocol.CmdAdd, bp.OpReplace: protocol.CmdReplace,
	bp.OpAppend: protocol.CmdAppend, bp.OpPrepend: protocol.CmdPrepend,
	bp.OpDelete: protocol.CmdDelete, bp.OpIncrement: protocol.CmdIncr, bp.OpDecrement: protocol.CmdDecr,
	bp.OpTouch: protocol.CmdTouch, bp.OpGat: protocol.CmdGat, bp.OpGatK: protocol.CmdGat,
	bp.OpFlush: protocol.CmdFlushAll, bp.OpNoop: protocol.CmdMetaNoop, bp.OpVersion: protocol.CmdVersion,
	bp.OpQuit: protocol.CmdQuit, bp.OpStat: protocol.CmdStats,
}

// runBinary executes the binary request cn.bin.req, timed as runTimed times a text request. Off, it costs
// the binary path a call and a nil check.
func (cn *conn) runBinary() binOutcome {
	if lat := cn.loop.lat; lat != nil {
		return cn.runBinaryTimed(lat)
	}
	return cn.execBinary()
}

// runBinaryTimed is runBinary with the endpoint on.
func (cn *conn) runBinaryTimed(lat *metrics.LoopLatency) binOutcome {
	if !lat.Sample() {
		return cn.execBinary()
	}
	cmd := binCommands[cn.bin.req.Opcode.Base()]
	start := time.Now()
	out := cn.execBinary()
	if out != binSuspended && cmd != protocol.CmdNone {
		lat.Observe(cmd, time.Since(start))
	}
	return out
}
