package harness

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
)

// busyThreshold is the 1-minute load average above which the harness warns that other processes compete
// with the servers and the generator for the CPUs (the harness itself adds load while it runs).
const busyThreshold = 1.0

// loadAverage reads the 1-minute load average, -1 when unknown.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := bytes.Fields(b)
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(string(f[0]), 64)
	if err != nil {
		return -1
	}
	return v
}

// machineNote describes the machine's load before a benchmark, so a reader can discount noisy numbers.
func machineNote() string {
	la := loadAverage()
	if la < 0 {
		return ""
	}
	note := fmt.Sprintf("1-minute load average before the run: %.2f on %d CPUs", la, runtime.NumCPU())
	if la > busyThreshold {
		note += " (other processes compete for the CPUs: expect noisy numbers)"
	}
	return note
}
