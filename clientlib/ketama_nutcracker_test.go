package clientlib_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/leasecached/leasecached/clientlib"
	"github.com/leasecached/leasecached/internal/testdaemon"
	"github.com/stretchr/testify/require"
)

// nutcrackerKeys is how many keys each placement check routes through twemproxy.
const nutcrackerKeys = 1000

// TestKetamaMatchesTwemproxy routes keys through a real twemproxy (Debian's nutcracker) with
// `distribution: ketama, hash: md5` in front of three memcached processes, finds where each key
// landed by reading every backend directly, and checks clientlib picks the same server, for equal
// weights, unequal weights, explicitly named servers and servers on Unix sockets.
func TestKetamaMatchesTwemproxy(t *testing.T) {
	nutcracker := requireBinary(t, "nutcracker")
	tcp := []*proc{startMemcached(t), startMemcached(t), startMemcached(t)}
	sockDir := t.TempDir()
	var unix []*proc
	for i := range 3 {
		unix = append(unix, startMemcachedSocket(t, filepath.Join(sockDir, fmt.Sprintf("m%d.sock", i))))
	}

	pools := []struct {
		name    string
		prefix  string
		weights []int
		names   []string
		unix    bool // the backends are the Unix socket ones
	}{
		{"equal", "eq:", []int{1, 1, 1}, nil, false},
		{"weighted", "w:", []int{1, 2, 3}, nil, false},
		{"named", "n:", []int{1, 1, 1}, []string{"alpha", "beta", "gamma"}, false},
		{"unix", "u:", []int{1, 1, 1}, nil, true},
	}
	backendsOf := func(unixPool bool) []*proc {
		if unixPool {
			return unix
		}
		return tcp
	}
	dir := t.TempDir()
	conf := ""
	listen := make([]string, len(pools))
	for i, p := range pools {
		listen[i] = "127.0.0.1:" + strconv.Itoa(freePort(t))
		conf += fmt.Sprintf("%s:\n  listen: %s\n  hash: md5\n  distribution: ketama\n  auto_eject_hosts: false\n  timeout: 2000\n  servers:\n",
			p.name, listen[i])
		for j, b := range backendsOf(p.unix) {
			line := fmt.Sprintf("%s:%d", b.Addr, p.weights[j])
			if p.names != nil {
				line += " " + p.names[j]
			}
			conf += "   - " + line + "\n"
		}
	}
	confPath := filepath.Join(dir, "nutcracker.yml")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	startProcess(t, nutcracker, func(statsPort int) []string {
		return []string{"-c", confPath, "-o", filepath.Join(dir, "nutcracker.log"), "-a", "127.0.0.1",
			"-s", strconv.Itoa(statsPort), "-p", filepath.Join(dir, "nutcracker.pid")}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for pi, p := range pools {
		t.Run(p.name, func(t *testing.T) {
			backends := backendsOf(p.unix)
			direct := make([]*clientlib.Client, len(backends))
			for i, b := range backends {
				direct[i] = newClient(t, clientlib.Config{}, b.Addr)
			}
			waitListening(t, listen[pi])
			proxy := newClient(t, clientlib.Config{}, listen[pi])
			keys := make([]string, nutcrackerKeys)
			for i := range keys {
				keys[i] = fmt.Sprintf("%suser:%d:profile", p.prefix, i)
				if err := proxy.Set(ctx, &clientlib.Item{Key: keys[i], Value: []byte("x")}); err != nil {
					t.Fatalf("set %s through twemproxy: %v", keys[i], err)
				}
			}
			landed := make(map[string]string)
			for i, d := range direct {
				got, err := d.GetMulti(ctx, keys)
				if err != nil {
					t.Fatal(err)
				}
				for k := range got {
					landed[k] = backends[i].Addr
				}
			}
			cfg := clientlib.Config{Distribution: clientlib.Ketama}
			for j, b := range backends {
				s := clientlib.Server{Addr: b.Addr, Weight: p.weights[j]}
				if p.names != nil {
					s.Name = p.names[j]
				}
				cfg.Servers = append(cfg.Servers, s)
			}
			ours, err := clientlib.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer ours.Close()
			mismatches, perServer := 0, map[string]int{}
			for _, k := range keys {
				want, ok := landed[k]
				if !ok {
					t.Fatalf("key %s is on no backend", k)
				}
				perServer[want]++
				if got, _ := ours.ServerFor(k); got != want {
					mismatches++
					if mismatches <= 5 {
						t.Errorf("%s: twemproxy put it on %s, clientlib picks %s", k, want, got)
					}
				}
			}
			if mismatches > 0 {
				t.Fatalf("%d of %d keys placed differently from twemproxy", mismatches, len(keys))
			}
			t.Logf("%d keys agree with twemproxy; spread %v", len(keys), perServer)
		})
	}
}

func waitListening(t *testing.T, addr string) {
	t.Helper()
	require.NoError(t, testdaemon.WaitAccepts(addr, startTimeout), "nothing listening on %s", addr)
}

func newClient(t testing.TB, cfg clientlib.Config, addrs ...string) *clientlib.Client {
	t.Helper()
	for _, a := range addrs {
		cfg.Servers = append(cfg.Servers, clientlib.Server{Addr: a})
	}
	c, err := clientlib.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
