package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"

	"github.com/leasecached/leasecached/server"
	"github.com/leasecached/leasecached/top"
)

// The top command must not change how the daemon's command line parses: memcached's flags still run the
// daemon (with -s the unix socket), and `top` with its own flags runs the view (with -s the server).
func TestTopCommandLine(t *testing.T) {
	cases := []struct {
		args   []string
		daemon func(server.Config) bool // the daemon runs, with this config
		view   *top.Options             // the view runs, with these options
		errHas string
	}{
		{args: []string{"-p", "11311", "-m", "64"}, daemon: func(c server.Config) bool { return c.Port == 11311 && c.MemoryLimit == 64<<20 }},
		{args: []string{"-s", "/tmp/mc.sock"}, daemon: func(c server.Config) bool { return c.Listeners[0].Addr == "/tmp/mc.sock" }},
		{args: []string{"-vv", "-t", "2"}, daemon: func(c server.Config) bool { return c.Threads == 2 }},
		{args: []string{"top"}, view: &top.Options{Addr: "127.0.0.1:11211", Interval: time.Second}},
		{args: []string{"top", "-s", "10.0.0.5:11311", "-d", "0.5", "-n", "3"},
			view: &top.Options{Addr: "10.0.0.5:11311", Interval: 500 * time.Millisecond, Iterations: 3}},
		{args: []string{"top", "--server", "h:1", "--delay", "2s"}, view: &top.Options{Addr: "h:1", Interval: 2 * time.Second}},
		{args: []string{"top", "-d", "0"}, errHas: "-d/--delay"},
		{args: []string{"top", "-d", "soon"}, errHas: "neither seconds nor a duration"},
		{args: []string{"top", "-n", "-1"}, errHas: "-n/--iterations"},
		{args: []string{"top", "extra"}, errHas: `unexpected argument "extra"`},
		{args: []string{"top", "-m", "64"}, errHas: "flag provided but not defined: -m"},
		{args: []string{"top", "--tls-cert", "x.pem"}, errHas: "only read with --tls"},
		{args: []string{"top", "--tls", "--tls-ca-cert", "/nonexistent"}, errHas: "--tls-ca-cert"},
		{args: []string{"-p", "1", "top"}, errHas: "does not apply to top"},
		{args: []string{"top", "-p", "1"}, errHas: "flag provided but not defined: -p"},
	}
	for _, tc := range cases {
		app := newApp()
		var cfg *server.Config
		var opt *top.Options
		app.Action = func(c *cli.Context) error {
			got, err := configFrom(c, 0)
			cfg = &got
			return err
		}
		app.Commands[0].Action = func(c *cli.Context) error {
			got, err := topOptions(c)
			opt = &got
			return err
		}
		err := app.Run(append([]string{"leasecached"}, tc.args...))
		if tc.errHas != "" {
			require.ErrorContains(t, err, tc.errHas, "%v", tc.args)
			continue
		}
		require.NoError(t, err, "%v", tc.args)
		if tc.daemon != nil {
			require.NotNil(t, cfg, "%v: the daemon did not run", tc.args)
			assert.Nil(t, opt, "%v", tc.args)
			assert.True(t, tc.daemon(*cfg), "%v: %+v", tc.args, *cfg)
		} else {
			require.NotNil(t, opt, "%v: the view did not run", tc.args)
			assert.Nil(t, cfg, "%v", tc.args)
			assert.Equal(t, *tc.view, *opt, "%v", tc.args)
		}
	}
}

func TestTopTLS(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.pem")
	require.NoError(t, os.WriteFile(bad, []byte("not pem"), 0o600))
	cfg, err := topTLS("", "", "")
	require.NoError(t, err)
	assert.Nil(t, cfg.RootCAs, "the system's CAs")
	_, err = topTLS(bad, "", "")
	require.ErrorContains(t, err, "no certificate")
	_, err = topTLS("", "", bad)
	require.ErrorContains(t, err, "--tls-key needs --tls-cert")
	_, err = topTLS("", bad, "")
	require.ErrorContains(t, err, "--tls-cert")
}
