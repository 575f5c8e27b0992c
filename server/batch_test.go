package server

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/panjf2000/gnet/v2"

	bp "github.com/leasecached/leasecached/protocol/binprot"
)

// grantedToken matches the key and token of an LVALUE line that grants a lease.
var grantedToken = regexp.MustCompile(`LVALUE (\S+) (?:[02-9]|\d\d+) `)

// ctxConn is a fakeConn whose Context is its conn, as Server.OnOpen leaves a gnet connection's.
type ctxConn struct {
	fakeConn
	cn *conn
}

func (c *ctxConn) Context() any { return c.cn }

func (c *ctxConn) SetContext(ctx any) { c.cn, _ = ctx.(*conn) }

// Serving the connections of one poll together changes nothing a client can see. Six clients share keys
// (one sets what another reads in the same round), and each sends a script of single-key gets and sets,
// lease-gets, multi-gets, pipelined requests, refused requests, swallowed data blocks, noreply, meta
// commands with base64 keys and a quit, cut at random points. Round by round, each client's next piece is
// served either with OnTrafficBatch for all clients that have one, or with OnTraffic one client after the
// other; each client must get the same bytes back both ways.
func TestTrafficBatchMatchesOneByOne(t *testing.T) {
	const clients = 8 // the last two speak the binary protocol
	rng := rand.New(rand.NewPCG(5, 6))
	scripts := make([][]string, clients)
	for c := range clients {
		var reqs []string
		for i := range 300 {
			k := fmt.Sprintf("k%d", rng.IntN(40))
			if c >= 6 {
				reqs = append(reqs, binaryBatchRequest(rng, c, i, k))
				continue
			}
			switch r := rng.IntN(20); {
			case r < 8:
				reqs = append(reqs, "get "+k+"\r\n")
			case r < 12:
				v := fmt.Sprintf("c%di%d", c, i)
				reqs = append(reqs, fmt.Sprintf("set %s %d 0 %d\r\n%s\r\n", k, c, len(v), v))
			case r == 12:
				reqs = append(reqs, "lease-get "+k+"\r\n")
			case r == 13:
				reqs = append(reqs, fmt.Sprintf("gets %s k%d nope\r\n", k, rng.IntN(40)))
			case r == 14:
				reqs = append(reqs, "delete "+k+"\r\n", "get "+k+"\r\n")
			case r == 15:
				reqs = append(reqs, "set "+k+" 0 0 1 noreply\r\nn\r\n")
			case r == 16:
				reqs = append(reqs, "set "+k+" 0 0 3\r\ntoo long\r\n", "get "+k+"\r\n") // refused, then swallowed
			case r == 17:
				reqs = append(reqs, "bogus\r\n", "get "+strings.Repeat("x", 251)+"\r\n")
			case r == 18:
				reqs = append(reqs, "mg azE v\r\n", "ms azE 2 b\r\nzz\r\n", "mg k1 v f\r\n") // azE is base64 of "k1"
			default:
				reqs = append(reqs, "incr n 1\r\n", "touch "+k+" 100\r\n")
			}
		}
		if c == 2 {
			reqs = append(reqs, "quit\r\n", "get k1\r\n")
		}
		whole := strings.Join(reqs, "")
		// Mostly one request per piece, as at pipeline depth 1; sometimes several, or a cut mid-request.
		for i := 0; i < len(reqs); {
			switch r := rng.IntN(10); {
			case r < 6:
				scripts[c] = append(scripts[c], reqs[i])
				i++
			case r < 8:
				n := min(len(reqs)-i, 2+rng.IntN(5))
				scripts[c] = append(scripts[c], strings.Join(reqs[i:i+n], ""))
				i += n
			default:
				cut := rng.IntN(len(reqs[i]) + 1)
				scripts[c] = append(scripts[c], reqs[i][:cut], reqs[i][cut:])
				i++
			}
		}
		if strings.Join(scripts[c], "") != whole {
			t.Fatal("the pieces do not add up to the script")
		}
	}

	run := func(batched bool) []string {
		s := newTestServer(t)
		// Batched, the clients share one loop's state, as a gnet event loop's connections do; one by one,
		// each has its own.
		var ls *loopShared
		if batched {
			ls = s.newLoopShared(true)
		}
		cs := make([]*ctxConn, clients)
		for i := range cs {
			cs[i] = &ctxConn{cn: newConn(s, ls)}
		}
		closed := make([]bool, clients)
		var ready []gnet.Conn
		var who []int
		for round := 0; ; round++ {
			ready, who = ready[:0], who[:0]
			for c, sc := range scripts {
				if round < len(sc) && !closed[c] {
					cs[c].in.WriteString(sc[round])
					ready, who = append(ready, cs[c]), append(who, c)
				}
			}
			if len(ready) == 0 {
				break
			}
			actions := make([]gnet.Action, len(ready))
			if batched {
				s.OnTrafficBatch(ready, actions)
			} else {
				for i, c := range ready {
					actions[i] = s.OnTraffic(c)
				}
			}
			for i, a := range actions {
				closed[who[i]] = closed[who[i]] || a == gnet.Close
			}
		}
		out := make([]string, clients)
		for i, c := range cs {
			// Granted lease tokens are random; whether one was granted (rather than a hot miss, token 1) is
			// what must match.
			out[i] = grantedToken.ReplaceAllString(c.out.String(), "LVALUE $1 granted ")
		}
		return out
	}
	want, got := run(false), run(true)
	if !strings.Contains(want[0], "VALUE k") || !strings.Contains(want[1], "CLIENT_ERROR bad data chunk") ||
		!strings.Contains(want[6], "\x81\x00\x00\x00\x04") { // a binary get hit: extras of 4
		t.Fatal("the scripts do not exercise hits and refusals")
	}
	for c := range want {
		if got[c] != want[c] {
			i := 0
			for i < len(got[c]) && i < len(want[c]) && got[c][i] == want[c][i] {
				i++
			}
			t.Fatalf("client %d: batched replies differ at byte %d:\n%q\nwant\n%q", c, i,
				got[c][i:min(len(got[c]), i+200)], want[c][i:min(len(want[c]), i+200)])
		}
	}
}

// binaryBatchRequest is a binary client's request for TestTrafficBatchMatchesOneByOne: mostly gets of the
// forms prefetchFirst takes, some sets and deletes, a miss, and requests it must leave alone.
func binaryBatchRequest(rng *rand.Rand, c, i int, k string) string {
	switch r := rng.IntN(10); {
	case r < 3:
		return bpkt(bp.OpGet, k, "", "", 0)
	case r == 3:
		return bpkt(bp.OpGetK, k, "", "", 0)
	case r == 4:
		return bpkt(bp.OpGetKQ, k, "", "", 0) + bpkt(bp.OpNoop, "", "", "", 0)
	case r < 7:
		return bpkt(bp.OpSet, k, setExt(uint32(c), 0), fmt.Sprintf("b%di%d", c, i), 0)
	case r == 7:
		return bpkt(bp.OpDelete, k, "", "", 0)
	case r == 8:
		return bpkt(bp.OpGatK, k, u32(100), "", 0)
	}
	return bpkt(bp.OpGet, "nope", "", "", 0)
}

// A poll's worth of one-request connections is served without allocating.
func TestTrafficBatchAllocatesNothing(t *testing.T) {
	s := newTestServer(t)
	var cs []gnet.Conn
	var fcs []*ctxConn
	for i := range 16 {
		c := &ctxConn{cn: newConn(s, nil)}
		c.in.WriteString(fmt.Sprintf("set k%d 0 0 5\r\nhello\r\n", i))
		cs, fcs = append(cs, c), append(fcs, c)
	}
	actions := make([]gnet.Action, len(cs))
	s.OnTrafficBatch(cs, actions)
	reqs := make([]string, len(fcs))
	for i := range reqs {
		reqs[i] = fmt.Sprintf("get k%d\r\n", i)
		if i%4 == 0 {
			reqs[i] = fmt.Sprintf("set k%d 0 0 5\r\nhello\r\n", i)
		}
	}
	serve := func() {
		for i, c := range fcs {
			c.out.Reset()
			c.in.WriteString(reqs[i])
		}
		s.OnTrafficBatch(cs, actions)
	}
	serve()
	if a := testing.AllocsPerRun(200, serve); a != 0 {
		t.Errorf("%.1f allocations per batch", a)
	}
}

// BenchmarkTrafficBatch serves 16 connections holding one get each, for keys spread over far more memory
// than the CPU caches hold, with OnTrafficBatch ("batched") and with OnTraffic one connection after the
// other ("one-by-one"). ns/op is per request.
func BenchmarkTrafficBatch(b *testing.B) {
	const conns, keys = 16, 1 << 20
	s := newTestServer(b)
	fill := &ctxConn{cn: newConn(s, nil)}
	value := strings.Repeat("v", 100)
	for i := range keys {
		fill.in.WriteString(fmt.Sprintf("set key:%08d 0 0 100 noreply\r\n%s\r\n", i, value))
		if i%1024 == 1023 {
			s.OnTraffic(fill)
		}
	}
	rng := rand.New(rand.NewPCG(7, 8))
	req := []byte("get key:00000000\r\n")
	get := func() []byte { // a random key's get, written over the last one's
		for i, k := len("get key:")+7, rng.IntN(keys); i >= len("get key:"); i, k = i-1, k/10 {
			req[i] = byte('0' + k%10)
		}
		return req
	}
	cs := make([]gnet.Conn, conns)
	fcs := make([]*ctxConn, conns)
	for i := range cs {
		fcs[i] = &ctxConn{cn: newConn(s, nil)}
		cs[i] = fcs[i]
	}
	actions := make([]gnet.Action, conns)
	for _, batched := range []bool{true, false} {
		name := map[bool]string{true: "batched", false: "one-by-one"}[batched]
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				for _, c := range fcs {
					c.out.Reset()
					c.in.Write(get())
				}
				if batched {
					s.OnTrafficBatch(cs, actions)
				} else {
					for i, c := range cs {
						actions[i] = s.OnTraffic(c)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*conns), "ns/request")
		})
	}
}
