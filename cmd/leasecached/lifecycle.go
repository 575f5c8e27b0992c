package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"syscall"
	"time"

	"github.com/leasecached/leasecached/internal/logging"
	"github.com/leasecached/leasecached/internal/sdnotify"
)

// runner is what runUntilStopped needs of the server (*server.Server); tests fake it.
type runner interface {
	Run() error
	Ready() <-chan struct{}
	Stop(context.Context) error
	// Reload re-reads the server's files (the -Y password file, the TLS certificates); a file that does
	// not load leaves the one loaded before in use.
	Reload() []error
}

// exit is os.Exit; tests replace it.
var exit = os.Exit

// stopSignals stop the server cleanly: SIGINT and SIGTERM, and SIGUSR1, memcached's graceful stop (the
// one its -e warm restart wants, which every stop with --data-dir is), which Go would otherwise ignore.
var stopSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGUSR1}

// runUntilStopped runs srv until it fails or a stopping signal (stopSignals) arrives on sigs, and then
// stops it; SIGHUP instead reloads srv's files and never stops it, as memcached's SIGHUP. It returns nil
// only after a signal: a server that stops for any other reason is an error, so the daemon exits 1 (Run
// fails whenever its engine ends without Stop). After the signal, srv gets timeout to answer what it has
// read and close its connections; past that, runUntilStopped returns nil all the same (the daemon was asked
// to stop) with one log line. A second signal meanwhile exits at once, with status 128 + its number (130
// for SIGINT, 143 for SIGTERM), as a shell reports a process that signal killed. returned says whether Run
// returned: if not, the server may still be using what it was given.
//
// It tells the service manager through n (doc/design/deploy.md): READY=1 once the listeners accept
// connections, RELOADING=1 and READY=1 around a reload, STOPPING=1 at the stopping signal.
//
// What the operator caused (a signal) is logged at NOTICE, printed without -v, as memcached prints its
// draining stop (doc/design/logging.md).
func runUntilStopped(srv runner, sigs <-chan os.Signal, timeout time.Duration, logger *slog.Logger,
	n *sdnotify.Notifier) (returned bool, err error) {
	done := make(chan error, 1)
	go func() { done <- srv.Run() }()

	ready := srv.Ready()
	var sig os.Signal
	for sig == nil {
		select {
		case err := <-done:
			return true, err
		case <-ready:
			ready = nil // a nil channel is never ready again: READY=1 once
			notify(n, sdnotify.Ready, logger)
		case s := <-sigs:
			if s != syscall.SIGHUP {
				sig = s
				continue
			}
			if ready != nil { // not serving yet: READY=1 comes when the listeners are up
				reload(srv, logger)
				continue
			}
			notify(n, sdnotify.Reloading(), logger)
			reload(srv, logger)
			notify(n, sdnotify.Ready, logger)
		}
	}
	notify(n, sdnotify.Stopping, logger)
	logger.Log(context.Background(), logging.LevelNotice, "stopping (a second signal exits at once)",
		"signal", signalName(sig))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	go func() {
		select { // a signal can come before the engine is up; Stop needs it up
		case <-srv.Ready():
		case <-ctx.Done():
			return
		}
		if err := srv.Stop(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) &&
			!errors.Is(err, context.Canceled) {
			logger.Error("stop failed", "err", err)
		}
	}()
	// Run returns as soon as the engine has closed everything. gnet's Stop only polls for that every
	// 500 ms, so it is not waited for.
	sig = nil
	for sig == nil {
		select {
		case err := <-done:
			return true, err
		case <-ctx.Done():
			logger.Warn("stop: connections still open: exiting without them", "after", timeout)
			return false, nil
		case s := <-sigs:
			if s != syscall.SIGHUP { // stopping: nothing to reload for
				sig = s
			}
		}
	}
	exitAtOnce(sig, "second signal", logger)
	return false, errors.New("exit returned") // only a test's exit returns
}

// exitAtOnce exits on a stopping signal that came while stopping (what says which), with status 128 + its
// number.
func exitAtOnce(sig os.Signal, what string, logger *slog.Logger) {
	logger.Log(context.Background(), logging.LevelNotice, what+": exiting at once", "signal", signalName(sig))
	code := 1
	if s, ok := sig.(syscall.Signal); ok {
		code = 128 + int(s)
	}
	exit(code)
}

// closeStore runs closeFn (the store's Close, which with a data directory waits for its opening and
// rebuild, then syncs it: seconds on a slow disk) until it returns. A stopping signal meanwhile exits at
// once, as runUntilStopped promises: what the directory holds is then what a kill leaves, which a restart
// serves (doc/design/restart.md).
//
// signalled says whether a signal began the stop (runUntilStopped returned nil), for the log line.
func closeStore(closeFn func(), signalled bool, sigs <-chan os.Signal, logger *slog.Logger) {
	what := "signal while closing the store"
	if signalled {
		what = "second signal"
	}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		closeFn()
	}()
	for {
		select {
		case <-closed:
			return
		case sig := <-sigs:
			if sig != syscall.SIGHUP {
				exitAtOnce(sig, what, logger)
				return // only a test's exit returns
			}
		}
	}
}

// notify tells the service manager state; one that cannot be told is a log line, and serving goes on.
func notify(n *sdnotify.Notifier, state string, logger *slog.Logger) {
	if err := n.Notify(state); err != nil {
		logger.Warn("service manager not told", "err", err)
	}
}

// reload answers SIGHUP: srv re-reads its files and logs each that failed to load.
func reload(srv runner, logger *slog.Logger) {
	errs := srv.Reload()
	if len(errs) == 0 {
		logger.Log(context.Background(), logging.LevelNotice, "reloaded", "signal", "SIGHUP")
		return
	}
	logger.Warn("reloaded, some files kept from before (see above)", "signal", "SIGHUP", "kept", len(errs))
}

// signalName is how a log line names sig: SIGINT, SIGTERM.
func signalName(sig os.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGUSR1:
		return "SIGUSR1"
	case syscall.SIGHUP:
		return "SIGHUP"
	}
	return sig.String()
}
