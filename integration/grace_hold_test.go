package integration

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Grace and hold over the wire (doc/leases.md, "Grace and hold"), with unchanged text commands.

// ask sends script on rc and returns the reply up to sentinel ("" : the mn sentinel after the script).
func ask(t *testing.T, rc *rawConn, script string) string {
	t.Helper()
	rep := rc.exchange([]byte(script+"mn\r\n"), wholeWrite, []byte("MN\r\n"), 10*time.Second)
	require.False(t, rep.timedOut || rep.closed, "no full reply to %q: %q", script, rep.data)
	return string(bytes.TrimSuffix(rep.data, []byte("MN\r\n")))
}

// waitExpired stores probe with k's 1 s TTL and waits until it has expired, which k has too.
func waitExpired(t *testing.T, rc *rawConn, probe string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "the item never expired")
		if ask(t, rc, "mg "+probe+" v\r\n") == "EN\r\n" { // mg never sees a grace copy
			return
		}
	}
}

func statsOf(t *testing.T, rc *rawConn) map[string]string {
	t.Helper()
	return statsMap([]byte(ask(t, rc, "stats\r\n")))
}

func TestGraceOverTheWire(t *testing.T) {
	parallelWaiting(t)
	d := startLeasecached(t, "--grace", "30s", "--lease-window", "5s")
	a, b := dialRaw(t, d), dialRaw(t, d)
	require.Equal(t, "STORED\r\nSTORED\r\n", ask(t, a, "set k 7 1 2\r\nv1\r\nset probe 0 1 1\r\np\r\n"))
	waitExpired(t, a, "probe")

	assert.Equal(t, "END\r\n", ask(t, a, "get k k\r\n"), "the first reader refills, for every time it names k")
	assert.Equal(t, "VALUE k 7 2\r\nv1\r\nEND\r\n", ask(t, b, "get k\r\n"), "the others get the grace copy")
	assert.Equal(t, "VALUE k 7 2\r\nv1\r\nEND\r\n", ask(t, b, "gat 100 k\r\n"))
	gets := ask(t, b, "gets k\r\n")
	var cas uint64
	_, err := fmt.Sscanf(gets, "VALUE k 7 2 %d\r\n", &cas)
	require.NoError(t, err, gets)
	assert.Equal(t, "NOT_FOUND\r\n", ask(t, b, fmt.Sprintf("cas k 0 0 1 %d\r\nx\r\n", cas)),
		"a grace copy's CAS unique never makes a cas succeed")
	assert.Equal(t, "NOT_FOUND\r\nNOT_FOUND\r\n", ask(t, b, "touch k 100\r\nincr k 1\r\n"))
	assert.Equal(t, "END\r\n", ask(t, b, "get k\r\n"), "the writes cancelled the refill lease: a new refiller")
	assert.Equal(t, "VALUE k 7 2\r\nv1\r\nEND\r\n", ask(t, a, "get k\r\n"))

	assert.Equal(t, "", ask(t, a, "set k 0 0 2 noreply\r\nv2\r\n"), "a noreply write ends the grace")
	assert.Equal(t, "VALUE k 0 2\r\nv2\r\nEND\r\n", ask(t, b, "get k\r\n"))

	st := statsOf(t, a)
	assert.Equal(t, "4", st["get_grace_hits"])
	assert.Equal(t, "2", st["grace_refills"])
	assert.Equal(t, "0", st["grace_lease_lapses"])
	assert.Contains(t, ask(t, a, "stats settings\r\n"), "STAT grace 30s\r\n")

	// A delete ends the grace for plain reads.
	require.Equal(t, "STORED\r\nSTORED\r\n", ask(t, a, "set d 0 1 1\r\nx\r\nset probe 0 1 1\r\np\r\n"))
	waitExpired(t, a, "probe")
	assert.Equal(t, "END\r\nNOT_FOUND\r\nEND\r\nEND\r\n", ask(t, a, "get d\r\ndelete d\r\nget d\r\nget d\r\n"))
}

// parked reads the start of a parked read's reply: none must come while it is parked.
func assertNoReply(t *testing.T, rc *rawConn, within time.Duration) {
	t.Helper()
	_ = rc.c.SetReadDeadline(time.Now().Add(within))
	buf := make([]byte, 64)
	n, _ := rc.c.Read(buf)
	assert.Zero(t, n, "a parked read was answered: %q", buf[:n])
}

func TestHoldOverTheWire(t *testing.T) {
	parallelWaiting(t)
	d := startLeasecached(t, "--hold", "3s", "--lease-window", "5s")
	refiller, writer := dialRaw(t, d), dialRaw(t, d)
	assert.Equal(t, "END\r\n", ask(t, refiller, "get k k\r\n"), "the first miss refills, for every time it names k")

	// A parked multi-key get, with a request pipelined behind it: answered in order once the refill lands.
	p := dialRaw(t, d)
	require.NoError(t, p.write([]byte("get other k\r\nmn\r\n"), wholeWrite, 5*time.Second))
	waitStat(t, writer, "hold_waiting", "1") // k parked before the set, or the set would not be what fills it
	assert.Equal(t, "STORED\r\n", ask(t, writer, "set k 0 0 2\r\nv1\r\n"))
	rep := readUntil(p.c, []byte("MN\r\n"))
	// "other" missed (and this read took its lease), then k, then the pipelined mn.
	assert.Equal(t, "VALUE k 0 2\r\nv1\r\nEND\r\nMN\r\n", string(rep.data))

	// A delete answers parked reads with a miss at once.
	assert.Equal(t, "DELETED\r\n", ask(t, writer, "delete k\r\n"))
	assert.Equal(t, "END\r\n", ask(t, refiller, "get k\r\n"))
	q := dialRaw(t, d)
	require.NoError(t, q.write([]byte("get k\r\n"), wholeWrite, 5*time.Second))
	waitStat(t, writer, "hold_waiting", "1")
	assertNoReply(t, q, 300*time.Millisecond)
	assert.Equal(t, "NOT_FOUND\r\n", ask(t, writer, "delete k\r\n"))
	_ = q.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	assert.Equal(t, "END\r\n", string(readUntil(q.c, []byte("END\r\n")).data))

	// Nobody refills: a parked read misses when its hold time is up.
	assert.Equal(t, "END\r\n", ask(t, refiller, "get t\r\n"))
	start := time.Now()
	assert.Equal(t, "END\r\n", ask(t, q, "get t\r\n"))
	assert.Greater(t, time.Since(start), time.Second, "the read was held")

	st := statsOf(t, writer)
	assert.Equal(t, "3", st["hold_parked"])
	assert.Equal(t, "1", st["hold_filled"])
	assert.Equal(t, "1", st["hold_timeouts"])
	assert.Equal(t, "1", st["hold_cancelled"])
	assert.Equal(t, "0", st["hold_refused"])
	assert.True(t, strings.Contains(ask(t, writer, "stats settings\r\n"), "STAT hold 3s\r\n"))
}

// A client that closes while parked costs nothing afterwards: its read is dropped at once, long before
// its hold time would be up.
func TestHoldClosedWhileParked(t *testing.T) {
	d := startLeasecached(t, "--hold", "1m", "--lease-window", "5m")
	admin := dialRaw(t, d)
	assert.Equal(t, "END\r\n", ask(t, admin, "get c\r\n"))
	gone := dialRaw(t, d)
	require.NoError(t, gone.write([]byte("get c\r\n"), wholeWrite, 5*time.Second))
	waitStat(t, admin, "hold_waiting", "1")
	require.NoError(t, gone.c.Close())
	waitStat(t, admin, "hold_waiting", "0")
}

// waitStat polls stats until name has value want.
func waitStat(t *testing.T, rc *rawConn, name, want string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); statsOf(t, rc)[name] != want; time.Sleep(20 * time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "stat %s never became %s", name, want)
	}
}

// mg with N shares the key's lease with plain readers when grace or hold is on: while a plain reader
// refills, the item N creates tells its creator that someone else refills (Z, no W); with neither mode
// mg is memcached's (W) whoever holds the lease (doc/leases.md, "The meta protocol").
func TestMetaVivifySharesTheLease(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		expired bool // the key expires first, so that grace has a copy
		want    string
	}{
		{[]string{"--lease-window", "30s"}, false, "VA 0 W\r\n\r\n"},
		{[]string{"--hold", "1s"}, false, "VA 0 Z\r\n\r\n"},
		{[]string{"--grace", "30s"}, true, "VA 0 Z\r\n\r\n"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			d := startLeasecached(t, tc.args...)
			a, b := dialRaw(t, d), dialRaw(t, d)
			if tc.expired {
				require.Equal(t, "STORED\r\nSTORED\r\n", ask(t, a, "set m 0 1 1\r\nx\r\nset probe 0 1 1\r\np\r\n"))
				waitExpired(t, a, "probe")
			}
			assert.Equal(t, "END\r\n", ask(t, a, "get m\r\n"), "a plain reader misses (with a mode: it refills)")
			if !tc.expired && len(tc.args) == 2 && tc.args[0] == "--lease-window" {
				assert.True(t, strings.HasPrefix(ask(t, a, "lease-get m\r\n"), "LVALUE m "), "a lease-get holds the lease")
			}
			assert.Equal(t, tc.want, ask(t, b, "mg m v N30\r\n"))
		})
	}
}
