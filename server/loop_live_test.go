package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasecached/leasecached/shard"
)

// TestSharedLoopLive runs a real server with one event loop, so its 24 clients share one loopShared under
// gnet's own reads and batching. Each client sends pipelined rounds of random sets (a few of 300 KiB, whose
// replies pass the flush threshold when read back), gets of one or more keys, deletes and mn on keys of its
// own, and checks every reply against a model of its keys.
func TestSharedLoopLive(t *testing.T) {
	store, err := shard.New(shard.Config{MemoryLimit: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	s := New(Config{Listen: "127.0.0.1", Port: freePort(t), Threads: 1, ConnLimit: 100,
		MaxItemSize: 1 << 20, MemoryLimit: 64 << 20, Logger: slog.New(slog.DiscardHandler)}, store)
	done := make(chan error, 1)
	go func() { done <- s.Run() }()
	<-s.Ready()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Stop(ctx)
		<-done
	})
	const clients, rounds = 24, 150
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", s.cfg.Port))
			if err != nil {
				errs <- err
				return
			}
			defer nc.Close()
			_ = nc.SetDeadline(time.Now().Add(60 * time.Second))
			r := bufio.NewReaderSize(nc, 1<<16)
			rng := rand.New(rand.NewPCG(uint64(c), 99))
			model := map[string]string{}
			key := func() string { return fmt.Sprintf("c%d:k%d", c, rng.IntN(20)) }
			for round := range rounds {
				var req, want strings.Builder
				n := 1 + rng.IntN(20)
				if rng.IntN(3) == 0 {
					n = 1
				}
				for range n {
					switch x := rng.IntN(10); {
					case x < 4:
						k := key()
						v := fmt.Sprintf("v%d-%d-%s", c, round, strings.Repeat("x", rng.IntN(200)))
						if rng.IntN(200) == 0 {
							v = strings.Repeat("B", 300<<10)
						}
						fmt.Fprintf(&req, "set %s 0 0 %d\r\n%s\r\n", k, len(v), v)
						want.WriteString("STORED\r\n")
						model[k] = v
					case x < 8:
						ks := []string{key()}
						for rng.IntN(2) == 0 {
							ks = append(ks, key())
						}
						fmt.Fprintf(&req, "get %s\r\n", strings.Join(ks, " "))
						for _, k := range ks {
							if v, ok := model[k]; ok {
								fmt.Fprintf(&want, "VALUE %s 0 %d\r\n%s\r\n", k, len(v), v)
							}
						}
						want.WriteString("END\r\n")
					case x < 9:
						k := key()
						fmt.Fprintf(&req, "delete %s\r\n", k)
						if _, ok := model[k]; ok {
							want.WriteString("DELETED\r\n")
							delete(model, k)
						} else {
							want.WriteString("NOT_FOUND\r\n")
						}
					default:
						req.WriteString("mn\r\n")
						want.WriteString("MN\r\n")
					}
				}
				if _, err := io.WriteString(nc, req.String()); err != nil {
					errs <- err
					return
				}
				got := make([]byte, want.Len())
				if _, err := io.ReadFull(r, got); err != nil {
					errs <- fmt.Errorf("client %d round %d: %v", c, round, err)
					return
				}
				if string(got) != want.String() {
					i := 0
					for i < len(got) && got[i] == want.String()[i] {
						i++
					}
					errs <- fmt.Errorf("client %d round %d: differ at %d: got %q want %q", c, round, i,
						trim(string(got[i:])), trim(want.String()[i:]))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
