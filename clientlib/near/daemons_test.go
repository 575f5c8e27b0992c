package near

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/leasecached/leasecached/clientlib"
	"github.com/leasecached/leasecached/internal/testdaemon"
	"github.com/stretchr/testify/require"
)

// Real servers, started as clientlib's and typed's tests start them (internal/testdaemon):
// leasecached built from this tree, and Debian's memcached 1.6.18.

var daemon = testdaemon.Build{Pkg: testdaemon.Leasecached}

func leasecachedBin(t *testing.T) string {
	t.Helper()
	bin, err := daemon.Path()
	require.NoError(t, err)
	return bin
}

func leasecachedArgs(port int) []string {
	return []string{"-p", strconv.Itoa(port), "-l", "127.0.0.1", "-m", "64", "-t", "2"}
}

func startDaemon(t *testing.T, name, bin string, args func(int) []string, port int) *testdaemon.Daemon {
	t.Helper()
	spec := testdaemon.Spec{Name: name, Path: bin, Args: args, Output: os.Stderr, StartTimeout: 5 * time.Second}
	var d *testdaemon.Daemon
	var err error
	if port == 0 {
		d, err = testdaemon.Start(context.Background(), spec)
	} else {
		d, err = testdaemon.StartOnPort(context.Background(), spec, port)
	}
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Kill(5 * time.Second) })
	return d
}

func startLeasecached(t *testing.T) *testdaemon.Daemon {
	t.Helper()
	return startDaemon(t, "leasecached", leasecachedBin(t), leasecachedArgs, 0)
}

func startMemcached(t *testing.T) *testdaemon.Daemon {
	t.Helper()
	bin := "/usr/bin/memcached"
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("memcached is not installed")
		}
		t.Skip("memcached is not installed")
	}
	user := "nobody"
	if os.Geteuid() == 0 {
		user = "root"
	}
	return startDaemon(t, "memcached", bin, func(port int) []string {
		return []string{"-u", user, "-l", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "0", "-m", "64"}
	}, 0)
}

func newClient(t *testing.T, addr string) *clientlib.Client {
	t.Helper()
	c, err := clientlib.New(clientlib.Config{Servers: []clientlib.Server{{Addr: addr}}})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func newNear(t *testing.T, c *clientlib.Client, cfg Config) *Cache {
	t.Helper()
	nc, err := New(c, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	return nc
}

func TestMain(m *testing.M) {
	code := m.Run()
	daemon.Remove()
	os.Exit(code)
}
