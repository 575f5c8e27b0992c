package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"

	"github.com/leasecached/leasecached/internal/logging"
	"github.com/leasecached/leasecached/server"
	"github.com/leasecached/leasecached/slab"
)

func TestParseSize(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		err  bool
	}{
		{"1m", 1 << 20, false},
		{"1M", 1 << 20, false},
		{"512k", 512 << 10, false},
		{"2g", 0, true}, // above the 1 GiB item limit
		{"1g", 1 << 30, false},
		{"1048576", 1 << 20, false},
		{"", 0, true},
		{"m", 0, true},
		{"2x", 0, true},
		{"-1m", 0, true},
		{"0", 0, true},
		{"99999999999999999999k", 0, true},
	}
	for _, tc := range cases {
		got, err := parseSize(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("parseSize(%q) = %d, %v; want %d, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestValidate(t *testing.T) {
	good := server.Config{Listen: "127.0.0.1", Port: 11211,
		Listeners: []server.Listener{{Network: "tcp", Addr: "127.0.0.1:11211"}}, Threads: 2, ConnLimit: 1024, MaxItemSize: 1 << 20,
		MemoryLimit: 64 << 20, LeaseWindow: 10 * time.Second, StaleWindow: 10 * time.Second}
	cases := []struct {
		name   string
		change func(*server.Config)
		memMB  int64
		errHas string // "" means valid
	}{
		{"defaults", func(*server.Config) {}, 64, ""},
		{"port 0", func(c *server.Config) { c.Port = 0 }, 64, "-p/--port"},
		{"port 70000", func(c *server.Config) { c.Port = 70000 }, 64, "-p/--port"},
		{"no listeners", func(c *server.Config) { c.Listeners = nil }, 64, "-l/--listen"},
		{"-s: no inter", func(c *server.Config) {
			c.Listen, c.Listeners = "", []server.Listener{{Network: "unix", Addr: "/tmp/s"}}
		}, 64, ""},
		{"no memory", func(c *server.Config) { c.MemoryLimit = 0 }, 0, "-m/--memory-limit"},
		{"no connections", func(c *server.Config) { c.ConnLimit = 0 }, 64, "-c/--conn-limit"},
		{"no threads", func(c *server.Config) { c.Threads = 0 }, 64, "-t/--threads"},
		{"item below 1k", func(c *server.Config) { c.MaxItemSize = 100 }, 64, "-I/--max-item-size"},
		{"item over half of -m", func(c *server.Config) { c.MaxItemSize = 64 << 20 }, 64, "half the memory limit"},
		{"zero lease window", func(c *server.Config) { c.LeaseWindow = 0 }, 64, "--lease-window"},
		{"negative stale window", func(c *server.Config) { c.StaleWindow = -time.Second }, 64, "--stale-window"},
		{"no stale values", func(c *server.Config) { c.StaleWindow = 0 }, 64, ""},
		{"negative grace", func(c *server.Config) { c.Grace = -time.Second }, 64, "--grace"},
		{"grace over a day", func(c *server.Config) { c.Grace = 25 * time.Hour }, 64, "--grace"},
		{"grace and hold", func(c *server.Config) { c.Grace, c.Hold = time.Minute, time.Second }, 64, ""},
		{"negative hold", func(c *server.Config) { c.Hold = -time.Second }, 64, "--hold"},
		{"hold over a minute", func(c *server.Config) { c.Hold = 61 * time.Second }, 64, "--hold"},
		{"hot keys off", func(c *server.Config) { c.HotKeys = 0 }, 64, ""},
		{"negative hot keys", func(c *server.Config) { c.HotKeys = -1 }, 64, "--hot-keys"},
		{"too many hot keys", func(c *server.Config) { c.HotKeys = server.MaxHotKeys + 1 }, 64, "--hot-keys"},
		{"live copy without a data directory", func(c *server.Config) { c.DataLive = "/dev/shm" }, 64, "--data-live"},
		{"live copy of a data directory", func(c *server.Config) { c.DataDir, c.DataLive = "/var/lib/lc", "/dev/shm" }, 64, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := good
			tc.change(&cfg)
			err := validate(cfg, tc.memMB)
			switch {
			case tc.errHas == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.errHas != "" && (err == nil || !strings.Contains(err.Error(), tc.errHas)):
				t.Fatalf("error %v, want one naming %q", err, tc.errHas)
			case err != nil && strings.Contains(err.Error(), "\n"):
				t.Fatalf("error is not one line: %q", err)
			}
		})
	}
}

// The command line reaches the configuration: memcached's short flags, bundled as memcached accepts them,
// and -L (huge pages) off unless given.
func TestCommandLineToConfig(t *testing.T) {
	cases := []struct {
		args []string
		want func(server.Config) bool
	}{
		{[]string{"-p", "12345", "-m", "128"}, func(c server.Config) bool {
			return c.Port == 12345 && c.MemoryLimit == 128<<20 && !c.LargePages && c.HotKeys == server.DefaultHotKeys
		}},
		{[]string{"-L"}, func(c server.Config) bool { return c.LargePages }},
		{[]string{"--hot-keys", "5"}, func(c server.Config) bool { return c.HotKeys == 5 }},
		{[]string{"--enable-largepages", "-t", "3"}, func(c server.Config) bool { return c.LargePages && c.Threads == 3 }},
		{[]string{"--grace", "30s", "--hold", "2s"}, func(c server.Config) bool {
			return c.Grace == 30*time.Second && c.Hold == 2*time.Second
		}},
		{[]string{"--data-dir", "/d", "--data-live", "/dev/shm"}, func(c server.Config) bool {
			return c.DataDir == "/d" && c.DataLive == "/dev/shm"
		}},
		{[]string{"--data-dir", "/d", "--data-live", "off"}, func(c server.Config) bool {
			return c.DataDir == "/d" && c.DataLive == ""
		}},
		{[]string{"--data-live", "off"}, func(c server.Config) bool { return c.DataDir == "" && c.DataLive == "" }},
		{[]string{"--data-live", "auto"}, func(c server.Config) bool { return c.DataDir == "" && c.DataLive == "" }},
	}
	for _, tc := range cases {
		app := newApp()
		var got server.Config
		app.Action = func(c *cli.Context) error {
			var err error
			got, err = configFrom(c, 0)
			return err
		}
		if err := app.Run(append([]string{"leasecached"}, tc.args...)); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if !tc.want(got) {
			t.Errorf("%v: config %+v", tc.args, got)
		}
		if sc := storeConfig(got); sc.LargePages != got.LargePages || sc.MemoryLimit != got.MemoryLimit ||
			sc.Grace != got.Grace || sc.Hold != got.Hold || sc.DataDir != got.DataDir || sc.DataLive != got.DataLive {
			t.Errorf("%v: store config %+v from %+v", tc.args, sc, got)
		}
	}
	if sc := storeConfig(server.Config{StaleWindow: 0}); sc.StaleWindow >= 0 {
		t.Errorf("--stale-window 0 reached the store as %v, want negative (keep none)", sc.StaleWindow)
	}
}

// A grace not longer than the lease window is accepted with a warning (doc/leases.md, "Grace and hold").
func TestGraceWarning(t *testing.T) {
	for _, tc := range []struct {
		grace, window time.Duration
		warn          bool
	}{
		{0, 10 * time.Second, false},
		{10 * time.Second, 10 * time.Second, true},
		{2 * time.Second, 10 * time.Second, true},
		{30 * time.Second, 10 * time.Second, false},
	} {
		w := graceWarning(server.Config{Grace: tc.grace, LeaseWindow: tc.window})
		if (w != "") != tc.warn || strings.Contains(w, "\n") {
			t.Errorf("grace %s, window %s: warning %q", tc.grace, tc.window, w)
		}
	}
}

// -B, -S and --sasl-pwdb: memcached's rules (-S implies binary, -Y ascii; an explicit -B that lets the other
// protocol in is refused) and ours (-S needs --sasl-pwdb).
func TestProtocolFlags(t *testing.T) {
	pw := t.TempDir() + "/pw"
	require.NoError(t, os.WriteFile(pw, []byte("u:p\n"), 0o600))
	cases := []struct {
		args  []string
		proto server.Protocol
		sasl  string
		err   string
	}{
		{nil, server.ProtocolAuto, "", ""},
		{[]string{"-B", "ascii"}, server.ProtocolASCII, "", ""},
		{[]string{"--protocol", "binary"}, server.ProtocolBinary, "", ""},
		{[]string{"-B", "udp"}, 0, "", "invalid value for binding protocol"},
		{[]string{"-S", "--sasl-pwdb", pw}, server.ProtocolBinary, pw, ""},
		{[]string{"-S", "-B", "binary", "--sasl-pwdb", pw}, server.ProtocolBinary, pw, ""},
		{[]string{"-S", "-B", "auto", "--sasl-pwdb", pw}, 0, "", "cannot allow the ASCII protocol while using SASL"},
		{[]string{"-S"}, 0, "", "-S needs --sasl-pwdb"},
		{[]string{"--sasl-pwdb", pw}, 0, "", "only read with -S"},
		{[]string{"-S", "--sasl-pwdb", pw + ".missing"}, 0, "", "could not open"},
		{[]string{"-Y", pw}, server.ProtocolASCII, "", ""},
		{[]string{"-Y", pw, "-B", "auto"}, 0, "", "cannot allow the BINARY protocol"},
		{[]string{"-Y", pw, "-S", "--sasl-pwdb", pw}, 0, "", "use one"},
	}
	for _, tc := range cases {
		app := newApp()
		var got server.Config
		app.Action = func(c *cli.Context) error {
			var err error
			got, err = configFrom(c, 0)
			return err
		}
		err := app.Run(append([]string{"leasecached"}, tc.args...))
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, "%v", tc.args)
			continue
		}
		require.NoError(t, err, "%v", tc.args)
		assert.Equal(t, tc.proto, got.Protocol, "%v", tc.args)
		assert.Equal(t, tc.sasl, got.SASLFile, "%v", tc.args)
	}
}

// --log-format picks the format of every line, the start-up warnings included; -v sets the level the
// server starts at.
func TestLogFormatFlag(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    string // a regexp the warning line of -l * matches
		errHas  string
		level   slog.Level
		verbose int
	}{
		{nil, `^leasecached: \S+ \S+ WARN listening on \*:11211 without TLS`, "", logging.LevelNotice, 0},
		{[]string{"--log-format", "text"}, `^leasecached: \S+ \S+ WARN listening on`, "", logging.LevelNotice, 0},
		{[]string{"--log-format=json"}, `^\{"time":"[^"]+","level":"WARN","msg":"listening on \*:11211 without TLS`, "",
			logging.LevelNotice, 0},
		{[]string{"--log-format", "json"}, `^\{"time":"[^"]+","level":"WARN"`, "", slog.LevelDebug, 2},
		{[]string{"--log-format", "xml"}, "", `--log-format: "xml": want text or json`, 0, 0},
		{[]string{"--log-format", ""}, "", `--log-format: "": want text or json`, 0, 0},
	} {
		app := newApp()
		var logged strings.Builder
		app.ErrWriter = &logged
		var cfg server.Config
		app.Action = func(c *cli.Context) error {
			var err error
			cfg, err = configFrom(c, tc.verbose)
			return err
		}
		err := app.Run(append([]string{"leasecached", "-l", "*"}, tc.args...))
		if tc.errHas != "" {
			require.Error(t, err, "%v", tc.args)
			assert.Contains(t, err.Error(), tc.errHas)
			continue
		}
		require.NoError(t, err, "%v", tc.args)
		assert.Regexp(t, tc.want, logged.String(), "%v", tc.args)
		assert.Equal(t, 1, strings.Count(logged.String(), "\n"), "one line: %q", logged.String())
		assert.Equal(t, tc.level, cfg.LogLevel.Level(), "%v", tc.args)
	}
}

func TestParseMetricsListen(t *testing.T) {
	cases := []struct {
		in, want, err string
	}{
		{"", "", ""},
		{"127.0.0.1:9150", "127.0.0.1:9150", ""},
		{"[::1]:9150", "[::1]:9150", ""},
		{":9150", ":9150", ""},
		{"localhost:9150", "localhost:9150", ""},
		{"9150", "", "want host:port"},
		{"127.0.0.1", "", "want host:port"},
		{"127.0.0.1:0", "", "the port must be between 1 and 65535"},
		{"127.0.0.1:70000", "", "the port must be between 1 and 65535"},
		{"127.0.0.1:http", "", "the port must be between 1 and 65535"},
	}
	for _, c := range cases {
		got, err := parseMetricsListen(c.in)
		if c.err != "" {
			require.ErrorContains(t, err, c.err, c.in)
			continue
		}
		require.NoError(t, err, c.in)
		require.Equal(t, c.want, got)
	}
	app := newApp()
	var got server.Config
	app.Action = func(c *cli.Context) error {
		var err error
		got, err = configFrom(c, 0)
		return err
	}
	require.NoError(t, app.Run([]string{"leasecached", "--metrics-listen", "127.0.0.1:9150"}))
	require.Equal(t, "127.0.0.1:9150", got.MetricsListen)
	require.ErrorContains(t, app.Run([]string{"leasecached", "--metrics-listen", "9150"}), "--metrics-listen: ")
	require.NoError(t, app.Run([]string{"leasecached"}))
	require.Empty(t, got.MetricsListen) // off unless given
}

// TestAutoLive: --data-live's default keeps the live copy on a tmpfs with room for -m and otherwise maps
// the data directory, saying which in one line either way.
func TestAutoLive(t *testing.T) {
	if !slab.OnTmpfs(slab.DefaultLiveRoot) {
		t.Skip("no tmpfs at " + slab.DefaultLiveRoot)
	}
	shm, err := os.MkdirTemp(slab.DefaultLiveRoot, "lc-auto-test-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(shm) })
	disk := t.TempDir()
	cases := []struct {
		name, root  string
		memoryLimit int64
		live        bool
		lineHas     string
		dirIn       string // where the data directory is made ("": a temporary directory)
	}{
		{"tmpfs with room", shm, 64 << 20, true, "kept live in " + shm, ""},
		{"tmpfs without room", shm, 1 << 50, false, "MiB free", ""},
		{"not a tmpfs", disk, 64 << 20, false, "not a tmpfs", ""},
		{"data directory on tmpfs", shm, 64 << 20, false, "(a tmpfs", shm},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.root == disk && slab.OnTmpfs(disk) {
				t.Skip("the temporary directory is on tmpfs")
			}
			var out strings.Builder
			dir := t.TempDir()
			if tc.dirIn != "" {
				dir = filepath.Join(tc.dirIn, "not-yet/data") // made at start: its parent decides
			}
			got := autoLive(tc.root, dir, tc.memoryLimit, logging.New(&out, logging.Text, logging.Level(0)))
			if tc.live {
				assert.Equal(t, tc.root, got)
			} else {
				assert.Empty(t, got)
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			require.Len(t, lines, 1, "one line: %q", out.String())
			assert.Contains(t, lines[0], "--data-dir "+dir)
			assert.Contains(t, lines[0], tc.lineHas)
		})
	}
}

// TestLiveRoomWarning: an explicit --data-live root on a tmpfs without room for -m gets a warning at start;
// one with room, none.
func TestLiveRoomWarning(t *testing.T) {
	if !slab.OnTmpfs(slab.DefaultLiveRoot) {
		t.Skip("no tmpfs at " + slab.DefaultLiveRoot)
	}
	shm, err := os.MkdirTemp(slab.DefaultLiveRoot, "lc-room-test-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(shm) })
	dir := t.TempDir()
	for _, tc := range []struct {
		name, root  string
		memoryLimit int64
		warns       bool
	}{
		{"room", shm, 64 << 20, false},
		{"no room", shm, 1 << 50, true},
		{"no room, root made at start", filepath.Join(shm, "not-yet"), 1 << 50, true},
		{"none", "", 1 << 50, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := liveRoomWarning(tc.root, dir, tc.memoryLimit)
			if !tc.warns {
				assert.Empty(t, w)
				return
			}
			assert.Contains(t, w, "--data-live "+tc.root+": ")
			assert.Contains(t, w, "MiB free")
			assert.Contains(t, w, "evicts before -m")
		})
	}
}
