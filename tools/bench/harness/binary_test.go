package harness

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leasecached/leasecached/tools/bench/load"
)

// The binary table's rows are the issue's: get hits, sets and 10-key quiet multi-gets at pipeline 1 and
// 16, all binary, on the 100-byte key set.
func TestBinaryWorkloads(t *testing.T) {
	var names []string
	for _, w := range binaryWorkloads() {
		names = append(names, w.Name)
		assert.True(t, w.Binary, w.Name)
		assert.Equal(t, smallValue, w.ValueSize, w.Name)
		assert.Equal(t, "get", w.GetCmd, w.Name)
		cfg := w.config(&runningServer{addr: "x"}, time.Second, 1)
		assert.True(t, cfg.Binary, w.Name)
	}
	assert.Equal(t, []string{"p1  bin get 100B", "p1  bin set 100B", "p1  bin getkq x10 100B",
		"p16 bin get 100B", "p16 bin set 100B", "p16 bin getkq x10 100B"}, names)
	ws := binaryWorkloads()
	assert.Equal(t, []float64{1, 0, 1}, []float64{ws[0].GetRatio, ws[1].GetRatio, ws[2].GetRatio})
	assert.Equal(t, []int{1, 1, 10}, []int{ws[0].MultiGet, ws[1].MultiGet, ws[2].MultiGet})
}

// The binary table fits make bench's time limit, with a third server, and -binary-only alone is short.
func TestEstimateCompareBinary(t *testing.T) {
	o := compareOptions{reps: 3, duration: 5 * time.Second, ceiling: true, tls: true, tlsThird: "x", third: "y"}
	without := estimateCompare(o, 5)
	o.binary = true
	with := estimateCompare(o, 5)
	assert.LessOrEqual(t, with, compareMaxTime, "make bench with a third server, TLS and binary tables")
	assert.Greater(t, with-without, 3*time.Minute)
	o.binaryOnly, o.third = true, ""
	assert.Less(t, estimateCompare(o, 4), 10*time.Minute)
}

// A failed cell shows FAILED, its ratios "-", and its reason under the table.
func TestPrintMatrixTableFailedCell(t *testing.T) {
	servers := []*runningServer{{name: "memcached"}, {name: "leasecached"}}
	ws := []workload{{Name: "p1  bin get 100B"}, {Name: "p1  bin set 100B"}}
	res := matrixResults{}
	ok := func(ops float64) *load.Result {
		return &load.Result{OpsPerSec: ops, P99us: 100, ServerCPUUsPerOp: 2}
	}
	res.add(ws[0].Name, "memcached", ok(1000))
	res.add(ws[0].Name, "leasecached", ok(1500))
	res.add(ws[1].Name, "memcached", ok(1000))
	res.add(ws[1].Name, "leasecached", ok(9999))
	res.add(ws[1].Name, "leasecached", &load.Result{Failed: "3 wrong replies; the first: status NOT_STORED"})
	var b strings.Builder
	printMatrixTable(&b, ws, servers, res)
	printFailures(&b, ws, servers, res)
	lines := strings.Split(b.String(), "\n")
	require.GreaterOrEqual(t, len(lines), 6, b.String())
	assert.Equal(t, []string{"p1", "bin", "get", "100B", "1000", "1500", "1.50", "100", "100", "1.00", "2.00", "2.00",
		"1.00", "0/0", "0.00"}, strings.Fields(lines[2]))
	assert.Equal(t, []string{"p1", "bin", "set", "100B", "1000", "FAILED", "-", "100", "FAILED", "-", "2.00", "FAILED",
		"-", "0/-", "0.00"}, strings.Fields(lines[3]))
	assert.Contains(t, b.String(), "FAILED p1  bin set 100B, leasecached: 3 wrong replies; the first: status NOT_STORED")
	assert.NotContains(t, b.String(), "9999")
}

// fakeBinaryServer answers the binary protocol's VERSION properly and every other request with
// UNKNOWN_COMMAND; it speaks no text. Its address is returned; it stops when the test ends.
func fakeBinaryServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var h [24]byte
				for {
					if _, err := io.ReadFull(c, h[:]); err != nil {
						return
					}
					if _, err := io.CopyN(io.Discard, c, int64(binary.BigEndian.Uint32(h[8:]))); err != nil {
						return
					}
					if h[1] == 0x0d { // GETKQ: quiet, and a miss for all it knows
						continue
					}
					body := []byte("Unknown command")
					status := uint16(0x81)
					if h[1] == 0x0b || h[1] == 0x0a {
						body, status = []byte("1.6.18"), 0
						if h[1] == 0x0a {
							body = nil
						}
					}
					var r [24]byte
					r[0], r[1] = 0x81, h[1]
					binary.BigEndian.PutUint16(r[6:], status)
					binary.BigEndian.PutUint32(r[8:], uint32(len(body)))
					copy(r[12:16], h[12:16])
					if _, err := c.Write(append(r[:], body...)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// binaryTable measures a server that speaks the binary protocol (memcached), marks every cell of one that
// does not (the ceiling responder, text only) FAILED without running it, and one that answers wrongly
// FAILED with the first wrong reply; the comparison goes on through all of it.
func TestBinaryTable(t *testing.T) {
	bin, err := exec.LookPath("memcached")
	if err != nil {
		t.Skip("memcached not installed (make test-deps installs it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	o := compareOptions{lim: serverLimits{Threads: 2, MemMB: 64, ConnLimit: 256}, reps: 1,
		duration: 150 * time.Millisecond, genThreads: 1, binary: true}
	servers, err := startServers(ctx, []serverSpec{memcachedSpec(bin)}, o, t.TempDir())
	defer stopServers(servers)
	require.NoError(t, err)
	text := &runningServer{name: "leasecached", addr: startCeiling(t, "0:100"), pid: os.Getpid()}
	wrong := &runningServer{name: "third", addr: fakeBinaryServer(t), pid: os.Getpid()}
	servers = append(servers, text, wrong)

	var out, jsonOut bytes.Buffer
	require.NoError(t, binaryTable(ctx, o, servers, true, &jsonOut, &out))
	t.Log(out.String())
	assert.Equal(t, 12, strings.Count(out.String(), "\nFAILED p"), "six failed cells of the text-only server, six of the wrong one")
	assert.Contains(t, out.String(), "FAILED p1  bin get 100B, leasecached: does not speak the binary protocol: binary VERSION")
	assert.Contains(t, out.String(), "FAILED p16 bin set 100B, third: ")
	assert.Contains(t, out.String(), "wrong replies; the first: connection")
	assert.Contains(t, out.String(), "status UNKNOWN_COMMAND in the reply to a set")
	assert.Contains(t, out.String(), "status UNKNOWN_COMMAND in the reply to opcode 0x00")
	// The fake's silent GETKQ misses are no wrong reply, but keys that were stored must hit.
	assert.Contains(t, out.String(), "FAILED p1  bin getkq x10 100B, third: ")
	assert.Contains(t, out.String(), "gets missed keys that were stored")
	rows := 0
	for _, l := range strings.Split(out.String(), "\n") {
		l = strings.TrimSpace(l)
		for _, w := range binaryWorkloads() {
			if !strings.HasPrefix(l, w.Name+" ") {
				continue
			}
			rows++
			f := strings.Fields(strings.TrimPrefix(l, w.Name))
			require.Len(t, f, 15+2, l) // 3 metrics x (3 servers + 2 ratios), gen thr, gen
			assert.NotEqual(t, "FAILED", f[0], "memcached's cell: %s", l)
			assert.Equal(t, []string{"FAILED", "FAILED", "-", "-"}, f[1:5], "the failed cells and their ratios: %s", l)
			assert.Equal(t, "1/-/-", f[15], "generator threads: %s", l)
		}
	}
	assert.Equal(t, 6, rows)
	// Every run has its JSON line, the failed ones with their reason.
	assert.Equal(t, 18, strings.Count(jsonOut.String(), "\n"))
	assert.Equal(t, 12, strings.Count(jsonOut.String(), `"failed":`))
}
