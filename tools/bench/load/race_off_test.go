//go:build !race

package load

// raceEnabled: see race_on_test.go.
const raceEnabled = false
