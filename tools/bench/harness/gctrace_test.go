package harness

import (
	"math"
	"testing"
)

func TestParseGCTrace(t *testing.T) {
	log := []byte(`leasecached: listening
gc 1 @0.004s 1%: 0.013+0.35+0.002 ms clock, 0.026+0.10/0.31/0.38+0.005 ms cpu, 3->3->0 MB, 4 MB goal, 0 MB stacks, 0 MB globals, 2 P
gc 2 @1.500s 2%: 0.100+2.0+0.400 ms clock, 0.2+1/2/3+0.8 ms cpu, 10->12->5 MB, 11 MB goal, 0 MB stacks, 0 MB globals, 2 P (forced)
gc 3 @bad
scvg: something else
`)
	s := parseGCTrace(log)
	if s.Cycles != 2 || s.UnparsedGCLine != 1 || s.HeapPeakMB != 12 || s.HeapLiveMB != 5 || s.CumulativeCPU != 2 {
		t.Fatalf("summary %+v", s)
	}
	if math.Abs(s.PauseTotalMs-0.515) > 1e-9 || math.Abs(s.PauseMaxMs-0.5) > 1e-9 {
		t.Errorf("pauses total %v max %v, want 0.515 and 0.5", s.PauseTotalMs, s.PauseMaxMs)
	}
	if math.Abs(s.CPUms-(0.821+7.0)) > 1e-9 {
		t.Errorf("GC CPU %v ms, want 7.821", s.CPUms)
	}
	if (gcSummary{}).String() != "no GC cycle" {
		t.Error("empty summary text")
	}
}
