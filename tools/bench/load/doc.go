// Package load is the load generator of leasecached-bench: closed-loop clients (Run), bulk writes read
// back and verified (RunFill) and a cache-aside hit-ratio stream (RunHitRatio). It speaks memcached's text
// protocol over raw TCP (load runs also the binary protocol: Config.Binary, binary.go), so the same workload can be pointed at leasecached, memcached or any other
// memcached-compatible server, and their numbers compared.
//
// The contract of the measurement: every run prints a human table and one JSON line starting with '{'.
// Latency is measured per batch: from the write of a pipeline of requests to the last byte of its last
// reply; with pipeline depth 1 that is per request. The generator reports its own CPU use (getrusage) so
// that a saturated generator is not mistaken for a slow server, and, given the server's PID, the server's
// CPU per request from /proc. Keys are "k" and a decimal number (KeyNumber), and every key's value and
// flags follow from its number: anything read back is checked byte for byte, and the ceiling responder
// (package ceiling) sizes its answers by the key alone.
//
// The connections are spread over a few OS threads, each with its own epoll instance over nonblocking
// sockets (transport.go, package rawio), so that the generator costs about what a C load tool would: one
// write per batch, one read per piece of its replies.
package load
