//go:build race

package integration

// raceEnabled: the tests run under -race, so the daemon is built with -race
// too and its data-race reports fail the test that provoked them.
const raceEnabled = true
