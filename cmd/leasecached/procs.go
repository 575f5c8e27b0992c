package main

import (
	"os"
	"runtime"
)

// procsFor is the GOMAXPROCS the daemon runs with for the given number of event loops.
//
// Each gnet event loop is a goroutine that spends its idle time blocked in epoll_wait, and Go counts that
// as a syscall holding a P. With no idle P left (GOMAXPROCS == event loops, the default when -t equals the
// CPU count), the runtime's sysmon thread takes the P back from every loop blocked longer than 20 us, hands
// it to another thread, and keeps polling every 20 us to do it again. On the 2-core VM we benchmark on, that
// was about 10% of a core of sysmon alone plus the thread wake-ups of each hand-off, and 20% more server CPU
// per request at pipeline 1 (interleaved runs against memcached, see bench/README.md). One spare P keeps an
// idle P available, so sysmon leaves blocked loops alone and backs off to its slow poll.
//
// An explicit GOMAXPROCS in the environment wins: the operator asked for it.
func procsFor(threads int, envSet bool, current int) int {
	if envSet || threads+1 <= current {
		return current
	}
	return threads + 1
}

// setProcs applies procsFor to this process.
func setProcs(threads int) {
	_, envSet := os.LookupEnv("GOMAXPROCS")
	cur := runtime.GOMAXPROCS(0)
	if n := procsFor(threads, envSet, cur); n != cur {
		runtime.GOMAXPROCS(n)
	}
}
