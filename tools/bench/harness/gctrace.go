package harness

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"strconv"
)

// gcLine matches one GODEBUG=gctrace=1 line of the Go runtime:
//
//	gc 7 @1.234s 3%: 0.02+1.5+0.01 ms clock, 0.08+0.3/1.2/0.5+0.04 ms cpu, 10->11->5 MB, 12 MB goal, ...
//
// The first and last terms of the clock triple are the two stop-the-world phases; the cpu terms add up
// to the CPU the collector used; N% is GC CPU since the process started.
var gcLine = regexp.MustCompile(`^gc (\d+) @([\d.]+)s (\d+)%: ([\d.]+)\+([\d.]+)\+([\d.]+) ms clock, ` +
	`([\d.]+)\+([\d.]+)/([\d.]+)/([\d.]+)\+([\d.]+) ms cpu, (\d+)->(\d+)->(\d+) MB`)

// gcSummary sums the collections of one phase.
type gcSummary struct {
	Cycles         int     `json:"cycles"`
	PauseTotalMs   float64 `json:"stw_pause_total_ms"`
	PauseMaxMs     float64 `json:"stw_pause_max_ms"`
	CPUms          float64 `json:"gc_cpu_ms"`
	HeapPeakMB     int     `json:"heap_peak_mb"`
	HeapLiveMB     int     `json:"heap_live_mb"` // after the last cycle
	CumulativeCPU  int     `json:"gc_cpu_percent_since_start"`
	UnparsedGCLine int     `json:"unparsed_gc_lines"`
}

func parseGCTrace(b []byte) gcSummary {
	var s gcSummary
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		l := sc.Bytes()
		if !bytes.HasPrefix(l, []byte("gc ")) {
			continue
		}
		m := gcLine.FindSubmatch(l)
		if m == nil {
			s.UnparsedGCLine++
			continue
		}
		f := func(i int) float64 { v, _ := strconv.ParseFloat(string(m[i]), 64); return v }
		n := func(i int) int { v, _ := strconv.Atoi(string(m[i])); return v }
		s.Cycles++
		pause := f(4) + f(6)
		s.PauseTotalMs += pause
		s.PauseMaxMs = max(s.PauseMaxMs, pause)
		s.CPUms += f(7) + f(8) + f(9) + f(10) + f(11)
		s.HeapPeakMB = max(s.HeapPeakMB, n(12), n(13))
		s.HeapLiveMB = n(14)
		s.CumulativeCPU = n(3)
	}
	return s
}

func (s gcSummary) String() string {
	if s.Cycles == 0 {
		return "no GC cycle"
	}
	return fmt.Sprintf("%d cycles, STW pauses %.2f ms total (max %.3f ms), GC CPU %.0f ms, heap peak %d MB, live %d MB",
		s.Cycles, s.PauseTotalMs, s.PauseMaxMs, s.CPUms, s.HeapPeakMB, s.HeapLiveMB)
}
