package harness

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// memStatus is a process's resident memory split the way /proc/PID/status splits it: a server whose items
// live in a file mapping (leasecached --data-dir) holds them as file pages, memcached -e on tmpfs as shmem
// pages, a server without either as anonymous pages. VmRSS is their sum.
type memStatus struct {
	VmRSS    uint64 `json:"vm_rss"`
	RssAnon  uint64 `json:"rss_anon"`
	RssFile  uint64 `json:"rss_file"`
	RssShmem uint64 `json:"rss_shmem"`
}

// readMemStatus reads the memory lines of /proc/PID/status.
func readMemStatus(pid int) (memStatus, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memStatus{}, fmt.Errorf("memory status: %w", err)
	}
	return parseMemStatus(b)
}

// parseMemStatus reads the VmRSS, RssAnon, RssFile and RssShmem lines ("Name:  123 kB") into bytes; each
// must be present.
func parseMemStatus(b []byte) (memStatus, error) {
	var m memStatus
	fields := map[string]*uint64{"VmRSS": &m.VmRSS, "RssAnon": &m.RssAnon, "RssFile": &m.RssFile, "RssShmem": &m.RssShmem}
	seen := 0
	for _, l := range bytes.Split(b, []byte("\n")) {
		name, rest, ok := bytes.Cut(l, []byte(":"))
		dst := fields[string(name)]
		if !ok || dst == nil {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			return memStatus{}, fmt.Errorf("memory status: bad line %q", l)
		}
		kb, err := strconv.ParseUint(string(f[0]), 10, 64)
		if err != nil {
			return memStatus{}, fmt.Errorf("memory status: bad line %q", l)
		}
		*dst = kb << 10
		seen++
	}
	if seen != len(fields) {
		return memStatus{}, fmt.Errorf("memory status: %d of the lines VmRSS, RssAnon, RssFile, RssShmem", seen)
	}
	return m, nil
}
