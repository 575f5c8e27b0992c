// Package integration holds the end-to-end tests of leasecached.
//
// Contract: the tests build ./cmd/leasecached once, start it and a real
// memcached (the oracle, /usr/bin/memcached 1.6.x) on free loopback ports,
// drive both over TCP and require the same bytes back, modulo values that
// legitimately differ between two servers (CAS uniques, the VERSION string,
// STAT values). A missing memcached is a test failure, never a skip: the
// comparison is the point of this package. Every test only touches loopback,
// bounds its loops by count and time, and reaps the processes it starts.
//
// The package has no non-test code; this file exists to carry the package
// comment.
package integration
