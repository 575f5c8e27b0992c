package integration

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"
)

// Shape of the memory-pressure test: phases of sets, each phase several
// times the memory limit in total and of a different value size, so that a
// server has to evict, and to move memory between size classes when the
// workload shifts.
const (
	pressureMemoryMB = "16"
	pressureTimeout  = 30 * time.Second
	pressureRecent   = 5 // the last sets of each phase must read back
)

var pressurePhases = []struct{ count, size int }{
	{3000, 16 << 10}, // 48 MB of 16 KiB values
	{20000, 100},     // then small ones
	{300, 200 << 10}, // then large ones
	{6000, 8 << 10},  // then medium again
}

// TestMemoryPressure: where memcached stores an item under a full cache,
// leasecached must too (evicting, never refusing with out of memory), and
// the most recent items of every phase must be readable on both.
func TestMemoryPressure(t *testing.T) {
	mc, lc := startPair(t, "-m", pressureMemoryMB)
	type outcome struct {
		replies map[string]int // reply line -> count, per phase
		recent  []string       // get replies of the last sets
	}
	run := func(d *daemon) ([]outcome, error) {
		rc, err := dialRawErr(d)
		if err != nil {
			return nil, err
		}
		defer rc.c.Close()
		_ = rc.c.SetDeadline(time.Now().Add(pressureTimeout))
		r := bufio.NewReaderSize(rc.c, 1<<20)
		w := bufio.NewWriterSize(rc.c, 1<<20)
		var outs []outcome
		for p, ph := range pressurePhases {
			out := outcome{replies: map[string]int{}}
			// Write and read in windows so neither side's buffers fill.
			const window = 64
			for start := 0; start < ph.count; start += window {
				end := min(start+window, ph.count)
				for i := start; i < end; i++ {
					val := bytes.Repeat([]byte{byte('a' + i%26)}, ph.size)
					fmt.Fprintf(w, "set p%d-%d 0 0 %d\r\n%s\r\n", p, i, ph.size, val)
				}
				if err := w.Flush(); err != nil {
					return nil, fmt.Errorf("phase %d: write: %w", p, err)
				}
				for i := start; i < end; i++ {
					line, err := r.ReadString('\n')
					if err != nil {
						return nil, fmt.Errorf("phase %d set %d: read: %w", p, i, err)
					}
					out.replies[strings.TrimSpace(line)]++
				}
			}
			for i := ph.count - pressureRecent; i < ph.count; i++ {
				fmt.Fprintf(w, "get p%d-%d\r\n", p, i)
				if err := w.Flush(); err != nil {
					return nil, err
				}
				vals, err := readValues(r)
				if err != nil {
					return nil, fmt.Errorf("phase %d get %d: %w", p, i, err)
				}
				v, ok := vals[fmt.Sprintf("p%d-%d", p, i)]
				switch {
				case !ok:
					out.recent = append(out.recent, "miss")
				case len(v.data) != ph.size || v.data[0] != byte('a'+i%26):
					out.recent = append(out.recent, fmt.Sprintf("corrupt(%d bytes)", len(v.data)))
				default:
					out.recent = append(out.recent, "hit")
				}
			}
			outs = append(outs, out)
		}
		return outs, nil
	}
	want, err := run(mc)
	if err != nil {
		t.Fatalf("memcached: %v", err)
	}
	got, err := run(lc)
	if err != nil {
		t.Fatalf("leasecached: %v", err)
	}
	for p := range pressurePhases {
		t.Logf("phase %d: memcached %v recent %v; leasecached %v recent %v", p, want[p].replies, want[p].recent, got[p].replies, got[p].recent)
		if got[p].replies["STORED"] < want[p].replies["STORED"] {
			t.Errorf("phase %d (%d x %d bytes, -m %s): leasecached stored %d, memcached %d; leasecached replies %v",
				p, pressurePhases[p].count, pressurePhases[p].size, pressureMemoryMB, got[p].replies["STORED"], want[p].replies["STORED"], got[p].replies)
		}
		for i, w := range want[p].recent {
			if w == "hit" && got[p].recent[i] != "hit" {
				t.Errorf("phase %d: recent item %d: memcached hit, leasecached %s", p, i, got[p].recent[i])
			}
		}
	}
}
