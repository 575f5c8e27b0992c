package integration

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Bounds of the concurrency test.
const (
	concurrentConns  = 200
	concurrentRounds = 50
	// concurrentKeys is how many keys each connection cycles through, so
	// that later rounds overwrite earlier ones.
	concurrentKeys    = 8
	concurrentTimeout = 30 * time.Second
	// sharedKeys are written by every connection, to mix in contention.
	sharedKeys = 4
)

// TestConcurrentConnections runs concurrentConns connections at once, each
// doing set/get rounds on its own keys (checking it reads back exactly what
// it wrote) and on a few keys shared by everyone (checking every value read
// is one that some client wrote, whole).
func TestConcurrentConnections(t *testing.T) {
	for _, which := range []string{"memcached", "leasecached"} {
		t.Run(which, func(t *testing.T) {
			parallelBusy(t)
			var d *daemon
			if which == "memcached" {
				d = startMemcached(t, "-c", "1024")
			} else {
				d = startLeasecached(t, "-c", "1024")
			}
			ctx, cancel := context.WithTimeout(context.Background(), concurrentTimeout)
			defer cancel()
			errs := make(chan error, concurrentConns)
			var wg sync.WaitGroup
			for id := 0; id < concurrentConns; id++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := concurrentClient(ctx, d, id); err != nil {
						errs <- fmt.Errorf("client %d: %w", id, err)
					}
				}()
			}
			wg.Wait()
			close(errs)
			n := 0
			for err := range errs {
				if n < 10 {
					t.Error(err)
				}
				n++
			}
			if n > 0 {
				t.Errorf("%d of %d clients failed", n, concurrentConns)
			}
		})
	}
}

// concurrentValue is the value client id writes in round r: its length
// varies so that items of several sizes are in flight. About one in 17 is
// 20-100 KB: more than an event loop reads for one connection of a batch
// while the others' small requests share its read buffer.
func concurrentValue(id, r int) []byte {
	head := fmt.Sprintf("c%d-r%d-", id, r)
	n := (id*7 + r*13) % 300
	if (id+r)%17 == 0 {
		n = 20_000 + (id*7919+r*104729)%80_000
	}
	return append([]byte(head), bytes.Repeat([]byte{'a' + byte(r%26)}, n)...)
}

func concurrentClient(ctx context.Context, d *daemon, id int) error {
	var dl net.Dialer
	c, err := dl.DialContext(ctx, "tcp", d.addr)
	if err != nil {
		return fmt.Errorf("dial: %w", err)
	}
	defer c.Close()
	if deadline, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(deadline)
	}
	r := bufio.NewReader(c)
	w := bufio.NewWriter(c)
	last := make(map[string][]byte)
	for round := 0; round < concurrentRounds; round++ {
		key := fmt.Sprintf("conc-%d-%d", id, round%concurrentKeys)
		shared := fmt.Sprintf("conc-shared-%d", round%sharedKeys)
		val := concurrentValue(id, round)
		for _, k := range []string{key, shared} {
			fmt.Fprintf(w, "set %s %d 0 %d\r\n%s\r\n", k, id, len(val), val)
		}
		fmt.Fprintf(w, "get %s %s\r\n", key, shared)
		if err := w.Flush(); err != nil {
			return fmt.Errorf("round %d: write: %w", round, err)
		}
		for i := 0; i < 2; i++ {
			if line, err := r.ReadString('\n'); err != nil || line != "STORED\r\n" {
				return fmt.Errorf("round %d: set reply %q, %v", round, line, err)
			}
		}
		got, err := readValues(r)
		if err != nil {
			return fmt.Errorf("round %d: get: %w", round, err)
		}
		if v, ok := got[key]; !ok || !bytes.Equal(v.data, val) || v.flags != id {
			return fmt.Errorf("round %d: own key %s: got %q flags %d, want %q flags %d", round, key, v.data, v.flags, val, id)
		}
		if v, ok := got[shared]; !ok || !bytes.Equal(v.data, concurrentValue(v.flags, roundOf(v.data))) {
			return fmt.Errorf("round %d: shared key %s: torn or foreign value %q flags %d", round, shared, v.data, v.flags)
		}
		last[key] = val
	}
	// Everything this client wrote last must still read back.
	for k, want := range last {
		fmt.Fprintf(w, "get %s\r\n", k)
		if err := w.Flush(); err != nil {
			return fmt.Errorf("final get %s: %w", k, err)
		}
		got, err := readValues(r)
		if err != nil {
			return fmt.Errorf("final get %s: %w", k, err)
		}
		if !bytes.Equal(got[k].data, want) {
			return fmt.Errorf("final get %s: got %q, want %q", k, got[k].data, want)
		}
	}
	return nil
}

// roundOf parses the round out of a concurrentValue ("c<id>-r<round>-...").
func roundOf(v []byte) int {
	parts := bytes.SplitN(v, []byte("-"), 3)
	if len(parts) < 3 || len(parts[1]) < 2 {
		return -1
	}
	n, err := strconv.Atoi(string(parts[1][1:]))
	if err != nil {
		return -1
	}
	return n
}

type value struct {
	flags int
	data  []byte
}

// readValues reads one get reply (VALUE blocks up to END).
func readValues(r *bufio.Reader) (map[string]value, error) {
	out := make(map[string]value)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return nil, fmt.Errorf("read: %w", err)
		}
		if line == "END\r\n" {
			return out, nil
		}
		var key string
		var flags, n int
		if _, err := fmt.Sscanf(line, "VALUE %s %d %d\r\n", &key, &flags, &n); err != nil {
			return nil, fmt.Errorf("bad line %q: %w", line, err)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, fmt.Errorf("read data of %s: %w", key, err)
		}
		if !bytes.HasSuffix(buf, []byte("\r\n")) {
			return nil, fmt.Errorf("data of %s not terminated by CRLF: %q", key, buf)
		}
		out[key] = value{flags: flags, data: buf[:n]}
	}
}
