package integration

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// statsCounters are the generic counters of `stats` whose VALUES must agree
// with memcached's after the same workload on fresh servers: they count
// protocol events, not memory layout. (bytes, slab and LRU figures depend on
// the allocator and are deliberately not compared.)
var statsCounters = []string{
	"cmd_get", "cmd_set", "cmd_flush", "cmd_touch",
	"get_hits", "get_misses", "get_expired", "get_flushed",
	"delete_hits", "delete_misses", "incr_hits", "incr_misses", "decr_hits", "decr_misses",
	"cas_hits", "cas_misses", "cas_badval", "touch_hits", "touch_misses",
	"curr_items", "total_items", "threads", "limit_maxbytes", "max_connections",
}

// statsWorkload touches every counter above at least once. The flush comes
// first and its one item is fetched (so unlinked) at once: memcached reaps
// flushed items it has not seen in a background thread, which would make
// curr_items timing-dependent.
const statsWorkload = "set f 0 0 1\r\nf\r\nflush_all\r\nget f\r\n" +
	"set a 0 0 1\r\n1\r\nset b 0 0 1\r\n2\r\nget a b c\r\ngets a\r\ngat 0 b zz\r\n" +
	"incr n 1\r\nset n 0 0 1\r\n1\r\nincr n 1\r\ndecr n 1\r\ndecr x 1\r\n" +
	"delete a\r\ndelete a\r\ntouch b 100\r\ntouch z 1\r\n" +
	"cas b 0 0 1 999999\r\nx\r\ncas z 0 0 1 1\r\nx\r\nadd b 0 0 1\r\nx\r\n" +
	"set e 0 -1 1\r\ne\r\nget e\r\nset g 0 0 1\r\ng\r\n"

// statsMap parses a stats reply into name -> value.
func statsMap(b []byte) map[string]string {
	m := make(map[string]string)
	for _, line := range strings.Split(string(b), "\r\n") {
		f := strings.SplitN(line, " ", 3)
		if len(f) == 3 && f[0] == "STAT" {
			m[f[1]] = f[2]
		}
	}
	return m
}

// TestStatsCounters compares the generic counters after statsWorkload, and
// again after `stats reset`. memcached runs without its LRU threads: its
// maintainer may reap the expired item e before `get e` reaches it, which
// then counts as a plain miss instead of get_expired.
func TestStatsCounters(t *testing.T) {
	mc, lc := startMemcached(t, noLRUThreads...), startLeasecached(t)
	steps := []struct{ name, script string }{
		{"after workload", statsWorkload + "stats\r\n"},
		{"after stats reset", "stats reset\r\nget b\r\nstats\r\n"},
	}
	conns := []*rawConn{dialRaw(t, mc), dialRaw(t, lc)}
	for _, st := range steps {
		var got [2]map[string]string
		for i, rc := range conns {
			rep := rc.exchange([]byte(st.script+"mn\r\n"), wholeWrite, sentinelReply, defaultReplyTimeout)
			if !bytes.HasSuffix(rep.data, []byte("END\r\nMN\r\n")) {
				t.Fatalf("%s: stats reply does not end with END: %q", st.name, truncate(rep.data, 500))
			}
			got[i] = statsMap(rep.data)
		}
		for _, name := range statsCounters {
			want, ok := got[0][name]
			if !ok {
				t.Errorf("%s: memcached has no stat %q (test bug)", st.name, name)
				continue
			}
			have, ok := got[1][name]
			if !ok {
				have = "<missing>"
			}
			if have != want {
				t.Errorf("%s: STAT %s: memcached %s, leasecached %s", st.name, name, want, have)
			}
		}
	}
}

// TestStatsSubcommands: every stats subcommand memcached answers must be
// answered (not ERROR), and the ones it rejects rejected alike. Only the
// kind of reply is compared: the lines themselves describe each server's
// own memory layout.
func TestStatsSubcommands(t *testing.T) {
	mc, lc := startPair(t)
	subs := []string{"", "settings", "items", "slabs", "sizes", "reset", "conns", "detail dump", "detail on",
		"detail off", "extstore", "bogus", "settings extra"}
	for _, sub := range subs {
		cmd := strings.TrimSpace("stats " + sub)
		t.Run(cmd, func(t *testing.T) {
			kinds := make([]string, 2)
			for i, d := range []*daemon{mc, lc} {
				rep := roundTrip(t, d, cmd+"\r\n", wholeWrite)
				kinds[i] = replyKind(rep.data)
			}
			if kinds[0] != kinds[1] {
				t.Errorf("%q: memcached answers %s, leasecached %s", cmd, kinds[0], kinds[1])
			}
		})
	}
}

// replyKind classifies a stats reply by its shape: error line, a bare
// status line, or a STAT listing.
func replyKind(b []byte) string {
	s := string(b)
	switch {
	case strings.HasPrefix(s, "STAT ") && strings.HasSuffix(s, "END\r\n"):
		return "a STAT listing"
	case s == "END\r\n":
		return "an empty listing (END)"
	}
	return fmt.Sprintf("%q", truncate(b, 80))
}
