//go:build !race

package integration

// raceEnabled: see race_on_test.go.
const raceEnabled = false
