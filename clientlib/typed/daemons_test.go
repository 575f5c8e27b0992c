package typed_test

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/leasecached/leasecached/internal/testdaemon"
	"github.com/stretchr/testify/require"
)

// The real servers the typed cache is checked against, started as clientlib's own tests start them
// (internal/testdaemon): leasecached built from this tree, and Debian's memcached 1.6.

var daemon = testdaemon.Build{Pkg: testdaemon.Leasecached}

func start(t *testing.T, name, bin string, args func(port int) []string) string {
	t.Helper()
	d, err := testdaemon.Start(context.Background(), testdaemon.Spec{Name: name, Path: bin, Args: args,
		Output: os.Stderr, StartTimeout: 5 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Kill(5 * time.Second) })
	return d.Addr
}

func startLeasecached(t *testing.T) string {
	t.Helper()
	bin, err := daemon.Path()
	require.NoError(t, err)
	return start(t, "leasecached", bin, func(port int) []string {
		return []string{"-p", strconv.Itoa(port), "-l", "127.0.0.1", "-m", "64", "-t", "2"}
	})
}

func startMemcached(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("memcached")
	if err != nil {
		for _, p := range []string{"/usr/bin/memcached", "/usr/sbin/memcached"} {
			if _, e := os.Stat(p); e == nil {
				bin, err = p, nil
			}
		}
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("memcached is not installed")
		}
		t.Skip("memcached is not installed")
	}
	return start(t, "memcached", bin, func(port int) []string {
		return []string{"-u", "nobody", "-l", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "0", "-m", "64"}
	})
}

var backends = []struct {
	name  string
	start func(*testing.T) string
}{
	{"leasecached", startLeasecached},
	{"memcached", startMemcached},
}

func TestMain(m *testing.M) {
	code := m.Run()
	daemon.Remove()
	os.Exit(code)
}
