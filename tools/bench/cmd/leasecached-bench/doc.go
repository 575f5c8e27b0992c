// Command leasecached-bench is the project's load generator and benchmark harness. It speaks memcached's
// text protocol over raw TCP (or TLS, or the binary protocol with -binary), so the same workload can be pointed at leasecached, memcached or any other
// memcached-compatible server, and its numbers compared.
//
// Subcommands:
//
//	load      closed-loop clients: ops/s, latency percentiles, the generator's own CPU and, given the
//	          server PID, the server's CPU microseconds per op. The connections are spread over
//	          -gen-threads OS threads (by default 2 at pipeline 1, else 1), each with its own epoll
//	          instance, so that the generator costs about what a C load tool would: one write per
//	          batch, one read per piece of its replies.
//	fill      write N items as fast as possible (pipelined sets), then read back a sample and verify it
//	          byte for byte; with the server PID, RSS growth and bytes per item.
//	hitratio  replay a seeded Zipf cache-aside stream (get; on a miss, set) and report the hit ratio.
//	compare   start memcached, leasecached (and optionally a third server) and run the same workload
//	          matrix against each, printing one table of medians (make bench).
//	storage   memory figures side by side: bytes per item, RSS at the limit, hit ratio, GC (make
//	          bench-storage).
//	ceiling   a responder that answers get and set without being a cache (filler values, nothing
//	          stored): what the generator and the loopback path allow on this machine, whatever the
//	          server. compare runs it beside the servers.
//
// The contract of the measurement: every run prints a human table and one JSON line starting with '{'.
// Latency is measured per batch: from the write of a pipeline of requests to the last byte of its last
// reply; with pipeline depth 1 that is per request. The generator reports its own CPU use (getrusage) so
// that a saturated generator is not mistaken for a slow server.
//
// The code: package load is the generator (load, fill, hitratio), package ceiling the responder, package
// harness the comparisons (compare, storage) and the servers they start; package rawio holds the raw
// system calls the generator and the responder share. The tool is a Go module of its own (tools/bench),
// beside the daemon's: `make bench` builds it into bin/leasecached-bench.
package main
