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
// Knobs (environment variables):
//
//	LEASECACHED_INTEGRATION_SELFTEST=1  start a second memcached in place of
//	                                    leasecached: every test must pass, which
//	                                    validates the harness and the scripts.
//	LEASECACHED_INTEGRATION_DUMP=1      log memcached's replies for each case.
//	LEASECACHED_RESTART_SEED=N          replay a randomised warm-restart test (kill moments,
//	                                    corruption offsets; restart_*_test.go logs its seed).
//
// Under -race the daemon is built with -race as well, and a data race it
// reports fails the test during which it happened.
//
// The package has no non-test code; this file exists to carry the package
// comment.
package integration
