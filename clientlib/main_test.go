package clientlib_test

import (
	"os"
	"testing"
)

// TestMain doubles as the entry point of the herd test's client processes: the herd test re-executes
// this test binary with herdChildEnv set, and such a child runs its load and exits without running
// any test.
func TestMain(m *testing.M) {
	if os.Getenv(herdChildEnv) != "" {
		os.Exit(runHerdChild())
	}
	code := m.Run()
	cleanupBuild()
	os.Exit(code)
}
