package split

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

// Real servers, started as clientlib's, typed's and near's tests start them (internal/testdaemon):
// leasecached built from this tree.

var daemon = testdaemon.Build{Pkg: testdaemon.Leasecached}

func startLeasecached(t *testing.T) *testdaemon.Daemon {
	t.Helper()
	bin, err := daemon.Path()
	require.NoError(t, err)
	spec := testdaemon.Spec{Name: "leasecached", Path: bin, Output: os.Stderr, StartTimeout: 5 * time.Second,
		Args: func(port int) []string {
			return []string{"-p", strconv.Itoa(port), "-l", "127.0.0.1", "-m", "64", "-t", "1"}
		}}
	d, err := testdaemon.Start(context.Background(), spec)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Kill(5 * time.Second) })
	return d
}

// startFleet starts n leasecached servers and returns their addresses.
func startFleet(t *testing.T, n int) ([]*testdaemon.Daemon, []clientlib.Server) {
	t.Helper()
	ds := make([]*testdaemon.Daemon, n)
	servers := make([]clientlib.Server, n)
	for i := range ds {
		ds[i] = startLeasecached(t)
		servers[i] = clientlib.Server{Addr: ds[i].Addr}
	}
	return ds, servers
}

func newClient(t *testing.T, cfg clientlib.Config) *clientlib.Client {
	t.Helper()
	c, err := clientlib.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func newSplit(t *testing.T, c *clientlib.Client, cfg Config) *Client {
	t.Helper()
	s, err := New(c, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func TestMain(m *testing.M) {
	code := m.Run()
	daemon.Remove()
	os.Exit(code)
}
