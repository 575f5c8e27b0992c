package main

import (
	"fmt"
	"log/slog"
	"syscall"
)

// Descriptors beyond -c that the daemon needs: each event loop's epoll and eventfd descriptors, the
// acceptor's and the Go runtime's pair, the listener, the acceptor's reserve descriptor (used to refuse a
// connection when descriptors run out), the one connection over -c that is accepted only to be refused,
// stdin/out/err, the --cpuprofile and --trace files, and what the runtime and `stats` open for a moment
// (cgroup and /proc files). An idle daemon at -t 2 has 16 open; memcached 1.6.18 reports 20 as
// reserved_fds.
const (
	fdReserveFixed   = 24
	fdReservePerLoop = 2
)

// fdsNeeded is how many descriptors -c conns with threads event loops need.
func fdsNeeded(conns, threads int) uint64 {
	return uint64(conns) + fdReserveFixed + fdReservePerLoop*uint64(threads)
}

// rlimitOps reads and sets RLIMIT_NOFILE; tests replace them.
type rlimitOps struct {
	get func() (soft, hard uint64, err error)
	set func(soft, hard uint64) error
}

var sysRlimit = rlimitOps{
	get: func() (uint64, uint64, error) {
		var r syscall.Rlimit
		err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r)
		return uint64(r.Cur), uint64(r.Max), err
	},
	set: func(soft, hard uint64) error {
		r := syscall.Rlimit{Cur: soft, Max: hard}
		return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r)
	},
}

// fitFileLimit makes RLIMIT_NOFILE allow need descriptors if it can, and never lowers it. The soft limit is
// raised up to the hard limit; when the hard limit itself is below need, raising both is tried, which
// works for root (CAP_SYS_RESOURCE, and at most fs.nr_open). It returns the soft limit it leaves and, when
// that is below need, why.
//
// memcached 1.6.18 sets both limits to exactly -c (lowering them if they were higher) and exits with
// status 71 when it cannot. We keep going instead, with one log line (fitDescriptors): when descriptors run
// out, the acceptor refuses new connections and serves the open ones (third_party/gnet/accept_limit.go).
func fitFileLimit(need uint64, ops rlimitOps) (uint64, error) {
	soft, hard, err := ops.get()
	if err != nil {
		return 0, fmt.Errorf("getrlimit: %w", err)
	}
	if soft >= need {
		return soft, nil
	}
	if hard >= need {
		if err := ops.set(need, hard); err != nil {
			return soft, fmt.Errorf("setrlimit %d (hard limit %d): %w", need, hard, err)
		}
		return need, nil
	}
	herr := ops.set(need, need)
	if herr == nil {
		return need, nil
	}
	if soft < hard {
		if err := ops.set(hard, hard); err != nil {
			return soft, fmt.Errorf("setrlimit %d: %w", hard, err)
		}
		soft = hard
	}
	return soft, fmt.Errorf("the hard limit is %d and raising it failed (%w; it needs root or CAP_SYS_RESOURCE)",
		hard, herr)
}

// fitDescriptors raises the descriptor limit to fit conns connections with threads event loops, as
// memcached does at start. When it cannot, it logs one line and the daemon serves as many connections as
// the limit allows.
func fitDescriptors(conns, threads int, logger *slog.Logger) {
	need := fdsNeeded(conns, threads)
	cur0, _, _ := sysRlimit.get()
	have, err := fitFileLimit(need, sysRlimit)
	switch {
	case err != nil:
		usable := int64(have) - int64(need-uint64(conns))
		logger.Warn("too few file descriptors for -c: connections beyond the usable ones are refused",
			"conns", conns, "needed", need, "limit", have, "usable", max(usable, 0), "err", err)
	case have != cur0:
		logger.Info("raised the file descriptor limit for -c", "from", cur0, "to", have, "conns", conns)
	}
}
