package load

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// clockTicksPerSecond is Linux's USER_HZ, the unit of utime/stime in /proc/PID/stat. It is 100 on every
// architecture Go supports on Linux (the kernel's HZ can differ, USER_HZ does not), and reading it with
// sysconf would need cgo.
const clockTicksPerSecond = 100

// procCPU returns the user+system CPU time the process has used so far, all threads included.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("server CPU: %w", err)
	}
	return parseProcStatCPU(b)
}

// parseProcStatCPU reads fields 14 (utime) and 15 (stime) of /proc/PID/stat. The command name (field 2)
// is in parentheses and may contain spaces, so fields are counted after the last ')'.
func parseProcStatCPU(b []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("proc stat: no ')' in %q", b)
	}
	fields := bytes.Fields(b[i+1:])
	const utimeField, stimeField = 14 - 3, 15 - 3 // fields[0] is field 3 (state)
	if len(fields) <= stimeField {
		return 0, fmt.Errorf("proc stat: only %d fields", len(fields)+2)
	}
	u, err1 := strconv.ParseUint(string(fields[utimeField]), 10, 64)
	s, err2 := strconv.ParseUint(string(fields[stimeField]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("proc stat: bad utime/stime %q %q", fields[utimeField], fields[stimeField])
	}
	return time.Duration(u+s) * time.Second / clockTicksPerSecond, nil
}

// procRSS returns the resident set size of a process in bytes (VmRSS).
func procRSS(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("server RSS: %w", err)
	}
	return parseVmRSS(b)
}

func parseVmRSS(b []byte) (uint64, error) {
	for _, l := range bytes.Split(b, []byte("\n")) {
		if rest, ok := bytes.CutPrefix(l, []byte("VmRSS:")); ok {
			f := bytes.Fields(rest)
			if len(f) == 2 && string(f[1]) == "kB" {
				kb, err := strconv.ParseUint(string(f[0]), 10, 64)
				if err == nil {
					return kb << 10, nil
				}
			}
			return 0, fmt.Errorf("proc status: bad VmRSS line %q", l)
		}
	}
	return 0, fmt.Errorf("proc status: no VmRSS line")
}

// selfCPU is this process's user+system CPU time so far (the generator's own cost).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuMeter measures the generator's and (optionally) the server's CPU over a run.
type cpuMeter struct {
	pid       int
	wall      time.Time
	self      time.Duration
	server    time.Duration
	serverErr error
}

func startCPUMeter(pid int) *cpuMeter {
	m := &cpuMeter{pid: pid, wall: time.Now(), self: selfCPU()}
	if pid > 0 {
		m.server, m.serverErr = procCPU(pid)
	}
	return m
}

// cpuUse is what a run cost: CPU seconds per wall second ("cores") for generator and server.
type cpuUse struct {
	wall         time.Duration
	genCores     float64
	serverCPU    time.Duration // 0 without a PID
	serverCores  float64
	serverKnown  bool
	serverSample error
}

func (m *cpuMeter) stop() cpuUse {
	u := cpuUse{wall: time.Since(m.wall)}
	u.genCores = (selfCPU() - m.self).Seconds() / u.wall.Seconds()
	if m.pid > 0 && m.serverErr == nil {
		end, err := procCPU(m.pid)
		if err == nil {
			u.serverCPU = end - m.server
			u.serverCores = u.serverCPU.Seconds() / u.wall.Seconds()
			u.serverKnown = true
		}
		u.serverSample = err
	} else {
		u.serverSample = m.serverErr
	}
	return u
}
