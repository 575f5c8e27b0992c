package harness

import (
	"strings"
	"testing"

	"github.com/leasecached/leasecached/tools/bench/load"
)

func TestTableAlignsColumns(t *testing.T) {
	var b strings.Builder
	table(&b, []string{"workload", "ops/s"}, [][]string{{"p1 get", "123"}, {"p16 longer name", "4"}})
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("got %d lines:\n%s", len(lines), b.String())
	}
	if strings.Index(lines[2], "p1 get ") != strings.Index(lines[3], "p16 longer name") {
		t.Errorf("first column not left-aligned:\n%s", b.String())
	}
	if len(lines[2]) != len(lines[3]) || !strings.HasSuffix(lines[3], "    4") {
		t.Errorf("numbers not right-aligned:\n%s", b.String())
	}
}

func TestMedianAndRatio(t *testing.T) {
	rs := []*load.Result{{OpsPerSec: 3}, {OpsPerSec: 1}, {OpsPerSec: 2}}
	if m := median(rs, opsOf); m != 2 {
		t.Errorf("median of 3,1,2 = %v", m)
	}
	if m := median(rs[:2], opsOf); m != 2 {
		t.Errorf("median of 3,1 = %v", m)
	}
	if m := median(nil, opsOf); m != 0 {
		t.Errorf("median of nothing = %v", m)
	}
	if ratio(1, 0) != "-" || ratio(3, 2) != "1.50" {
		t.Error("ratio")
	}
	if got := load.FootprintKeys(64, 10, 14, 100); got != 5886742 {
		t.Errorf("load.FootprintKeys(64MB x10) = %d", got)
	}
}

func TestExpandCommand(t *testing.T) {
	got := expandCommand("srv -p {port} -t {threads} -m {mem} -c {conns}", 1234, serverLimits{Threads: 2, MemMB: 64, ConnLimit: 99})
	if got != "srv -p 1234 -t 2 -m 64 -c 99" {
		t.Errorf("expandCommand = %q", got)
	}
}
