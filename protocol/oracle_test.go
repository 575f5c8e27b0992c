package protocol

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasecached/leasecached/internal/testdaemon"
)

// Differential test against the real memcached 1.6.18 (the oracle), skipped when the binary is
// missing or with -short. Each case is sent on a fresh connection followed by "mn\r\n"; the
// expected bytes come from our parser plus a tiny simulated server for a cache that holds
// nothing, so only parser behaviour (errors, framing, silences, swallowing, closing) is compared.

const (
	oracleStartTimeout = 5 * time.Second
	oracleReadTimeout  = 2 * time.Second       // waiting for the expected bytes
	oracleReadGrace    = 20 * time.Millisecond // then, for anything unexpected after them
	oracleMaxCases     = 500
)

// startMemcached starts the oracle on a free loopback port (internal/testdaemon); cleanup kills it.
func startMemcached(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("memcached")
	if err != nil || testing.Short() {
		t.Skip("memcached not available or -short")
	}
	d, err := testdaemon.Start(context.Background(), testdaemon.Spec{Name: "memcached", Path: bin,
		StartTimeout: oracleStartTimeout, Args: func(port int) []string {
			args := []string{"-p", strconv.Itoa(port), "-l", "127.0.0.1", "-U", "0", "-I", "1m"}
			if os.Geteuid() == 0 {
				args = append(args, "-u", "root")
			}
			return args
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Kill(oracleStartTimeout) })
	return d.Addr
}

// simulate returns the bytes a server built on Parser answers for in, against an empty cache,
// whether it closes, and ok=false when in contains a request the simulation cannot answer.
func simulate(in []byte) (out []byte, closed, ok bool) {
	var p Parser
	var req Request
	for len(in) > 0 {
		n, err := p.Parse(in, &req)
		if err != nil {
			e := err.(*Error)
			out = append(out, e.Reply...)
			if e.Close {
				return out, true, true
			}
			if e.Swallow > 0 {
				return nil, false, false // memcached only answers once the swallow completes
			}
			in = in[n:]
			continue
		}
		if n == 0 {
			return nil, false, false // incomplete trailing request
		}
		in = in[n:]
		switch req.Cmd {
		case CmdMetaNoop:
			out = append(out, ReplyMN...)
		case CmdGet, CmdGets, CmdGat, CmdGats:
			out = append(out, ReplyEnd...)
		case CmdDelete, CmdTouch, CmdIncr, CmdDecr:
			if !req.Noreply {
				out = append(out, ReplyNotFound...)
			}
		case CmdVersion:
			out = AppendVersion(out, "1.6.18")
		default:
			return nil, false, false
		}
	}
	return out, false, true
}

func askMemcached(t *testing.T, addr string, in []byte, want int, wantClose bool) ([]byte, bool) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.Close()
	if _, err := c.Write(in); err != nil {
		t.Fatalf("write: %v", err)
	}
	var got []byte
	buf := make([]byte, 64<<10)
	for {
		wait := oracleReadTimeout
		if len(got) >= want && !wantClose {
			wait = oracleReadGrace
		}
		c.SetReadDeadline(time.Now().Add(wait))
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if errors.Is(err, io.EOF) {
			return got, true
		}
		if err != nil { // timeout: nothing more is coming
			return got, false
		}
	}
}

func TestOracleMemcached(t *testing.T) {
	addr := startMemcached(t)
	var inputs []string
	for _, tc := range parseCases {
		if len(tc.in) < 64<<10 {
			inputs = append(inputs, tc.in+"mn\r\n")
		}
	}
	inputs = append(inputs, oracleExtra...)
	checked := 0
	for i, in := range inputs {
		if i >= oracleMaxCases {
			break
		}
		want, wantClose, ok := simulate([]byte(in))
		if !ok || strings.Contains(in, "lease-") { // memcached has no leases
			continue
		}
		got, closed := askMemcached(t, addr, []byte(in), len(want), wantClose)
		if wantClose {
			// memcached may drop replies queued before it closes; only the close is compared.
			if !closed {
				t.Errorf("%q: memcached kept the connection open, we close", trunc(in))
			}
		} else if !bytes.Equal(got, want) || closed {
			t.Errorf("%q:\n memcached %q (closed=%v)\n ours      %q", trunc(in), got, closed, want)
		}
		checked++
	}
	t.Logf("%d inputs compared with memcached", checked)
	if checked < 50 {
		t.Fatalf("only %d inputs were comparable", checked)
	}
}

// oracleExtra are sequences beyond the single-request table.
var oracleExtra = []string{
	"set k 0 0 5\r\nhelloXXmn\r\n",
	"set k 0 0 3\r\nabc\nget k\r\nmn\r\n",
	"set k 0 0 1\r\nab\r\nmn\r\n",
	"set k abc 0 5\r\nhello\r\nmn\r\n",
	"set k abc 0 5 noreply\r\nhello\r\nmn\r\n",
	"ms k 2\r\nabXXmn\r\n",
	"ms k 2 q\r\nabXXmn\r\n",
	"ms k 3 Z\r\nabc\r\nmn\r\n",
	"ms k 2 T T\r\nab\r\nmn\r\n",
	"ms " + key251 + " 2\r\nab\r\nmn\r\n",
	"ms k 2 A B C D E F G H I J K L M N O P Q\r\nab\r\nmn\r\n",
	"cas k 0 0 1 -1\r\na\r\nmn\r\n",
	"get a " + key251 + "\r\nmn\r\n",
	"gat 0\r\nmn\r\n",
	"  get  a   b \r\nmn\r\n",
	"\x00get a\r\nmn\r\n",
	"set k\x00junk 0 0 1\r\na\r\nmn\r\n",
	"delete k 0 0\r\ndelete k x noreply\r\ndelete k noreply\r\nmn\r\n",
	"incr k 1 x\r\nincr k +5\r\nincr k -0\r\nincr k 5x\r\nmn\r\n",
	"touch k 1 x\r\ntouch k x noreply\r\nmn\r\n",
	"verbosity noreply\r\nverbosity x\r\nmn\r\n",
	"flush_all x\r\nflush_all x noreply\r\nflush_all 1 2 3\r\nmn\r\n",
	"mg\r\nme\r\nma\r\nmx\r\nmn\r\n",
	"mg k " + strings.Repeat("A ", 18) + "\r\nmd k " + strings.Repeat("B ", 18) + "\r\nmn\r\n",
	"version x y\r\nmn\r\n",
	strings.Repeat("x", MaxLineLength+1),
	"get" + strings.Repeat("k", 3000),
	strings.Repeat(" ", 101) + "get " + strings.Repeat("k", 3000),
	"set k 0 0 5\thello\r\nXmn\r\n",
	"set k 0 0 5\r\r\nhello\r\nmn\r\n",
	"gets\r\nget\r\nlease-get a\r\nlease-set a 1 0 0 1\r\nx\r\nmn\r\n",
}
