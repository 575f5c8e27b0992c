package integration

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"math/rand"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The hostile-input suite (issue 23, item 3). Every probe is a row of a table: a name, the bytes to
// send (script templates with transcript_test.go's placeholders) and how to cut them into writes.
// Each row is sent to memcached 1.6.18 and to leasecached, and the two transcripts must be equal byte
// for byte after the differential tests' normalisation (CAS uniques, VERSION, STAT values, TTLs within
// a second): the same replies, and a close exactly where memcached closes. A reset row sends a
// half-written request, resets the connection (SO_LINGER 0) and then checks the server's state on a
// new connection.
//
// While a group of rows runs, a checker connection per server does a set/get round trip of known keys
// every hostileCheckEvery: every reply must be exact and come within hostileCheckBound.
//
// Rows whose effects are global (flush_all, verbosity, cache_memlimit) run one at a time on a pair of
// their own; every other group shares one pair, the rows running concurrently on their own keys.
//
// Not probed here, deliberately:
//   - request lines over 2048 bytes that are not multi-key fetches and end with a newline: memcached
//     accepts them only when the newline lands in the same read(), so its answer depends on TCP
//     segmentation; leasecached rejects them always (protocol.MaxLineLength). Only the
//     never-ending form, which memcached closes whatever the segmentation, is compared.
//   - gat and gats lines over 2048 bytes: memcached closes the connection when such a line is not
//     complete within one read; leasecached serves them like get lines (protocol.MaxMultiKeyLineLength
//     documents why).
//   - a first byte of 0x80 on a connection: both servers switch to the binary protocol, whose hostile
//     input (headers, declared lengths) is differential_binary_test.go's and TestFuzzDiffBinary's.
//   - stats cachedump and lru_crawler numbers: their replies list slab classes, which differ by
//     design between the two servers.

// Bounds of the suite.
const (
	// hostileCheckEvery is the checker's period.
	hostileCheckEvery = 50 * time.Millisecond
	// hostileCheckBound is the longest a checker round trip may take while probes run.
	hostileCheckBound = time.Second
	// hostileCheckDeadline is how long the checker waits for one reply before calling it an error:
	// past the bound, so that a stall is measured rather than cut short.
	hostileCheckDeadline = 5 * time.Second
	// hostileCheckMaxRounds bounds the checker loop by count (10 minutes of rounds).
	hostileCheckMaxRounds = 12000
	// hostileWorkers is how many rows of a shared group run at once.
	hostileWorkers = 6
	// hostileOpenWait is how long memcached's reply to a row that leaves a request open is read: its
	// closing the connection ends it sooner, waiting that long ends it with <timeout>. leasecached, built
	// with -race when the tests are and sharing the machine with the rest of the suite, gets
	// hostileOpenWaitLC: a late byte of its reply must not read as a different transcript.
	hostileOpenWait   = 300 * time.Millisecond
	hostileOpenWaitLC = time.Second
	// hostileResetSettle is the pause between a half-written request and the reset, so that the server
	// has read what was sent before the RST arrives (Linux discards unread data on a RST).
	hostileResetSettle = 30 * time.Millisecond
	// hostileManyKeys is the key count of the big multi-get rows.
	hostileManyKeys = 10000
	// hostileFloodConns and hostileFloodBurst shape the connect-and-reset flood: that many
	// connections, at most a burst open at once, each reset mid-request.
	hostileFloodConns = 2000
	hostileFloodBurst = 200
	// hostileSlotWait is how long the servers get to notice the flood's resets.
	hostileSlotWait = time.Second
)

// hostileProbe is one row of the suite.
type hostileProbe struct {
	name string
	// steps are script templates sent in order on one connection, each followed by the sentinel.
	// For a reset row they are the check, sent on a new connection after the reset.
	steps []string
	how   sendMode
	// chunk > 0: non-whole modes write pieces of this size (multi-kilobyte rows).
	chunk int
	// open: the row leaves a request unfinished (a line that never ends, a data block still owed)
	// or ends by closing the connection, so no sentinel is sent and each transcript is read until the
	// server closes or for hostileOpenWait (hostileOpenWaitLC for leasecached).
	open bool
	// setup (reset rows) is sent whole, with the sentinel, before the half-written request.
	setup string
	// partial, when set, makes this a reset row: these bytes are sent, then the connection is reset.
	partial string
}

// hostileGroup is a set of rows run against one pair of daemons.
type hostileGroup struct {
	name string
	// sequential: the rows change global state and run one at a time.
	sequential bool
	// allowMiss: the rows empty the cache (flush_all), so the checker accepts a known key's
	// absence; a value it does get must still be exact.
	allowMiss bool
	probes    []hostileProbe
}

// TestHostileInput runs every group of rows against a pair of daemons (-m 64) with a checker on each.
func TestHostileInput(t *testing.T) {
	groups := []hostileGroup{
		{name: "junk", probes: hostileJunkProbes()},
		{name: "numbers", probes: hostileNumberProbes(hostileClassicFields(), hostileMetaFields())},
		{name: "global", sequential: true, allowMiss: true, probes: append(hostileNumberProbes(hostileGlobalFields()),
			hostileProbe{name: "global command shapes", steps: one("verbosity noreply\r\nverbosity\r\nverbosity 1 noreply extra\r\n" +
				"flush_all noreply extra\r\nflush_all 0 0\r\nflush_all  \r\ncache_memlimit\r\ncache_memlimit 64 noreply extra\r\n")})},
		{name: "half-written", probes: hostileHalfWrittenProbes()},
	}
	total := 0
	for _, g := range groups {
		total += len(g.probes)
	}
	t.Logf("hostile suite: %d probes in %d groups, plus the %d-connection reset flood (TestHostileResetFlood)",
		total, len(groups), hostileFloodConns)
	first := 0
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) { runHostileGroup(t, g, first) })
		first += len(g.probes)
	}
}

// runHostileGroup starts a pair and a checker on each, runs the group's rows and checks the checkers.
// first numbers the rows, so that every row of the suite has its own key prefix.
func runHostileGroup(t *testing.T, g hostileGroup, first int) {
	mc, lc := startPair(t, "-m", defaultMemoryMB)
	chk := []*hostileChecker{startHostileChecker(t, mc, g.allowMiss), startHostileChecker(t, lc, g.allowMiss)}
	workers := hostileWorkers
	if g.sequential {
		workers = 1
	}
	rows := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rows {
				runHostileProbe(t, mc, lc, g.probes[i], hostilePrefix(first+i))
			}
		}()
	}
	for i := range g.probes {
		rows <- i
	}
	close(rows)
	wg.Wait()
	for _, c := range chk {
		c.stopAndCheck(t)
	}
}

// hostilePrefix is the $k of row i: keyPrefixLen bytes, unique in the suite.
func hostilePrefix(i int) string {
	p := fmt.Sprintf("h%04d_", i)
	if len(p) != keyPrefixLen {
		panic(fmt.Sprintf("hostile key prefix %q is not %d bytes", p, keyPrefixLen))
	}
	return p
}

// runHostileProbe runs one row against both daemons at once and compares the transcripts. It runs on
// a worker goroutine, so it reports with assert (never require).
func runHostileProbe(t *testing.T, mc, lc *daemon, p hostileProbe, prefix string) {
	var want, got string
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		want = hostileTranscript(mc, p, prefix, hostileOpenWait)
	}()
	got = hostileTranscript(lc, p, prefix, hostileOpenWaitLC)
	wg.Wait()
	where := fmt.Sprintf("probe %q (sent %s)", p.name, p.how)
	if os.Getenv(dumpEnv) != "" {
		t.Logf("%s: memcached %q", where, truncate([]byte(want), 400))
	}
	// A row that does not leave a request open must get memcached's sentinel reply: a row that
	// times out there is a wrong row (and costs the suite a timeout).
	if !p.open && strings.HasSuffix(want, markTimeout) {
		assert.Failf(t, "test bug: memcached did not answer the sentinel; mark the row open", "%s: memcached: %q",
			where, truncate([]byte(want), 300))
	}
	if !sameModuloClock(want, got) {
		assert.Failf(t, "leasecached differs from memcached", "%s\n%s", where, describeDiff(want, got))
	}
}

// hostileTranscript is one daemon's normalised transcript of a row.
func hostileTranscript(d *daemon, p hostileProbe, prefix string, openWait time.Duration) string {
	sr := scriptRun{steps: p.steps, mode: p.how, prefix: prefix, chunk: p.chunk}
	if p.open {
		sr.noSentinel, sr.timeout = true, openWait
	}
	var out []byte
	if p.partial != "" {
		if p.setup != "" {
			out = append(runScript(d, scriptRun{steps: one(p.setup), mode: wholeWrite, prefix: prefix}), "<setup>"...)
		}
		out = append(out, hostileReset(d, []byte(expand(p.partial, prefix, "0", time.Now())), p.how, p.chunk)...)
		sr.mode = wholeWrite
	}
	out = append(out, runScript(d, sr)...)
	return normalizeMeta(normalize(out, prefix), nil)
}

// hostileReset connects, writes partial in the given mode, waits for the server to read it and
// resets the connection. It returns a transcript marker: "<reset>", or what went wrong.
func hostileReset(d *daemon, partial []byte, how sendMode, chunk int) string {
	rc, err := dialRawErr(d)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	rc.fixedChunk = chunk
	defer rc.c.Close()
	if err := rc.write(partial, how, defaultReplyTimeout); err != nil {
		return "<write: " + err.Error() + ">"
	}
	time.Sleep(hostileResetSettle)
	if err := rc.c.(*net.TCPConn).SetLinger(0); err != nil {
		return "<linger: " + err.Error() + ">"
	}
	return "<reset>"
}

// --- the rows ------------------------------------------------------------------------------------

// hostileMode spreads generated rows over the three send modes.
func hostileMode(i int) sendMode { return allModes[i%len(allModes)] }

// hostileJunkProbes: garbage, binary junk, NUL bytes, lone CR and LF, odd keys, key lengths, huge multi-gets.
func hostileJunkProbes() []hostileProbe {
	rows := []hostileProbe{
		{name: "garbage words", steps: one("foo bar baz\r\nhello\r\n$ka\r\n12345\r\n-1\r\n\"quoted\"\r\n")},
		{name: "garbage words bytewise", how: byteAtATime, steps: one("foo bar baz\r\nhello\r\n$ka\r\n12345\r\n")},
		{name: "near-miss verbs", how: randomChunks, steps: one("gets\r\nget_ $ka\r\nsets $ka 0 0 1\r\nx\r\nincrr $ka 1\r\nmgg $ka\r\nm $ka\r\nmz $ka\r\n" +
			"mgv $ka\r\nlease-gett $ka\r\n")},
		{name: "http request", how: randomChunks, steps: one("GET / HTTP/1.1\r\nHost: localhost\r\nUser-Agent: x\r\n\r\n")},
		{name: "telnet negotiation", steps: one("\xff\xfb\x01\xff\xfd\x03\xff\xf4\r\nversion\r\n")},
		{name: "tls client hello", steps: one("\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + strings.Repeat("\x5a", 32) + "\r\n")},
		{name: "nul only line", how: byteAtATime, steps: one("\x00\r\n\x00\x00\n")},
		{name: "nul in verb", steps: one("se\x00t $ka 0 0 1\r\nx\r\nge\x00t $ka\r\nget $ka\r\n")},
		{name: "nul in key set", how: randomChunks, steps: one("set $ka\x00b 0 0 1\r\nx\r\nget $ka\x00b\r\nget $ka\r\n")},
		{name: "nul in key get", steps: one("set $ka 0 0 1\r\nx\r\nget $ka\x00zz\r\nget $kb\x00 $ka\r\ngets $ka \x00 $ka\r\n")},
		{name: "nul in numbers", how: byteAtATime, steps: one("set $ka 0 0 1\x00\r\nx\r\nget $ka\r\nset $kb 0\x00 0 1\r\ny\r\nget $kb\r\n" +
			"set $kc 0 0 1\r\n5\r\nincr $kc 1\x007\r\nget $kc\r\ntouch $kc 1\x00\r\n")},
		{name: "nul in data block", steps: one("set $ka 0 0 3\r\n\x00\x00\x00\r\nget $ka\r\nms $kb 3\r\na\x00b\r\nmg $kb v\r\n")},
		{name: "nul in meta flags", how: randomChunks, steps: one("ms $ka 1 T\x0010\r\nx\r\nmg $ka v\r\nmg $ka v\x00 t\r\nmg $ka\x00 v\r\nms $kb 1 F\x005\r\ny\r\nmg $kb f v\r\n")},
		{name: "nul run", steps: one(strings.Repeat("\x00", 1500) + "\r\nget $ka\r\n")},
		{name: "lone CR line endings", steps: one("get $ka\rget $kb\r\r\nset $ka 0 0 1\rx\r\nget $ka\r\n")},
		{name: "lone CR bytewise", how: byteAtATime, steps: one("version\rversion\r\r\nmg $ka v\r\r\n\r\r\r\n")},
		{name: "lone CR in data block", steps: one("set $ka 0 0 2\r\nx\r\r\nget $ka\r\nset $kb 0 0 1\r\nx\r\rget $kb\r\n")},
		{name: "CR run", how: randomChunks, steps: one(strings.Repeat("\r", 300) + "\nget $ka\r\n")},
		// Written whole: a transcript ends at the first read that ends like the sentinel's reply (MN), and
		// sent in chunks, the row's own mn could be answered before the sentinel was sent (one run in 12).
		{name: "lone LF line endings", steps: one("set $ka 0 0 1\nx\nget $ka\nmg $ka v\nms $kb 1\ny\nmg $kb v\n" +
			"incr $ka 1\ndelete $ka\nget $ka\nmn\n")},
		{name: "lone LF data block", steps: one("set $ka 0 0 1\r\nx\nget $ka\r\nms $kb 1\r\ny\nmg $kb v\r\n")},
		{name: "LF CR", how: byteAtATime, steps: one("get $ka\n\rget $kb\n\r\nversion\n\r\n")},
		{name: "LF run", steps: one(strings.Repeat("\n", 500) + "get $ka\r\n")},
		{name: "get 10000 keys", how: wholeWrite, steps: hostileManyKeySteps("get", "")},
		{name: "get 10000 keys in pieces", how: randomChunks, chunk: 1 << 10, steps: hostileManyKeySteps("get", "")},
		{name: "gets 10000 keys", how: wholeWrite, steps: hostileManyKeySteps("gets", "")},
		{name: "get 10000 keys one too long", how: wholeWrite, steps: hostileManyKeySteps("get", keyOfLen(251))},
		{name: "get with 150 leading spaces", steps: one(strings.Repeat(" ", 150) + "get $ka\r\n")},
		{name: "CR before CRLF in key", how: byteAtATime, steps: one("set $ka\r 0 0 1\r\nx\r\nget $ka\r\r\nget $ka\r\nmg $ka\r v\r\n")},
		{name: "meta with 30 flags", steps: one("ms $ka 1\r\na\r\nmg $ka" + strings.Repeat(" v", 30) + "\r\nmg $ka s t c f h l k O1 P L u v q b2 F1 C1 I J1 D1 R1 N1 T1\r\n" +
			"md $ka" + strings.Repeat(" q", 25) + "\r\nma $ka" + strings.Repeat(" N0", 25) + "\r\nmg $ka v\r\n")},
		{name: "base64 key lengths", how: randomChunks, steps: one("mg " + base64Key(150) + " b v\r\nmg " + base64Key(187) + " b v\r\n" +
			"ms " + base64Key(186) + " 1 b\r\nx\r\nmg " + base64Key(186) + " b v k\r\nmd " + base64Key(186) + " b\r\nmg " + base64Key(186) + " b v\r\n" +
			"mg " + base64Key(0) + " b v\r\nmg = b v\r\n")},
		// Ends in quit: no sentinel after it (open), since a server that closes with the sentinel still
		// unread sends a reset, and a reset can discard replies the client had not read yet.
		{name: "command shapes", open: true, steps: one("touch $ka\r\nincr\r\nmn $ka\r\nme\r\nmn\x00\r\nversion 1 2 3\r\nquit\x00\r\n")},
		// Sent whole: memcached closes once it holds over 2048 bytes without a newline, which split
		// sends may or may not reach before the wait ends.
		{name: "line that never ends", open: true, steps: one("set " + strings.Repeat("z", 3000))},
		{name: "meta line that never ends", open: true, steps: one("mg $ka " + strings.Repeat("v ", 1500))},
		{name: "get line that never ends", open: true, steps: one("get " + strings.Repeat("$kz ", 1000))},
		{name: "data block still owed", open: true, how: randomChunks, steps: one("set $ka 0 0 100\r\n0123456789")},
		{name: "huge data block owed", open: true, steps: one("set $ka 0 0 2147483645\r\n0123456789")},
		{name: "huge ms data block owed", open: true, steps: one("ms $ka 2147483645 T0\r\n0123456789")},
	}
	// Control and high bytes inside keys, every command touching the key.
	for c := 1; c < 256; c++ {
		if c == '\n' || c == ' ' || (c > ' ' && c < 0x7f) || (c > 0x81 && c < 0xfe) {
			continue
		}
		k := "$kc" + string([]byte{byte(c)}) + "z"
		rows = append(rows, hostileProbe{name: fmt.Sprintf("key with byte %#02x", c), how: hostileMode(c),
			steps: one("set " + k + " 3 0 1\r\nx\r\nget " + k + "\r\nappend " + k + " 0 0 1\r\ny\r\nmg " + k + " v f k\r\n" +
				"ma " + k + " N0 J7 v\r\nincr " + k + " 1\r\ndelete " + k + "\r\nget " + k + "\r\nmd " + k + "\r\n")})
	}
	// 250-byte keys work with every command; 251-byte keys fail with every command. Each failing get
	// is its own step: memcached drops replies queued earlier in the same read (differential_test.go).
	for i, c := range hostileKeyedCommands() {
		k250, k251 := keyOfLen(250), keyOfLen(251)
		rows = append(rows,
			hostileProbe{name: "250-byte key " + c, how: hostileMode(i), steps: []string{
				"set " + k250 + " 0 0 1\r\n5\r\n", strings.ReplaceAll(hostileKeyedCommand(c), "KEY", k250), "get " + k250 + "\r\n"}},
			hostileProbe{name: "251-byte key " + c, how: hostileMode(i + 1), steps: []string{
				strings.ReplaceAll(hostileKeyedCommand(c), "KEY", k251), "get $kb\r\n"}},
		)
	}
	// The same with noreply (classic) and q (meta): does the error still come back?
	for i, c := range []string{"set 0 0 1 noreply\r\nx", "add 0 0 1 noreply\r\nx", "cas 0 0 1 1 noreply\r\nx", "incr 1 noreply",
		"decr 1 noreply", "touch 100 noreply", "delete noreply", "mg v q", "ms 1 q\r\nx", "ma q", "md q"} {
		verb, args, _ := strings.Cut(c, " ")
		rows = append(rows, hostileProbe{name: "251-byte key " + c, how: hostileMode(i), steps: []string{
			verb + " " + keyOfLen(251) + " " + args + "\r\n", "get $kb\r\n"}})
	}
	// Seeded binary junk, in lines of at most 1000 bytes so that no line reaches memcached's 2048-byte
	// limit (where its answer would depend on segmentation).
	for seed := int64(1); seed <= 12; seed++ {
		size := []int{64, 700, 3000, 20000}[seed%4]
		rows = append(rows, hostileProbe{name: fmt.Sprintf("binary junk seed %d, %d bytes", seed, size),
			how: hostileMode(int(seed)), chunk: hostileChunk(size), steps: one(hostileJunk(seed, size))})
	}
	return rows
}

// hostileChunk gives multi-kilobyte rows fixed pieces in the non-whole modes (byte by byte would be slow).
func hostileChunk(size int) int {
	if size > 2000 {
		return 97
	}
	return 0
}

// hostileKeyedCommands are the commands that take a key.
func hostileKeyedCommands() []string {
	return []string{"set", "add", "replace", "append", "prepend", "cas", "get", "gets", "gat", "gats",
		"incr", "decr", "touch", "delete", "mg", "ms", "md", "ma", "me"}
}

// hostileKeyedCommand is a script of command c on the key KEY.
func hostileKeyedCommand(c string) string {
	switch c {
	case "set", "add", "replace", "append", "prepend":
		return c + " KEY 0 0 1\r\nx\r\n"
	case "cas":
		return "cas KEY 0 0 1 1\r\nx\r\n"
	case "get", "gets", "delete", "me":
		return c + " KEY\r\n"
	case "gat", "gats":
		return c + " 100 KEY\r\n"
	case "incr", "decr":
		return c + " KEY 1\r\n"
	case "touch":
		return "touch KEY 100\r\n"
	case "mg":
		return "mg KEY v k\r\n"
	case "ms":
		return "ms KEY 1 k\r\nx\r\n"
	case "md":
		return "md KEY q\r\nmd KEY\r\n"
	case "ma":
		return "ma KEY v\r\n"
	}
	panic("hostileKeyedCommand: " + c)
}

// hostileManyKeySteps stores every 100th of hostileManyKeys keys, then fetches all of them with verb in one
// line; odd, when set, replaces the middle key.
func hostileManyKeySteps(verb, odd string) []string {
	var set, get strings.Builder
	get.WriteString(verb)
	for i := 0; i < hostileManyKeys; i++ {
		k := fmt.Sprintf("$k%05d", i)
		if i == hostileManyKeys/2 && odd != "" {
			k = odd
		}
		if i%100 == 0 && k != odd {
			n := len(k) - len(phPrefix) + keyPrefixLen // the value is the expanded key
			fmt.Fprintf(&set, "set %s %d 0 %d\r\n%s\r\n", k, i, n, k)
		}
		get.WriteString(" " + k)
	}
	get.WriteString("\r\n")
	return []string{set.String(), get.String()}
}

// base64Key is the base64 encoding of an n-byte key (a fixed pattern: the suite's rows that use it
// only read and write their own encodings, so sharing them across rows is harmless).
func base64Key(n int) string {
	return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xfb}, n))
}

// hostileJunk is size seeded random bytes ending in "\r\n", with a line end at least every 1000
// bytes, never starting with memcached's binary-protocol magic byte.
func hostileJunk(seed int64, size int) string {
	rng := rand.New(rand.NewSource(seed))
	b := make([]byte, size)
	rng.Read(b)
	if b[0] == 0x80 {
		b[0] = 0x7f
	}
	for i := rng.Intn(1000); i < size; i += 1 + rng.Intn(1000) {
		b[i] = '\n'
	}
	return string(b) + "\r\n"
}

// hostileField is one numeric token of one command. Its steps are templates in which {n} is the
// number under test; small is a valid number for the field, from which the signed, padded and
// 32-bit-wrapped forms are made.
type hostileField struct {
	name  string
	small string
	steps []string
}

// hostileNumbers is what is put into every numeric field: negative, overflowing at 32, 63 and 64
// bits, signed, padded, empty and malformed. The wrapped and padded forms of small read as small on
// memcached (its helpers parse a C long and truncate), so they store what small stores.
func hostileNumbers(small string) []string {
	s, _ := strconv.ParseUint(small, 10, 64)
	return []string{"-1", "-0", "", "1x", "0x1", "+" + small, "\t" + small, small + "\t", "00000000000000000000" + small,
		"2147483647", "2147483648", "-2147483648", "-2147483649", "4294967295", "4294967296", strconv.FormatUint(1<<32+s, 10),
		"9223372036854775807", "9223372036854775808", "-9223372036854775809",
		"18446744073709551615", "18446744073709551616", "99999999999999999999"}
}

// hostileNumberProbes makes one row per field and number, cycling through the send modes.
func hostileNumberProbes(fieldSets ...[]hostileField) []hostileProbe {
	var rows []hostileProbe
	for _, fields := range fieldSets {
		for _, f := range fields {
			for _, n := range hostileNumbers(f.small) {
				steps := make([]string, len(f.steps))
				for i, s := range f.steps {
					steps[i] = strings.ReplaceAll(s, "{n}", n)
				}
				rows = append(rows, hostileProbe{name: fmt.Sprintf("%s = %q", f.name, n), how: hostileMode(len(rows)), steps: steps})
			}
		}
	}
	return rows
}

// hostileClassicFields: every number of every classic command except the global ones.
func hostileClassicFields() []hostileField {
	var fs []hostileField
	for _, verb := range []string{"set", "add", "replace", "append", "prepend"} {
		setup := "set $ka 7 0 1\r\na\r\n"
		if verb == "add" {
			setup = ""
		}
		fs = append(fs,
			hostileField{verb + " flags", "100", one(setup + verb + " $ka {n} 0 1\r\nx\r\nget $ka\r\n")},
			hostileField{verb + " exptime", "100", one(setup + verb + " $ka 0 {n} 1\r\nx\r\nget $ka\r\n")},
			hostileField{verb + " bytes", "1", one(setup + verb + " $ka 0 0 {n}\r\nx\r\nget $ka\r\n")},
			hostileField{verb + " noreply bytes", "1", one(setup + verb + " $ka 0 0 {n} noreply\r\nx\r\nget $ka\r\n")},
			hostileField{verb + " noreply flags exptime", "100", one(setup + verb + " $ka {n} {n} 1 noreply\r\nx\r\nget $ka\r\n")},
		)
	}
	// The cas rows read the item's real CAS first ($cas), so that a good number can store. 1 is the
	// small number: no probed item can have CAS 1, the checker's first set took it.
	casSetup := "set $ka 0 0 1\r\na\r\ngets $ka\r\n"
	fs = append(fs,
		hostileField{"cas flags", "100", []string{casSetup, "cas $ka {n} 0 1 $cas\r\nx\r\ngets $ka\r\n"}},
		hostileField{"cas exptime", "100", []string{casSetup, "cas $ka 0 {n} 1 $cas\r\nx\r\nget $ka\r\n"}},
		hostileField{"cas bytes", "1", []string{casSetup, "cas $ka 0 0 {n} $cas\r\nx\r\nget $ka\r\n"}},
		hostileField{"cas unique", "1", []string{casSetup, "cas $ka 0 0 1 {n}\r\nx\r\nget $ka\r\ncas $kb 0 0 1 {n}\r\ny\r\n"}},
		hostileField{"cas noreply unique", "1", []string{casSetup, "cas $ka 0 0 1 {n} noreply\r\nx\r\nget $ka\r\n"}},
		hostileField{"incr delta", "100", one("set $ka 0 0 2\r\n10\r\nincr $ka {n}\r\nget $ka\r\nincr $kb {n}\r\n")},
		hostileField{"incr noreply delta", "100", one("set $ka 0 0 2\r\n10\r\nincr $ka {n} noreply\r\nget $ka\r\n")},
		hostileField{"touch noreply exptime", "100", one("set $ka 0 0 1\r\na\r\ntouch $ka {n} noreply\r\nget $ka\r\n")},
		hostileField{"decr delta", "100", one("set $ka 0 0 3\r\n500\r\ndecr $ka {n}\r\nget $ka\r\ndecr $kb {n} noreply\r\n")},
		hostileField{"touch exptime", "100", one("set $ka 0 0 1\r\na\r\ntouch $ka {n}\r\nget $ka\r\ntouch $kb {n}\r\n")},
		hostileField{"gat exptime", "100", one("set $ka 0 0 1\r\na\r\ngat {n} $ka $kb\r\nget $ka\r\n")},
		hostileField{"gats exptime", "100", one("set $ka 0 0 1\r\na\r\ngats {n} $ka\r\nget $ka\r\n")},
		hostileField{"delete time", "0", one("set $ka 0 0 1\r\na\r\ndelete $ka {n}\r\nget $ka\r\ndelete $ka {n} noreply\r\nget $ka\r\n")},
	)
	return fs
}

// hostileMetaFields: every numeric token mg, ms, md and ma accept, and E, which 1.6.18 does not.
func hostileMetaFields() []hostileField {
	return []hostileField{
		{"mg T", "100", one("ms $ka 1 T10\r\na\r\nmg $ka v T{n}\r\nmg $ka v\r\n")},
		{"mg N", "100", one("mg $ka N{n} v c\r\nmg $ka v\r\nmg $ka N{n} q\r\n")},
		{"mg R", "100", one("ms $ka 1 T10\r\na\r\nmg $ka R{n} v\r\nmg $ka v\r\nmg $kb R{n}\r\n")},
		{"mg E", "100", one("ms $ka 1\r\na\r\nmg $ka E{n} v\r\nmg $ka v\r\n")},
		{"ms datalen", "1", one("ms $ka {n} T0\r\nx\r\nmg $ka v\r\n")},
		{"ms datalen quiet", "1", one("ms $ka {n} q\r\nx\r\nmg $ka v\r\n")},
		{"ms T", "100", one("ms $ka 1 T{n}\r\nx\r\nmg $ka v\r\n")},
		{"ms F", "100", one("ms $ka 1 F{n}\r\nx\r\nmg $ka f v\r\n")},
		{"ms C", "1", one("ms $ka 1\r\na\r\nms $ka 1 C{n}\r\nx\r\nmg $ka v\r\nms $kb 1 C{n}\r\ny\r\n")},
		{"ms E", "100", one("ms $ka 1 E{n}\r\nx\r\nmg $ka v\r\n")},
		{"ms N", "100", one("ms $ka 1 MA N{n}\r\nx\r\nmg $ka v\r\n")},
		{"ms M", "1", one("ms $ka 1 M{n}\r\nx\r\nmg $ka v\r\n")},
		{"md C", "1", one("ms $ka 1\r\na\r\nmd $ka C{n}\r\nmg $ka v\r\n")},
		{"md T", "100", one("ms $ka 1\r\na\r\nmd $ka I T{n}\r\nmg $ka v\r\n")},
		{"md E", "100", one("ms $ka 1\r\na\r\nmd $ka E{n}\r\nmg $ka v\r\n")},
		{"ma N", "100", one("ma $ka N{n} v\r\nmg $ka v\r\n")},
		{"ma J", "100", one("ma $ka N0 J{n} v\r\nmg $ka v\r\n")},
		{"ma D", "100", one("ms $ka 3\r\n500\r\nma $ka D{n} v\r\nma $ka MD D{n} v\r\nmg $ka v\r\n")},
		{"ma T", "100", one("ms $ka 1\r\n5\r\nma $ka T{n} v\r\nmg $ka v\r\n")},
		{"ma C", "1", one("ms $ka 1\r\n5\r\nma $ka C{n} v\r\nmg $ka v\r\n")},
		{"ma E", "100", one("ms $ka 1\r\n5\r\nma $ka E{n} v\r\nmg $ka v\r\n")},
		{"ma M", "1", one("ms $ka 1\r\n5\r\nma $ka M{n} v\r\n")},
	}
}

// hostileGlobalFields: the commands whose numbers change the whole server.
func hostileGlobalFields() []hostileField {
	return []hostileField{
		{"flush_all delay", "100", one("set $ka 0 0 1\r\na\r\nflush_all {n}\r\nget $ka\r\nflush_all {n} noreply\r\nflush_all 0\r\n")},
		{"verbosity level", "1", one("verbosity {n}\r\nverbosity {n} noreply\r\nverbosity 0\r\n")},
		{"cache_memlimit", "64", one("cache_memlimit {n}\r\ncache_memlimit {n} noreply\r\n")},
	}
}

// hostileHalfWrittenProbes: a request cut short, then a reset; the check shows what the server kept.
func hostileHalfWrittenProbes() []hostileProbe {
	check := one("get $ka $kb\r\nmg $ka v\r\n")
	old := "set $ka 0 0 3\r\nold\r\n"
	partials := []struct{ name, setup, partial string }{
		{"set half line", "", "set $ka 0 0 10"},
		{"set line without data", "", "set $ka 0 0 10\r\n"},
		{"set part of block", "", "set $ka 0 0 10\r\n01234"},
		{"set block without CRLF", "", "set $ka 0 0 10\r\n0123456789"},
		{"set block with CR only", "", "set $ka 0 0 10\r\n0123456789\r"},
		{"set overwrite part of block", old, "set $ka 0 0 10\r\n01234"},
		{"set noreply part of block", old, "set $ka 0 0 10 noreply\r\n012"},
		{"append part of block", old, "append $ka 0 0 5\r\nab"},
		{"prepend block without CRLF", old, "prepend $ka 0 0 2\r\nab"},
		{"cas part of block", old, "cas $ka 0 0 5 1\r\nab"},
		{"ms part of block", old, "ms $ka 10 T0\r\n012"},
		{"ms append half line", old, "ms $ka 2 MA"},
		{"large set part of block", old, "set $ka 0 0 900000\r\n" + strings.Repeat("b", 400000)},
		{"get half line", old, "get $ka $kb"},
		{"get 1000 keys half line", old, "get " + strings.Repeat("$kc ", 1000)},
		{"incr half line", old, "incr $ka 1"},
		{"delete half line", old, "delete $ka"},
		{"md half line", old, "md $ka q"},
		{"flush_all half line", old, "flush_all"},
		{"pipeline then half set", old, "get $ka\r\nmn\r\nset $ka 0 0 4\r\nne"},
		{"garbage half line", old, "\x00\xff\x01garbage"},
	}
	var rows []hostileProbe
	for _, p := range partials {
		for _, how := range allModes {
			chunk := 0
			if len(p.partial) > 2000 {
				chunk = 64 << 10
			}
			rows = append(rows, hostileProbe{name: p.name, how: how, chunk: chunk, setup: p.setup, partial: p.partial, steps: check})
		}
	}
	return rows
}

// --- the reset flood -----------------------------------------------------------------------------

// TestHostileResetFlood opens hostileFloodConns connections, at most hostileFloodBurst at once, to each
// server started with the default -c 1024, and resets each in the middle of a request. Right after, a
// new client must be served, as memcached serves it, and curr_connections must be back where it was
// before the flood within hostileSlotWait: a reset connection frees its -c slot at once, or enough
// floods lock every client out. The checkers run throughout.
//
// Issue 23 (found list, item 5) reported a new client refused with "ERROR Too many open connections"
// after 2,000 resets. Neither check fails at 2f2cf41, with this flood or with 2,000 connections opened
// at once; breaking OnClose's slot release makes both fail. A failure here is in the connection code
// (server/server.go OnOpen/OnClose, third_party/gnet), not in this test.
func TestHostileResetFlood(t *testing.T) {
	mc, lc := startPair(t, "-m", defaultMemoryMB) // no -c: the default, 1024, on both
	chk := []*hostileChecker{startHostileChecker(t, mc, false), startHostileChecker(t, lc, false)}
	daemons := []*daemon{mc, lc}
	stats := []*leaseConn{mustDialLease(t, mc), mustDialLease(t, lc)}
	before := make([]string, len(daemons))
	for i, st := range stats {
		m, err := st.stats()
		require.NoError(t, err, "%s: stats before the flood", daemons[i].name)
		before[i] = m["curr_connections"]
	}
	partials := []string{"set flood 0 0 100\r\n0123456789", "get flood flood2", "ms flood 50 T0\r\nabc", "set flood 0 0"}
	var wg sync.WaitGroup
	floodErr := make([]error, len(daemons))
	for i, d := range daemons {
		wg.Add(1)
		go func() {
			defer wg.Done()
			floodErr[i] = hostileFlood(d, partials)
		}()
	}
	wg.Wait()
	for i, d := range daemons {
		assert.NoError(t, floodErr[i], "%s: flood", d.name)
	}
	// Right after the flood: a new client must be served.
	for _, d := range daemons {
		rc, err := dialRawErr(d)
		require.NoError(t, err)
		rep := rc.exchange([]byte("set flood-after 0 0 2\r\nok\r\nget flood-after\r\nmn\r\n"), wholeWrite, sentinelReply, defaultReplyTimeout)
		rc.c.Close()
		assert.Equal(t, "STORED\r\nVALUE flood-after 0 2\r\nok\r\nEND\r\nMN\r\n", string(rep.data),
			"%s: a new client right after %d connections were reset mid-request (closed %v)", d.name, hostileFloodConns, rep.closed)
	}
	// And every slot the flood took is free again.
	for i, st := range stats {
		var now string
		for deadline := time.Now().Add(hostileSlotWait); ; time.Sleep(10 * time.Millisecond) {
			m, err := st.stats()
			require.NoError(t, err, "%s: stats after the flood", daemons[i].name)
			if now = m["curr_connections"]; now == before[i] || time.Now().After(deadline) {
				break
			}
		}
		assert.Equal(t, before[i], now, "%s: curr_connections before the flood and %v after it", daemons[i].name, hostileSlotWait)
	}
	for _, c := range chk {
		c.stopAndCheck(t)
	}
}

// hostileFlood connects hostileFloodConns times to d in bursts of hostileFloodBurst, writes one of partials on each
// connection and resets them all. Failing to connect is an error: the listener must keep accepting.
func hostileFlood(d *daemon, partials []string) error {
	deadline := time.Now().Add(30 * time.Second)
	for done := 0; done < hostileFloodConns; done += hostileFloodBurst {
		if time.Now().After(deadline) {
			return fmt.Errorf("flood took over 30 s, stopped after %d connections", done)
		}
		conns := make([]*net.TCPConn, 0, hostileFloodBurst)
		for i := 0; i < hostileFloodBurst; i++ {
			c, err := net.DialTimeout("tcp", d.addr, dialTimeout)
			if err != nil {
				for _, c := range conns {
					c.Close()
				}
				return fmt.Errorf("connection %d: %w", done+i, err)
			}
			tc := c.(*net.TCPConn)
			_, _ = tc.Write([]byte(partials[(done+i)%len(partials)]))
			conns = append(conns, tc)
		}
		for _, c := range conns {
			_ = c.SetLinger(0)
			_ = c.Close()
		}
	}
	return nil
}

// --- the checker ---------------------------------------------------------------------------------

// hostileCheckerKeys are the known keys and values the checker reads back in every round: an empty value,
// a short one, one with protocol bytes inside, and one of several socket buffers.
var hostileCheckerKeys = func() map[string][]byte {
	rng := rand.New(rand.NewSource(23))
	big := make([]byte, 70000)
	rng.Read(big)
	return map[string][]byte{
		"hostile:check:empty": {},
		"hostile:check:short": []byte("known value"),
		"hostile:check:crlf":  []byte("END\r\nVALUE x 0 1\r\n\x00\r\n"),
		"hostile:check:big":   big,
	}
}()

// hostileCheckerFlags are the flags every checker key is stored with.
const hostileCheckerFlags = 23

// hostileChecker watches one daemon while probes run: every hostileCheckEvery it gets the known keys and
// sets and gets a per-round key on its own connection.
type hostileChecker struct {
	d         *daemon
	allowMiss bool
	stop      chan struct{}
	done      chan struct{}

	// Written by the checker goroutine, read after done is closed.
	rounds     int
	maxLatency time.Duration
	errs       []string
}

// startHostileChecker stores the known keys and starts the checker goroutine.
func startHostileChecker(t *testing.T, d *daemon, allowMiss bool) *hostileChecker {
	t.Helper()
	c := &hostileChecker{d: d, allowMiss: allowMiss, stop: make(chan struct{}), done: make(chan struct{})}
	conn, err := net.DialTimeout("tcp", d.addr, dialTimeout)
	require.NoError(t, err, "%s: checker dial", d.name)
	r := bufio.NewReader(conn)
	require.NoError(t, c.round(conn, r, -1, true), "%s: checker's first round", d.name)
	go c.run(conn, r)
	t.Cleanup(func() { c.halt() })
	return c
}

func (c *hostileChecker) halt() {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	<-c.done
}

// stopAndCheck stops the checker and asserts that it saw no error and no round slower than the bound.
func (c *hostileChecker) stopAndCheck(t *testing.T) {
	t.Helper()
	c.halt()
	t.Logf("checker on %s: %d rounds, max latency %v (bound %v)", c.d.name, c.rounds, c.maxLatency, hostileCheckBound)
	assert.Empty(t, c.errs, "%s: the checker connection saw errors", c.d.name)
	assert.Less(t, c.maxLatency, hostileCheckBound, "%s: checker latency", c.d.name)
	assert.Positive(t, c.rounds, "%s: the checker did not run", c.d.name)
}

func (c *hostileChecker) run(conn net.Conn, r *bufio.Reader) {
	defer close(c.done)
	defer func() { conn.Close() }()
	tick := time.NewTicker(hostileCheckEvery)
	defer tick.Stop()
	for c.rounds < hostileCheckMaxRounds && len(c.errs) < 10 {
		select {
		case <-c.stop:
			return
		case <-tick.C:
		}
		start := time.Now()
		err := c.round(conn, r, c.rounds, c.allowMiss)
		c.maxLatency = max(c.maxLatency, time.Since(start))
		c.rounds++
		if err != nil {
			c.errs = append(c.errs, fmt.Sprintf("round %d: %v", c.rounds, err))
			conn.Close()
			var derr error
			if conn, derr = net.DialTimeout("tcp", c.d.addr, dialTimeout); derr != nil {
				c.errs = append(c.errs, fmt.Sprintf("round %d: redial: %v", c.rounds, derr))
				return
			}
			r = bufio.NewReader(conn)
		}
	}
}

// round does one round trip: it (re)stores the known keys when setAll, stores the round's key, and
// gets them all; every value must come back exact, and all of them unless allowMiss.
func (c *hostileChecker) round(conn net.Conn, r *bufio.Reader, n int, setAll bool) error {
	want := map[string][]byte{}
	for k, v := range hostileCheckerKeys {
		want[k] = v
	}
	roundKey := "hostile:check:round"
	want[roundKey] = []byte(fmt.Sprintf("round %d of the checker", n))
	var req bytes.Buffer
	sets := 0
	for k, v := range want {
		if setAll || k == roundKey {
			fmt.Fprintf(&req, "set %s %d 0 %d\r\n%s\r\n", k, hostileCheckerFlags, len(v), v)
			sets++
		}
	}
	req.WriteString("get")
	for k := range want {
		req.WriteString(" " + k)
	}
	req.WriteString("\r\n")
	_ = conn.SetDeadline(time.Now().Add(hostileCheckDeadline))
	if _, err := conn.Write(req.Bytes()); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	for i := 0; i < sets; i++ {
		line, err := r.ReadString('\n')
		if err != nil || line != "STORED\r\n" {
			return fmt.Errorf("set: got %q, %v", line, err)
		}
	}
	got, err := readValues(r) // concurrency_test.go's get-reply parser
	if err != nil {
		return fmt.Errorf("get: %w", err)
	}
	for k, v := range got {
		w, ok := want[k]
		switch {
		case !ok:
			return fmt.Errorf("get: unexpected key %q", k)
		case v.flags != hostileCheckerFlags || !bytes.Equal(v.data, w):
			return fmt.Errorf("get %s: flags %d value %q, want flags %d value %q", k, v.flags, truncate(v.data, 60), hostileCheckerFlags, truncate(w, 60))
		}
	}
	if len(got) != len(want) && !c.allowMiss {
		return fmt.Errorf("get: %d of %d known keys came back", len(got), len(want))
	}
	return nil
}
