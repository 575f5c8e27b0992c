package slab

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// A data directory is locked by its server (flock on DIR/lock, which names the server's pid). The kernel
// releases the lock only once the process is gone: after a kill -9, that is after it has unmapped and
// closed its item memory, which takes seconds for gigabytes of it (more while an empty start's files
// are being freed, discard_linux.go); after a stopping signal or `shutdown`, after the last sync. A start
// run meanwhile, as a script or an operator does right after the kill or the stop, would be refused. So a
// start whose lock is held by a server that is leaving waits for it (restart.md rule 7); a start beside a
// server that runs is refused.
const (
	// lockWaitMax bounds that wait: a leaving server that has not let go by then (a stop stuck on a
	// dead disk) refuses the start as a running one does.
	lockWaitMax = 5 * time.Minute
	// lockGrace is how long a holder that does not look leaving is looked at again before the start is
	// refused: one told to stop writes its mark only once its signal handling has run, and a lock file
	// read while its holder writes it may say nothing readable.
	lockGrace = 500 * time.Millisecond
	lockPoll  = 10 * time.Millisecond
	// stoppingMark follows the pid in the lock file of a server that is stopping (Backing.Stopping).
	stoppingMark = " stopping"
	// pfExiting is the kernel's PF_EXITING in /proc/PID/stat's flags: the process is in its exit.
	pfExiting  = 0x4
	sigkillBit = 1 << (unix.SIGKILL - 1)
)

// lockWait is lockWaitMax and procRoot /proc; tests change them.
var (
	lockWait = lockWaitMax
	procRoot = "/proc"
)

// lockDir takes dir's lock through f, the lock file, opened. waiting, when set, is told once when the
// holder is leaving and the start waits for it.
func lockDir(f *os.File, dir string, waiting func(owner string)) error {
	start := time.Now()
	var deadline time.Time // lockWait after the holder was first seen leaving
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			_ = f.Truncate(0)
			_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())), 0)
			return nil
		}
		if err != unix.EWOULDBLOCK {
			return fmt.Errorf("data directory %s: cannot lock it: %w", dir, err)
		}
		content, _ := readSmall(filepath.Join(dir, "lock"), lockMax)
		pid, leaving := ownerLeaving(content)
		now := time.Now()
		switch {
		case leaving == "" && now.Sub(start) >= lockGrace:
			return fmt.Errorf("data directory %s is in use by another leasecached (pid %s)", dir, pid)
		case leaving == "":
		case deadline.IsZero():
			deadline = now.Add(lockWait)
			if waiting != nil {
				waiting(fmt.Sprintf("pid %s, which is %s", pid, leaving))
			}
		case now.After(deadline):
			return fmt.Errorf("data directory %s is in use by another leasecached (pid %s, %s for more than %s)",
				dir, pid, leaving, lockWait)
		}
		time.Sleep(lockPoll)
	}
}

// ownerLeaving reads a lock file's content: the holder's pid, and, when it is leaving, how: "stopping" (its
// mark), "exiting" once it is in its exit (a zombie, or PF_EXITING), "killed" while a SIGKILL is pending
// (sent, not yet acted on); else "". Only what this pid namespace's /proc says of that pid is known: a holder
// that /proc does not show (gone, its mark left behind: the flock is someone else's; or in another pid
// namespace) is taken as running, as is a holder in another namespace whose pid names another process here.
func ownerLeaving(content []byte) (pid string, leaving string) {
	pid, stopping := string(content), false
	if p, ok := bytes.CutSuffix(content, []byte(stoppingMark)); ok {
		pid, stopping = string(p), true
	}
	n, err := strconv.Atoi(pid)
	if err != nil || n <= 0 {
		return pid, ""
	}
	// What /proc/PID/stat says is its main thread's, which a leasecached ends only with the whole process
	// (the Go runtime never ends it alone).
	dir := filepath.Join(procRoot, strconv.Itoa(n))
	stat, err := readSmall(filepath.Join(dir, "stat"), smallTextMax)
	switch {
	case err != nil:
		return pid, ""
	case stopping:
		return pid, "stopping"
	case statExiting(stat):
		return pid, "exiting"
	}
	if status, err := readSmall(filepath.Join(dir, "status"), smallTextMax); err == nil && statusKilled(status) {
		return pid, "killed"
	}
	return pid, ""
}

// statExiting reads a /proc/PID/stat line: pid (comm) state ppid pgrp session tty_nr tpgid flags ..., where
// comm may hold spaces and parentheses. True for a zombie (Z, X) or a process in its exit (PF_EXITING).
func statExiting(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return false
	}
	f := bytes.Fields(stat[i+1:])
	if len(f) <= 6 {
		return false
	}
	flags, _ := strconv.ParseUint(string(f[6]), 10, 64)
	s := f[0][0]
	return s == 'Z' || s == 'X' || flags&pfExiting != 0
}

// statusKilled reads /proc/PID/status: true when its SigPnd (the main thread's) or ShdPnd (the process's)
// mask holds SIGKILL.
func statusKilled(status []byte) bool {
	for _, line := range bytes.Split(status, []byte("\n")) {
		name, mask, ok := bytes.Cut(line, []byte(":"))
		if !ok || string(name) != "SigPnd" && string(name) != "ShdPnd" {
			continue
		}
		if m, err := strconv.ParseUint(string(bytes.TrimSpace(mask)), 16, 64); err == nil && m&sigkillBit != 0 {
			return true
		}
	}
	return false
}

// Stopping writes in the lock file that this server is stopping, so that a start meanwhile waits for
// the lock instead of being refused (lockDir). The pid stays first.
func (b *Backing) Stopping() {
	if b.lock != nil {
		_, _ = b.lock.WriteAt([]byte(strconv.Itoa(os.Getpid())+stoppingMark), 0)
	}
}
