package integration

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The contract of doc/leases.md, rule by rule, as scripted exchanges with exact expected bytes.
//
// A case is a list of steps, each sent on one of a few connections of its own, followed by memcached's
// no-op `mn` so the whole reply is known to have arrived. Expected replies are templates:
//
//	$k     the case's key prefix (so cases run in parallel on one daemon)
//	$T<n>  a lease token: bound at its first appearance in a reply, which must then be a valid grant
//	       (rule 1: >= 2, not mcrouter's prefix) never seen before in this test (unique per run);
//	       later appearances, in replies or in commands, mean that same token
//	$N<n>  any number that is not a token (a CAS unique), bound the same way but not checked
//
// The hot-miss token is written literally as 1.

// Windows the contract tests run the daemon with: short, so the timing rules cost a few seconds each, and
// long enough that a check inside a window has a second to spare on a loaded machine.
const (
	contractLeaseWindow = 2 * time.Second
	contractStaleWindow = 3 * time.Second
	// clockResolution is the granularity of item exptimes and of the stale window's end: a deadline of
	// "now + n s" falls anywhere in (n-1, n] real seconds.
	clockResolution = time.Second
	// timingSlack covers scheduling on a loaded machine (and the -race build) around a deadline.
	timingSlack = 300 * time.Millisecond
	// pollGoneTimeout bounds waiting for an item to expire.
	pollGoneTimeout = 3 * time.Second
	// pollInterval is the pause between two polls of an expiring item.
	pollInterval = 20 * time.Millisecond
	// contractConns is how many connections each case may use.
	contractConns = 3
)

// leaseDaemonArgs are the flags the contract tests start leasecached with.
func leaseDaemonArgs() []string {
	return []string{"--lease-window", contractLeaseWindow.String(), "--stale-window", contractStaleWindow.String()}
}

// leaseStep is one exchange of a case.
type leaseStep struct {
	conn  int           // which of the case's connections sends it
	sleep time.Duration // pause before sending
	// gone, when set, polls `get <gone>` until it misses (bounded by pollGoneTimeout) before sending.
	gone string
	send string // command bytes (template)
	want string // the exact reply (template)
}

type leaseCase struct {
	name  string
	steps []leaseStep
}

// on is a step on connection 0.
func on(send, want string) leaseStep { return leaseStep{send: send, want: want} }

// onConn is a step on another connection.
func onConn(conn int, send, want string) leaseStep {
	return leaseStep{conn: conn, send: send, want: want}
}

// Reply fragments the cases are written with.
const (
	stored    = "STORED\r\n"
	notStored = "NOT_STORED\r\n"
	notFound  = "NOT_FOUND\r\n"
	end       = "END\r\n"
)

// lget is the lease-get command for the given keys.
func lget(keys ...string) string { return "lease-get " + strings.Join(keys, " ") + "\r\n" }

// lset is a lease-set of data with token tok (a literal or a $T placeholder).
func lset(key, tok string, flags, exptime int, data string) string {
	return fmt.Sprintf("lease-set %s %s %d %d %d\r\n%s\r\n", key, tok, flags, exptime, len(data), data)
}

// setCmd is a classic set.
func setCmd(key string, flags, exptime int, data string) string {
	return fmt.Sprintf("set %s %d %d %d\r\n%s\r\n", key, flags, exptime, len(data), data)
}

// valueBlock is a VALUE block.
func valueBlock(key string, flags int, data string) string {
	return fmt.Sprintf("VALUE %s %d %d\r\n%s\r\n", key, flags, len(data), data)
}

// lvalue is an LVALUE block carrying the stale value data with flags (empty data: no stale value).
func lvalue(key, tok string, flags int, data string) string {
	return fmt.Sprintf("LVALUE %s %s %d %d\r\n%s\r\n", key, tok, flags, len(data), data)
}

// tokenRegistry remembers every token granted during one test, to check rule 1's uniqueness across
// cases, connections and keys.
type tokenRegistry struct {
	mu   sync.Mutex
	seen map[uint64]string
}

func newTokenRegistry() *tokenRegistry { return &tokenRegistry{seen: make(map[uint64]string)} }

// claim records tok as granted to where; it fails if the token is not a valid grant or was granted before.
func (r *tokenRegistry) claim(tok uint64, where string) error {
	if err := checkGrantToken(tok); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if prev, ok := r.seen[tok]; ok {
		return fmt.Errorf("token %d granted twice: %s and %s", tok, prev, where)
	}
	r.seen[tok] = where
	return nil
}

var tokenPlaceholder = regexp.MustCompile(`\$[TN][0-9]+`)

// matchReply matches got against the template want, binding new $T placeholders in vars.
func matchReply(got, want string, vars map[string]string, reg *tokenRegistry, where string) error {
	names := tokenPlaceholder.FindAllString(want, -1)
	lits := tokenPlaceholder.Split(want, -1)
	var pat strings.Builder
	pat.WriteString("^")
	for i, lit := range lits {
		pat.WriteString(regexp.QuoteMeta(lit))
		if i < len(names) {
			pat.WriteString(`([0-9]+)`)
		}
	}
	pat.WriteString("$")
	m := regexp.MustCompile(pat.String()).FindStringSubmatch(got)
	if m == nil {
		return fmt.Errorf("reply %q does not match %q", got, want)
	}
	for i, name := range names {
		val := m[i+1]
		if bound, ok := vars[name]; ok {
			if val != bound {
				return fmt.Errorf("reply %q: %s is %s, want the token bound earlier, %s", got, name, val, bound)
			}
			continue
		}
		vars[name] = val
		if name[1] == 'N' {
			continue
		}
		tok, err := strconv.ParseUint(val, 10, 64)
		if err != nil {
			return fmt.Errorf("reply %q: %s: %w", got, name, err)
		}
		if err := reg.claim(tok, where); err != nil {
			return fmt.Errorf("reply %q: %s: %w", got, name, err)
		}
	}
	return nil
}

// expandSend fills $k and the bound $T placeholders of a command.
func expandSend(tmpl, prefix string, vars map[string]string) (string, error) {
	var missing string
	out := tokenPlaceholder.ReplaceAllStringFunc(tmpl, func(name string) string {
		v, ok := vars[name]
		if !ok {
			missing = name
		}
		return v
	})
	if missing != "" {
		return "", fmt.Errorf("command %q uses %s before a reply bound it (test bug)", tmpl, missing)
	}
	return strings.ReplaceAll(out, "$k", prefix), nil
}

// runLeaseCases runs every case as a parallel subtest against d, each with its own key prefix.
func runLeaseCases(t *testing.T, d *daemon, reg *tokenRegistry, cases []leaseCase) {
	t.Helper()
	for i, tc := range cases {
		prefix := fmt.Sprintf("L%03d_", i)
		t.Run(tc.name, func(t *testing.T) {
			parallelWaiting(t)
			runLeaseCase(t, d, reg, tc, prefix)
		})
	}
}

func runLeaseCase(t *testing.T, d *daemon, reg *tokenRegistry, tc leaseCase, prefix string) {
	var conns [contractConns]*rawConn
	for i := range conns {
		conns[i] = dialRaw(t, d)
	}
	vars := make(map[string]string)
	for i, st := range tc.steps {
		if st.sleep > 0 {
			time.Sleep(st.sleep)
		}
		if st.gone != "" {
			waitGone(t, conns[st.conn], strings.ReplaceAll(st.gone, "$k", prefix))
		}
		send, err := expandSend(st.send, prefix, vars)
		if err != nil {
			t.Fatal(err)
		}
		rep := conns[st.conn].exchange(append([]byte(send), sentinelCmd...), wholeWrite, sentinelReply, defaultReplyTimeout)
		if rep.closed || rep.timedOut || !strings.HasSuffix(string(rep.data), string(sentinelReply)) {
			t.Fatalf("step %d %q: no complete reply (closed %v, timed out %v): %q", i, send, rep.closed, rep.timedOut, rep.data)
		}
		got := strings.TrimSuffix(string(rep.data), string(sentinelReply))
		want := strings.ReplaceAll(st.want, "$k", prefix)
		where := fmt.Sprintf("%s step %d", tc.name, i)
		if err := matchReply(got, want, vars, reg, where); err != nil {
			t.Fatalf("step %d (conn %d) %q: %v", i, st.conn, send, err)
		}
	}
}

// waitGone polls get until key misses: the way to catch the moment an item expires at 1-s resolution.
func waitGone(t *testing.T, rc *rawConn, key string) {
	t.Helper()
	deadline := time.Now().Add(pollGoneTimeout)
	for time.Now().Before(deadline) {
		rep := rc.exchange([]byte("get "+key+"\r\n"), wholeWrite, []byte(end), defaultReplyTimeout)
		if string(rep.data) == end {
			return
		}
		if rep.closed || rep.timedOut {
			t.Fatalf("poll get %s: closed %v, timed out %v: %q", key, rep.closed, rep.timedOut, rep.data)
		}
		time.Sleep(pollInterval)
	}
	t.Fatalf("%s did not expire within %v", key, pollGoneTimeout)
}

// TestLeaseContract runs every rule of leases.md that one daemon can host concurrently (flush_all, which
// touches every key, has its own test below).
func TestLeaseContract(t *testing.T) {
	parallelWaiting(t)
	requireLeases(t)
	d := startLeasecached(t, leaseDaemonArgs()...)
	reg := newTokenRegistry()
	cases := append(contractCases(), uniqueTokenCase())
	cases = append(cases, invalidationCases()...)
	cases = append(cases, timingCases()...)
	runLeaseCases(t, d, reg, cases)
}

// contractCases are the reply forms and the rules that need no waiting.
func contractCases() []leaseCase {
	return []leaseCase{
		{"hit is a VALUE block like get's", []leaseStep{
			on(setCmd("$ka", 7, 0, "hi"), stored),
			on(lget("$ka"), valueBlock("$ka", 7, "hi")+end),
			on(lget("$ka"), valueBlock("$ka", 7, "hi")+end), // a hit takes no lease
		}},
		{"miss grants a lease: LVALUE with a token >= 2 and an empty value", []leaseStep{
			on(lget("$ka"), lvalue("$ka", "$T1", 0, "")+end),
		}},
		{"hot miss (token 1) for everyone during the window, the holder included", []leaseStep{
			on(lget("$ka"), lvalue("$ka", "$T1", 0, "")+end),
			onConn(1, lget("$ka"), lvalue("$ka", "1", 0, "")+end),
			onConn(2, lget("$ka"), lvalue("$ka", "1", 0, "")+end),
			on(lget("$ka"), lvalue("$ka", "1", 0, "")+end),
			onConn(1, "get $ka\r\n", end), // a lease-get miss is not a store
		}},
		{"lease-set with the lease stores like set; the token is then consumed", []leaseStep{
			on(lget("$ka"), lvalue("$ka", "$T1", 0, "")+end),
			onConn(1, lset("$ka", "$T1", 5, 0, "abc"), stored), // any connection may present the token
			on("get $ka\r\n", valueBlock("$ka", 5, "abc")+end),
			on(lset("$ka", "$T1", 6, 0, "xyz"), notStored),
			on("get $ka\r\n", valueBlock("$ka", 5, "abc")+end),
			on(lget("$ka"), valueBlock("$ka", 5, "abc")+end),
		}},
		{"lease-set with tokens never issued: NOT_STORED, cache unchanged", []leaseStep{
			on(lset("$ka", "0", 0, 0, "v"), notStored),
			on(lset("$ka", "1", 0, 0, "v"), notStored),
			on(lset("$ka", "12345", 0, 0, "v"), notStored),
			on(lset("$ka", "18446744073709551615", 0, 0, "v"), notStored),
			on("get $ka\r\n", end),
			on(setCmd("$kb", 1, 0, "old"), stored),
			on(lset("$kb", "7", 0, 0, "new"), notStored),
			on("get $kb\r\n", valueBlock("$kb", 1, "old")+end),
		}},
		{"a refused lease-set leaves the outstanding lease valid", []leaseStep{
			on(lget("$ka"), lvalue("$ka", "$T1", 0, "")+end),
			onConn(1, lset("$ka", "1", 0, 0, "hot"), notStored),
			onConn(1, lset("$ka", "2", 0, 0, "guess"), notStored),
			on(lset("$ka", "$T1", 0, 0, "mine"), stored),
			on("get $ka\r\n", valueBlock("$ka", 0, "mine")+end),
		}},
		{"a token is bound to its key", []leaseStep{
			on(lget("$ka", "$kb"), lvalue("$ka", "$T1", 0, "")+lvalue("$kb", "$T2", 0, "")+end),
			on(lset("$kb", "$T1", 0, 0, "swap"), notStored),
			on(lset("$ka", "$T2", 0, 0, "swap"), notStored),
			on(lset("$ka", "$T1", 0, 0, "a"), stored),
			on(lset("$kb", "$T2", 0, 0, "b"), stored),
			on("get $ka $kb\r\n", valueBlock("$ka", 0, "a")+valueBlock("$kb", 0, "b")+end),
		}},
		{"multi-key lease-get answers in request order, one END", []leaseStep{
			on(setCmd("$ka", 1, 0, "A"), stored),
			on(setCmd("$kc", 3, 0, "CC"), stored),
			on(lget("$kb", "$ka", "$kc", "$kd", "$kb", "$ka"),
				lvalue("$kb", "$T1", 0, "")+valueBlock("$ka", 1, "A")+valueBlock("$kc", 3, "CC")+
					lvalue("$kd", "$T2", 0, "")+lvalue("$kb", "1", 0, "")+valueBlock("$ka", 1, "A")+end),
		}},
		{"lease-set noreply: silent when stored and when refused", []leaseStep{
			on(lget("$ka"), lvalue("$ka", "$T1", 0, "")+end),
			on("lease-set $ka $T1 4 0 2 noreply\r\nhi\r\nget $ka\r\n", valueBlock("$ka", 4, "hi")+end),
			on("lease-set $ka $T1 4 0 2 noreply\r\nzz\r\nget $ka\r\n", valueBlock("$ka", 4, "hi")+end),
			on("lease-set $kb 99 0 0 2 noreply\r\nzz\r\nget $kb\r\n", end),
		}},
		{"an oversized lease-set is refused like set's and its data swallowed", []leaseStep{
			on(lget("$ka"), lvalue("$ka", "$T1", 0, "")+end),
			on(lset("$ka", "$T1", 0, 0, strings.Repeat("z", leaseSetTooLarge)), "SERVER_ERROR object too large for cache\r\n"),
			on("get $ka\r\n", end),
		}},
		{"lease-set honours flags and exptime like set", []leaseStep{
			on(lget("$ka"), lvalue("$ka", "$T1", 0, "")+end),
			on(lset("$ka", "$T1", 4294967295, 100, "big flags"), stored),
			on("gets $ka\r\n", "VALUE $ka 4294967295 9 $N1\r\nbig flags\r\n"+end),
			on(lget("$kb"), lvalue("$kb", "$T2", 0, "")+end),
			on(lset("$kb", "$T2", 0, -1, "expired"), stored),
			on("get $kb\r\n", end),
		}},
		{"stale value after delete, in both LVALUE forms", []leaseStep{
			on(setCmd("$ka", 9, 0, "hello"), stored),
			on("delete $ka\r\n", "DELETED\r\n"),
			on(lget("$ka"), lvalue("$ka", "$T1", 9, "hello")+end),
			onConn(1, lget("$ka"), lvalue("$ka", "1", 9, "hello")+end),
			onConn(2, lget("$ka", "$ka"), lvalue("$ka", "1", 9, "hello")+lvalue("$ka", "1", 9, "hello")+end),
			on(lset("$ka", "$T1", 2, 0, "fresh"), stored),
			onConn(1, lget("$ka"), valueBlock("$ka", 2, "fresh")+end),
		}},
		{"stale value is never a hit for classic commands", []leaseStep{
			on(setCmd("$ka", 9, 0, "hello"), stored),
			on("delete $ka\r\n", "DELETED\r\n"),
			on("get $ka\r\n", end),
			on("gets $ka\r\n", end),
			on("gat 100 $ka\r\n", end),
			on("gats 100 $ka\r\n", end),
			on("touch $ka 100\r\n", notFound),
			on("incr $ka 1\r\n", notFound),
			on("delete $ka\r\n", notFound),
			on(lget("$ka"), lvalue("$ka", "$T1", 9, "hello")+end), // still kept: none of these revived or stored it
			on("get $ka\r\n", end),
		}},
		{"stale value is never a hit for meta mg", []leaseStep{
			on(setCmd("$ka", 9, 0, "hello"), stored),
			on("delete $ka\r\n", "DELETED\r\n"),
			on("mg $ka v\r\n", "EN\r\n"),
			on("mg $ka s v f t\r\n", "EN\r\n"),
			on(lget("$ka"), lvalue("$ka", "$T1", 9, "hello")+end),
		}},
		{"a store replaces the stale value", []leaseStep{
			on(setCmd("$ka", 1, 0, "one"), stored),
			on("delete $ka\r\n", "DELETED\r\n"),
			on(setCmd("$ka", 2, 0, "two"), stored),
			on(lget("$ka"), valueBlock("$ka", 2, "two")+end),
			on("delete $ka\r\n", "DELETED\r\n"),
			on(lget("$ka"), lvalue("$ka", "$T1", 2, "two")+end),
		}},
		{"add and replace do not see the stale value", []leaseStep{
			on(setCmd("$ka", 1, 0, "one"), stored),
			on("delete $ka\r\n", "DELETED\r\n"),
			on("replace $ka 0 0 1\r\nr\r\n", notStored),
			on("add $ka 3 0 1\r\na\r\n", stored),
			on(lget("$ka"), valueBlock("$ka", 3, "a")+end),
		}},
	}
}

// uniqueTokenCase grants leases on many keys in one request: every token must be a distinct valid grant
// (the registry also checks them against every other case's tokens).
func uniqueTokenCase() leaseCase {
	const keys = 64
	var names []string
	var want strings.Builder
	for i := 0; i < keys; i++ {
		k := fmt.Sprintf("$k%d", i)
		names = append(names, k)
		want.WriteString(lvalue(k, fmt.Sprintf("$T%d", i+1), 0, ""))
	}
	want.WriteString(end)
	return leaseCase{"tokens of many grants are distinct valid grants", []leaseStep{
		on(lget(names...), want.String()),
	}}
}

// leaseCommand is a command run while the key has an outstanding lease $T1 and no value.
type leaseCommand struct {
	name        string
	cmd         string
	reply       string
	invalidates bool // rule 3
	storesV     bool // leaves the fresh value "v" with flags 0
}

// leaseCommands lists every command of rule 3 and the ones it exempts (touch, gat) or does not name.
// Every writer invalidates whatever its outcome: the writer changed the source of truth, so a fill that
// started before it must not land, even when the key was not cached (the stale-set race's usual shape).
var leaseCommands = []leaseCommand{
	{"delete", "delete $ka\r\n", notFound, true, false},
	{"set", "set $ka 0 0 1\r\nv\r\n", stored, true, true},
	{"add", "add $ka 0 0 1\r\nv\r\n", stored, true, true},
	{"replace", "replace $ka 0 0 1\r\nv\r\n", notStored, true, false},
	{"cas", "cas $ka 0 0 1 1\r\nv\r\n", notFound, true, false},
	{"append", "append $ka 0 0 1\r\nv\r\n", notStored, true, false},
	{"prepend", "prepend $ka 0 0 1\r\nv\r\n", notStored, true, false},
	{"incr", "incr $ka 1\r\n", notFound, true, false},
	{"decr", "decr $ka 1\r\n", notFound, true, false},
	{"lease-set", lset("$ka", "$T1", 0, 0, "v"), stored, true, true},
	{"delete noreply", "delete $ka noreply\r\n", "", true, false},
	{"set noreply", "set $ka 0 0 1 noreply\r\nv\r\n", "", true, true},
	{"meta ms", "ms $ka 1\r\nv\r\n", "HD\r\n", true, true},
	{"meta md", "md $ka\r\n", "NF\r\n", true, false},
	{"meta ma", "ma $ka\r\n", "NF\r\n", true, false},
	{"touch", "touch $ka 100\r\n", notFound, false, false},
	{"gat", "gat 100 $ka\r\n", end, false, false},
	{"gats", "gats 100 $ka\r\n", end, false, false},
	{"get", "get $ka\r\n", end, false, false},
	{"gets", "gets $ka\r\n", end, false, false},
	{"lease-set with a wrong token", lset("$ka", "3", 0, 0, "w"), notStored, false, false},
	{"lease-get (hot miss)", lget("$ka"), "LVALUE $ka 1 $SV" + end, false, false},
}

// invalidationCases runs every leaseCommand against a key with an outstanding lease, once with no value
// and once with a stale value, and checks what happened to the lease: an invalidated token is refused
// and the next lease-get miss grants a new one at once; a surviving token still stores.
func invalidationCases() []leaseCase {
	variants := []struct {
		name  string
		setup []leaseStep
		sv    string // the $SV part of an LVALUE: "<flags> <bytes>\r\n<data>\r\n"
	}{
		{"no value", nil, "0 0\r\n\r\n"},
		{"stale value", []leaseStep{
			on(setCmd("$ka", 3, 0, "stale"), stored),
			on("delete $ka\r\n", "DELETED\r\n"),
		}, "3 5\r\nstale\r\n"},
	}
	var cases []leaseCase
	for _, v := range variants {
		for _, c := range leaseCommands {
			sv := func(s string) string { return strings.ReplaceAll(s, "$SV", v.sv) }
			steps := append([]leaseStep{}, v.setup...)
			steps = append(steps,
				on(lget("$ka"), sv("LVALUE $ka $T1 $SV"+end)),
				onConn(1, c.cmd, sv(c.reply)))
			switch {
			case !c.invalidates:
				steps = append(steps,
					on(lset("$ka", "$T1", 0, 0, "x"), stored),
					on(lget("$ka"), valueBlock("$ka", 0, "x")+end))
			case c.storesV:
				steps = append(steps,
					on(lset("$ka", "$T1", 0, 0, "x"), notStored),
					on(lget("$ka"), valueBlock("$ka", 0, "v")+end))
			default:
				steps = append(steps,
					on(lset("$ka", "$T1", 0, 0, "x"), notStored),
					on(lget("$ka"), sv("LVALUE $ka $T2 $SV"+end)))
			}
			verb := "invalidates"
			if !c.invalidates {
				verb = "keeps"
			}
			cases = append(cases, leaseCase{fmt.Sprintf("%s %s the lease (%s)", c.name, verb, v.name), steps})
		}
	}
	return cases
}

// timingCases are the windows: they sleep, so they run in parallel with everything else.
func timingCases() []leaseCase {
	lapse := contractLeaseWindow + timingSlack
	half := contractLeaseWindow / 2
	// After a delete the stale value lives until now+window on the 1-s clock: at least window-1s, at
	// most window. It is asked for in the middle of the first.
	staleGone := contractStaleWindow + timingSlack
	staleStill := (contractStaleWindow - clockResolution) / 2
	return []leaseCase{
		{"after the lease window lapses a new token is granted and the old one refused", []leaseStep{
			on(lget("$ka"), lvalue("$ka", "$T1", 0, "")+end),
			{conn: 1, sleep: half, send: lget("$ka"), want: lvalue("$ka", "1", 0, "") + end},
			{conn: 1, sleep: lapse - half, send: lget("$ka"), want: lvalue("$ka", "$T2", 0, "") + end},
			on(lset("$ka", "$T1", 0, 0, "late"), notStored),
			onConn(1, lset("$ka", "$T2", 0, 0, "fresh"), stored),
			on("get $ka\r\n", valueBlock("$ka", 0, "fresh")+end),
		}},
		{"a lapsed token is refused even with no newer lease", []leaseStep{
			on(lget("$ka"), lvalue("$ka", "$T1", 0, "")+end),
			{sleep: lapse, send: lset("$ka", "$T1", 0, 0, "late"), want: notStored},
			on("get $ka\r\n", end),
			on(lget("$ka"), lvalue("$ka", "$T2", 0, "")+end),
		}},
		{"stale value after expiry, then gone after the stale window", []leaseStep{
			on(setCmd("$ka", 6, 1, "expiring"), stored),
			{gone: "$ka", send: lget("$ka"), want: lvalue("$ka", "$T1", 6, "expiring") + end},
			onConn(1, lget("$ka"), lvalue("$ka", "1", 6, "expiring")+end),
			onConn(1, "get $ka\r\ngets $ka\r\ngat 0 $ka\r\n", end+end+end),
			// The expired item's stale window ends window seconds after its exptime.
			{sleep: contractStaleWindow + clockResolution + timingSlack, send: lget("$ka"),
				want: lvalue("$ka", "$T2", 0, "") + end},
		}},
		{"stale value after delete lasts for the stale window only", []leaseStep{
			on(setCmd("$ka", 8, 0, "deleted"), stored),
			on("delete $ka\r\n", "DELETED\r\n"),
			{sleep: staleStill, send: lget("$ka"), want: lvalue("$ka", "$T1", 8, "deleted") + end},
			{sleep: staleGone - staleStill, conn: 1, send: lget("$ka"),
				want: lvalue("$ka", "$T2", 0, "") + end},
		}},
	}
}

// TestLeaseFlushAll: flush_all discards every stale value and invalidates every lease (rules 3 and 4).
func TestLeaseFlushAll(t *testing.T) {
	requireLeases(t)
	d := startLeasecached(t, leaseDaemonArgs()...)
	runLeaseCases(t, d, newTokenRegistry(), []leaseCase{
		{"flush_all", []leaseStep{
			on(setCmd("$ka", 1, 0, "stale-a"), stored),
			on("delete $ka\r\n", "DELETED\r\n"),
			on(lget("$kb"), lvalue("$kb", "$T1", 0, "")+end),
			on(setCmd("$kc", 2, 0, "live"), stored),
			onConn(1, "flush_all\r\n", "OK\r\n"),
			on(lset("$kb", "$T1", 0, 0, "late"), notStored),
			on(lget("$ka", "$kb", "$kc"),
				lvalue("$ka", "$T2", 0, "")+lvalue("$kb", "$T3", 0, "")+lvalue("$kc", "$T4", 0, "")+end),
			on(lset("$kb", "$T3", 0, 0, "after"), stored),
			onConn(1, "flush_all noreply\r\n", ""),
			on(lset("$ka", "$T2", 0, 0, "late"), notStored),
			on(lget("$ka", "$kb"), lvalue("$ka", "$T5", 0, "")+lvalue("$kb", "$T6", 0, "")+end),
		}},
	})
}
