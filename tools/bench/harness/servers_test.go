package harness

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/leasecached/leasecached/tools/bench/load"
)

// startServer waits until a server answers "version", and stop ends it with SIGTERM; its output goes to
// its log.
func TestStartServerAndStop(t *testing.T) {
	bin, err := exec.LookPath("memcached")
	if err != nil {
		t.Skip("memcached not installed (make test-deps installs it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := startServer(ctx, memcachedSpec(bin+" -vv"), serverLimits{Threads: 1, MemMB: 8, ConnLimit: 64}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if !s.alive() || load.Ping(s.addr) != nil {
		t.Fatalf("%s on %s: alive %v, ping %v", s.name, s.addr, s.alive(), load.Ping(s.addr))
	}
	if err := s.stop(); err != nil {
		t.Error(err)
	}
	if s.alive() {
		t.Error("still running after stop")
	}
	if log := s.logSince(0); len(log) == 0 {
		t.Errorf("nothing in the log %s from memcached -vv", s.logPath)
	}
}

func TestStartServerReportsEarlyExit(t *testing.T) {
	_, err := startServer(context.Background(), serverSpec{Name: "bad", Command: "echo no such server; exit 3"},
		serverLimits{Threads: 1, MemMB: 1, ConnLimit: 1}, t.TempDir())
	if err == nil {
		t.Fatal("a server that exits at once was reported started")
	}
	if _, statErr := os.Stat("/bin/sh"); statErr == nil && !strings.Contains(err.Error(), "no such server") {
		t.Errorf("error %q does not carry the server's output", err)
	}
}

// A TLS spec gets memcached's switches with the run's certificate, quoted for sh, and starts only once it
// answers over TLS: memcached -Z here, as leasecached -Z in make bench.
func TestStartServerTLS(t *testing.T) {
	bin, err := exec.LookPath("memcached")
	if err != nil {
		t.Skip("memcached not installed (make test-deps installs it)")
	}
	dir := t.TempDir() + "/it's here"
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := load.WriteSelfSignedCert(dir)
	if err != nil {
		t.Fatal(err)
	}
	sp := withTLS(memcachedSpec(bin), "", tlsCert{certFile, keyFile})
	if !strings.HasSuffix(sp.Command, " -Z -o ssl_chain_cert="+shellQuote(certFile)+",ssl_key="+shellQuote(keyFile)) ||
		!sp.TLS.Enabled || sp.TLS.CAFile != certFile {
		t.Fatalf("TLS spec %+v", sp)
	}
	if own := withTLS(sp, "x -p {port} -o ssl_key={key}", tlsCert{"c", "k"}); own.Command != "x -p {port} -o ssl_key='k'" {
		t.Errorf("a TLS command of its own became %q", own.Command)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := startServer(ctx, sp, serverLimits{Threads: 1, MemMB: 8, ConnLimit: 64}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop()
	if load.TLSPing(s.tls)(s.addr) != nil || load.Ping(s.addr) == nil {
		t.Errorf("%s on %s: TLS ping %v, plaintext ping %v", s.name, s.addr, load.TLSPing(s.tls)(s.addr), load.Ping(s.addr))
	}
}
