package integration

import "testing"

// TestDifferentialFlushAndExpiry covers what depends on the wall clock or
// empties the whole cache: flush_all (immediate and delayed) and relative
// expiry. Each case gets its own pair of daemons so that a flush cannot touch
// another case, and both daemons run concurrently so that pauses are paid
// once. memcached's clock ticks once a second, so checks are placed well
// clear of the boundaries (an item with exptime 1 may live up to ~2 s).
func TestDifferentialFlushAndExpiry(t *testing.T) {
	cases := []diffCase{
		{name: "flush_all variants", steps: one("set $ka 0 0 1\r\na\r\nflush_all\r\nget $ka\r\n" +
			"set $kb 0 0 1\r\nb\r\nflush_all noreply\r\nget $kb\r\n" +
			"set $kc 0 0 1\r\nc\r\nflush_all 0\r\nget $kc\r\n" +
			"set $kd 0 0 1\r\nd\r\nflush_all 0 noreply\r\nget $kd\r\n" +
			"flush_all x\r\nflush_all 1 2 3\r\nFLUSH_ALL\r\nflush_all noreply extra\r\nset $ke 0 0 1\r\ne\r\nget $ke\r\n")},
		// exptime 2 and flush delay 3: an exptime of 1 (a delay of 2: flush_all acts a second early, as memcached's
		// does) can be over at the server clock's next tick, before the next request of the same write.
		{name: "delayed flush_all", wholeOnly: true, steps: []string{
			"set $ka 0 0 1\r\na\r\nflush_all 3\r\nget $ka\r\nset $kb 0 0 1\r\nb\r\n",
			sleepStep + "3500ms",
			"get $ka $kb\r\nset $kc 0 0 1\r\nc\r\nget $kc\r\n",
		}},
		{name: "delayed flush_all noreply", wholeOnly: true, steps: []string{
			"set $ka 0 0 1\r\na\r\nflush_all 1 noreply\r\nget $ka\r\n",
			sleepStep + "3s",
			"get $ka\r\n",
		}},
		// exptime 2: see "delayed flush_all".
		{name: "relative expiry touch gat", wholeOnly: true, steps: []string{
			"set $ka 0 2 1\r\na\r\nset $kb 0 2 1\r\nb\r\nset $kc 0 2 1\r\nc\r\nset $kd 0 100 1\r\nd\r\nset $ke 0 100 1\r\ne\r\n" +
				"touch $kb 100\r\ngat 100 $kc\r\ntouch $kd 2\r\ngat 2 $ke\r\nget $ka $kb $kc $kd $ke\r\n",
			sleepStep + "3s",
			"get $ka $kb $kc $kd $ke\r\nadd $ka 0 0 1\r\nA\r\nincr $kd 1\r\n",
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			parallelWaiting(t)
			mc, lc := startPair(t)
			runDifferential(t, mc, lc, []diffCase{c})
		})
	}
}
