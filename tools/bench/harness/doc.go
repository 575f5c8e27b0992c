// Package harness runs the benchmarks behind make bench (compare) and make bench-storage (storage): it
// starts memcached, leasecached, an optional third server and the ceiling responders on free loopback ports
// (internal/testdaemon), drives them with package load, and prints one table with the ratios to memcached.
//
// The contract of a comparison: every server gets the same -t, -m and -c, the same keys written before the
// runs, and the same workloads. Runs are interleaved (repetition, workload, server), so that the machine's
// drift spreads over all servers alike. Where the generator's thread count is a trade (pipelined rows),
// it is calibrated per server on short runs that are never reported, and the measured runs use one count:
// a table figure is a plain median of repetitions. How to read the numbers on a noisy machine is
// doc/design/measuring.md.
package harness
