package clientlib

import (
	"fmt"
	"testing"

	"github.com/bradfitz/gomemcache/memcache"
)

// TestModuloMatchesGomemcache: Distribution Modulo, and NewFromAddrs, gomemcache's constructor's
// counterpart, send every key where gomemcache's ServerList would, so a service can switch clients without
// remapping its cache.
func TestModuloMatchesGomemcache(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5, 8} {
		t.Run(fmt.Sprint(n, " servers"), func(t *testing.T) {
			addrs := make([]string, n)
			for i := range addrs {
				addrs[i] = fmt.Sprintf("127.0.0.1:%d", 20000+i)
			}
			var ss memcache.ServerList
			if err := ss.SetServers(addrs...); err != nil {
				t.Fatal(err)
			}
			cfg := Config{Distribution: Modulo}
			for _, a := range addrs {
				cfg.Servers = append(cfg.Servers, Server{Addr: a})
			}
			c, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			fromAddrs, err := NewFromAddrs(addrs...)
			if err != nil {
				t.Fatal(err)
			}
			defer fromAddrs.Close()
			for i := range 2000 {
				key := fmt.Sprintf("key:%d:%x", i, i*7919)
				want, err := ss.PickServer(key)
				if err != nil {
					t.Fatal(err)
				}
				for name, c := range map[string]*Client{"New(Modulo)": c, "NewFromAddrs": fromAddrs} {
					if got, _ := c.ServerFor(key); got != want.String() {
						t.Fatalf("%s: %s picks %s, gomemcache %s", key, name, got, want)
					}
				}
			}
		})
	}
}

func TestPickAllocatesNothing(t *testing.T) {
	for _, d := range []Distribution{Ketama, Modulo} {
		c, err := New(Config{Distribution: d, Servers: []Server{{Addr: "127.0.0.1:1"}, {Addr: "127.0.0.1:2"}}})
		if err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(1000, func() { _, _ = c.pick("user:42:profile") }); n != 0 {
			t.Errorf("distribution %d: pick allocates %v per call", d, n)
		}
		c.Close()
	}
}
