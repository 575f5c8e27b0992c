package integration

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leasecached/leasecached/internal/testcert"
	"github.com/leasecached/leasecached/internal/testdaemon"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"
)

// Clients that speak memcached's binary protocol (issue 25), unchanged, against memcached 1.6.18 and
// leasecached: scenario scripts as clients_test.go's (clients/README.md), outputs compared line by line
// once CAS values and the servers' addresses are normalised; each with the protocol negotiated, forced
// (-B binary), under -I 4m, and against servers started with SASL (-S); Dalli also over TLS. Raw packets
// compare what the clients cannot show: SASL's edges byte for byte, the -B modes, a SASL reload.
//
// SASL on memcached: Debian's memcached 1.6.18 authenticates through Cyrus SASL, with no password file of
// its own (it is built without --enable-sasl-pwdb). Cyrus reads the service's configuration,
// memcached.conf, from the directory in the environment variable SASL_CONF_PATH (else /etc/sasl), so each
// test writes its own, nothing under /etc:
//
//	<dir>/memcached.conf:  mech_list: plain
//	                       sasldb_path: <dir>/sasldb
//	<dir>/sasldb:          echo -n PASSWORD | saslpasswd2 -p -c -f <dir>/sasldb -a memcached USER
//
// and starts `SASL_CONF_PATH=<dir> memcached -S` (-S makes memcached binary-only: with -B auto or ascii it
// refuses to start). saslpasswd2 is Debian's sasl2-bin; the sasldb plugin that reads the file is
// libsasl2-modules-db. Each user is written for the default realm (the host's name, as saslpasswd2 and
// memcached each find it) and again with `-u <gethostname>`, in case the two names differ. leasecached
// takes the same users from `--sasl-pwdb FILE` (`user:password` lines).

// SASL credentials of the tests: the user the client scripts authenticate as, and others for the raw
// exchanges.
const (
	bcSASLUser     = "alice"
	bcSASLPassword = "s3cret-pw"
	// bcSASLUser2's password has what a `user:password` line must keep: a colon and spaces.
	bcSASLUser2     = "bob"
	bcSASLPassword2 = "p:a ss w"
	// bcSASLUser3's line in leasecached's password file is a bcrypt hash (memcached's sasldb has it plain).
	bcSASLUser3     = "carol"
	bcSASLPassword3 = "hashed-pw"
)

// bcSASLAccount is one user of bcSetupSASL.
type bcSASLAccount struct {
	user, password string
	bcrypt         bool // leasecached's line holds a bcrypt hash of the password
}

var bcSASLAccounts = []bcSASLAccount{
	{bcSASLUser, bcSASLPassword, false},
	{bcSASLUser2, bcSASLPassword2, false},
	{bcSASLUser3, bcSASLPassword3, true},
}

// bcClientScripts are the binary-protocol scenarios (clients/README.md). Each takes host:port, and
// host:port USER PASSWORD for its SASL scenario.
func bcClientScripts() []clientScript {
	py := []string{"/usr/bin/python3", "python3"}
	return []clientScript{
		{"dalli", []string{"ruby"}, []string{"-e", `require "dalli"`},
			"ruby", "dalli_scenario.rb", "apt-get install ruby ruby-dalli"},
		{"pylibmc", py, []string{"-c", "import pylibmc"},
			"python", "pylibmc_scenario.py", "apt-get install python3-pylibmc"},
		{"php-memcached-binary", []string{"php"}, []string{"-r", `exit(class_exists("Memcached") ? 0 : 1);`},
			"php", "binary_scenario.php", "apt-get install php-cli php-memcached"},
		{"php-session", []string{"php"}, []string{"-r", `exit(class_exists("Memcached") ? 0 : 1);`},
			"php", "session_scenario.php", "apt-get install php-cli php-memcached"},
		{"memjs", []string{"node"}, []string{"-e", `require("memjs")`},
			"node", "memjs_scenario.js", "cd integration/clients/node && npm ci (make test-deps does)"},
	}
}

// bcNormalizeRun replaces d's address and port in what a script printed: Dalli and memjs key stats and
// versions by server, and their errors name it.
func bcNormalizeRun(r toolRun, d *daemon) toolRun {
	host, port, ok := strings.Cut(d.addr, ":")
	if !ok { // a unix socket's path
		r.stdout = []byte(strings.ReplaceAll(string(r.stdout), d.addr, "<addr>"))
		r.stderr = []byte(strings.ReplaceAll(string(r.stderr), d.addr, "<addr>"))
		return r
	}
	e := toolEnv{addr: d.addr, host: host, port: port}
	r.stdout, r.stderr = normalizeAddr(r.stdout, e), normalizeAddr(r.stderr, e)
	return r
}

// bcClientJob is one client script's run against a pair of servers.
type bcClientJob struct {
	name  string
	cs    clientScript
	start func(t *testing.T) (mc, lc *daemon) // starts the pair, on the test's goroutine
	extra []string                            // the script's arguments after the address
}

// bcClientJobsAtOnce bounds how many jobs run at once. A run mostly waits (3.1 s for its items to expire),
// so they do not take t.Parallel's slots, which are as many as CPUs: with two, one at a time took minutes.
const bcClientJobsAtOnce = 6

// bcRunClientJobs starts every job's servers, runs the scripts (each against its two servers at once, at
// most bcClientJobsAtOnce jobs at a time), then compares each job's runs in a subtest of its own:
// memcached's run must finish cleanly (else the script is broken), and leasecached's must print the same.
// A job whose client library is missing is skipped (failed in CI) in its subtest.
func bcRunClientJobs(t *testing.T, jobs []bcClientJob) {
	t.Helper()
	type prepared struct {
		dir, interp string
		unusable    error
		d           [2]*daemon
		runs        [2]toolRun
	}
	prep := make([]prepared, len(jobs))
	for j, job := range jobs {
		p := &prep[j]
		dir, err := filepath.Abs(filepath.Join(clientsDir, job.cs.dir))
		require.NoError(t, err)
		p.dir = dir
		if p.interp, p.unusable = job.cs.interpreter(dir); p.unusable != nil {
			continue
		}
		p.d[0], p.d[1] = job.start(t)
	}
	sem := make(chan struct{}, bcClientJobsAtOnce)
	var wg sync.WaitGroup
	for j, job := range jobs {
		p := &prep[j]
		if p.unusable != nil {
			continue
		}
		for i, d := range p.d {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if i == 0 {
					sem <- struct{}{}
					defer func() { <-sem }()
				}
				args := append([]string{job.cs.script, d.addr}, job.extra...)
				p.runs[i] = bcNormalizeRun(runTool(p.dir, clientScriptTimeout, p.interp, args...), d)
			}()
		}
	}
	wg.Wait()
	for j, job := range jobs {
		p := &prep[j]
		t.Run(job.name, func(t *testing.T) {
			if p.unusable != nil {
				missing(t, "%s is not usable (%s): %v", job.cs.name, job.cs.pkg, p.unusable)
			}
			if os.Getenv(dumpEnv) != "" {
				t.Logf("memcached run (%s):\n%s%s", p.runs[0].exit, p.runs[0].stdout, p.runs[0].stderr)
			}
			require.Equal(t, "exit 0", p.runs[0].exit,
				"%s against memcached (the oracle) did not finish cleanly: the script is broken\nstdout:\n%s\nstderr:\n%s",
				job.cs.script, p.runs[0].stdout, p.runs[0].stderr)
			compareRuns(t, job.cs.script, p.runs[0], p.runs[1])
		})
	}
}

// TestBinaryClientLibraries runs every binary client's scenario against a fresh memcached and a fresh
// leasecached: with the protocol negotiated (-B auto, the default), forced (-B binary), and with a 4 MB
// item limit (-I 4m), under which the scenarios' 2 MB value is stored.
func TestBinaryClientLibraries(t *testing.T) {
	parallelBusy(t) // with the other binary-protocol tests, after the package's serial ones
	requireMemcached(t)
	requireLeasecached(t)
	var jobs []bcClientJob
	for _, proto := range []struct {
		name string
		args []string
	}{{"auto", nil}, {"binary", []string{"-B", "binary"}}, {"items-4m", []string{"-I", "4m"}}} {
		for _, cs := range bcClientScripts() {
			jobs = append(jobs, bcClientJob{name: proto.name + "/" + cs.name, cs: cs,
				start: func(t *testing.T) (*daemon, *daemon) { return startPair(t, proto.args...) }})
		}
	}
	bcRunClientJobs(t, jobs)
}

// bcSASLFiles is one test's SASL set-up: memcached's SASL_CONF_PATH directory with its sasldb, and
// leasecached's password file.
type bcSASLFiles struct {
	confDir    string
	sasldb     string
	pwdb       string
	saslpasswd string     // saslpasswd2's path
	realms     [][]string // saslpasswd2's realm arguments, each user is written for every one
}

// bcSetupSASL writes the SASL configuration of the header comment for the accounts.
func bcSetupSASL(t *testing.T, accounts []bcSASLAccount) *bcSASLFiles {
	t.Helper()
	f := &bcSASLFiles{}
	for _, p := range []string{"saslpasswd2", "/usr/sbin/saslpasswd2"} {
		if found, err := exec.LookPath(p); err == nil {
			f.saslpasswd = found
			break
		}
	}
	if f.saslpasswd == "" {
		missing(t, "saslpasswd2 is not installed (apt-get install sasl2-bin libsasl2-modules-db; make test-deps does): memcached -S needs a sasldb")
	}
	f.confDir = t.TempDir()
	require.NoError(t, os.Chmod(f.confDir, 0o755))
	f.sasldb = filepath.Join(f.confDir, "sasldb")
	f.pwdb = filepath.Join(f.confDir, "leasecached.pwdb")
	f.realms = [][]string{nil}
	if host, err := os.Hostname(); err == nil && host != "" {
		f.realms = append(f.realms, []string{"-u", host})
	}
	f.setAccounts(t, accounts, nil)
	require.NoError(t, os.Chmod(f.sasldb, 0o644)) // memcached -u may not be root
	conf := fmt.Sprintf("mech_list: plain\nsasldb_path: %s\n", f.sasldb)
	require.NoError(t, os.WriteFile(filepath.Join(f.confDir, "memcached.conf"), []byte(conf), 0o644))
	return f
}

// setAccounts makes accounts the users of both servers' files: each is (re)written to memcached's sasldb
// and the deleted users removed from it, and leasecached's password file is replaced by the accounts.
func (f *bcSASLFiles) setAccounts(t *testing.T, accounts []bcSASLAccount, deleted []string) {
	t.Helper()
	saslpasswd := func(input string, args ...string) {
		r := runToolInput(f.confDir, clientProbeTimeout, []byte(input), f.saslpasswd, args...)
		require.Equal(t, "exit 0", r.exit, "saslpasswd2 %v: %s%s", args, r.stdout, r.stderr)
	}
	var lines strings.Builder
	for _, a := range accounts {
		for _, realm := range f.realms {
			saslpasswd(a.password, append(append([]string{"-p", "-c", "-f", f.sasldb, "-a", "memcached"}, realm...), a.user)...)
		}
		pw := a.password
		if a.bcrypt {
			h, err := bcrypt.GenerateFromPassword([]byte(a.password), bcrypt.MinCost)
			require.NoError(t, err)
			pw = string(h)
		}
		lines.WriteString(a.user + ":" + pw + "\n")
	}
	for _, user := range deleted {
		for _, realm := range f.realms {
			saslpasswd("", append(append([]string{"-d", "-f", f.sasldb, "-a", "memcached"}, realm...), user)...)
		}
	}
	writeAuthFile(t, f.pwdb, lines.String())
}

// bcStartMemcachedSASL starts memcached -S on the configuration in f.
func bcStartMemcachedSASL(t testing.TB, f *bcSASLFiles, args ...string) *daemon {
	t.Helper()
	requireMemcached(t)
	return startDaemonSpec(t, testdaemon.Spec{Name: "memcached", Path: memcachedPath,
		Args: memcachedArgs(append([]string{"-S"}, args...)), Env: []string{"SASL_CONF_PATH=" + f.confDir}})
}

// bcStartSASLPair starts memcached -S and leasecached -S --sasl-pwdb with the same user, and checks that
// memcached's SASL set-up authenticates that user (else every comparison would be against a broken oracle).
func bcStartSASLPair(t *testing.T, args ...string) (mc, lc *daemon) {
	t.Helper()
	mc, lc, _ = bcStartSASLPairFiles(t, args...)
	return mc, lc
}

// bcStartSASLPairFiles is bcStartSASLPair, also returning the files the servers read.
func bcStartSASLPairFiles(t *testing.T, args ...string) (mc, lc *daemon, f *bcSASLFiles) {
	t.Helper()
	f = bcSetupSASL(t, bcSASLAccounts)
	mc = bcStartMemcachedSASL(t, f, args...)
	if os.Getenv(selfTestEnv) != "" {
		lc = bcStartMemcachedSASL(t, f, args...)
		lc.name = "memcached-as-leasecached"
	} else {
		lc = startLeasecached(t, append([]string{"-S", "--sasl-pwdb", f.pwdb}, args...)...)
	}
	if slices.Contains(args, "-Z") {
		return mc, lc, f // TLS: the probe below speaks plaintext; the client scripts' oracle check remains
	}
	probe := []string{string(bcPacket(bcOpSASLAuth, "PLAIN", "", "\x00"+bcSASLUser+"\x00"+bcSASLPassword, 0, 0))}
	got, _ := bcExchangeT(t, mc, probe, nil)
	_, _ = bcExchangeT(t, lc, probe, []int{len(got)}) // the same on both, for their auth_cmds
	require.Equal(t, "Authenticated", bcBody(t, []byte(got)),
		"memcached -S with SASL_CONF_PATH=%s does not authenticate %s (is libsasl2-modules-db installed?); its output:\n%s",
		f.confDir, bcSASLUser, mc.out.String())
	return mc, lc, f
}

// TestBinaryClientLibrariesSASL runs every binary client's SASL scenario (the right password, a wrong
// one, none) against memcached -S and leasecached -S, and with -S -B binary (the same, said twice).
func TestBinaryClientLibrariesSASL(t *testing.T) {
	parallelBusy(t) // with the other binary-protocol tests, after the package's serial ones
	requireMemcached(t)
	requireLeasecached(t)
	var jobs []bcClientJob
	for _, proto := range []struct {
		name string
		args []string
	}{{"implied", nil}, {"binary", []string{"-B", "binary"}}} {
		for _, cs := range bcClientScripts() {
			jobs = append(jobs, bcClientJob{name: proto.name + "/" + cs.name, cs: cs, extra: []string{bcSASLUser, bcSASLPassword},
				start: func(t *testing.T) (*daemon, *daemon) { return bcStartSASLPair(t, proto.args...) }})
		}
	}
	bcRunClientJobs(t, jobs)
}

// Binary protocol opcodes and the header's size, for the raw SASL exchanges.
const (
	bcHeaderLen     = 24
	bcOpGet         = 0x00
	bcOpSet         = 0x01
	bcOpNoop        = 0x0a
	bcOpVersion     = 0x0b
	bcOpGetKQ       = 0x0d
	bcOpStat        = 0x10
	bcOpSASLList    = 0x20
	bcOpSASLAuth    = 0x21
	bcOpSASLStep    = 0x22
	bcMagicRequest  = 0x80
	bcMagicResponse = 0x81
)

// bcPacket is one binary-protocol request.
func bcPacket(op byte, key, extras, value string, opaque uint32, cas uint64) []byte {
	body := extras + key + value
	p := make([]byte, bcHeaderLen, bcHeaderLen+len(body))
	p[0], p[1] = bcMagicRequest, op
	binary.BigEndian.PutUint16(p[2:], uint16(len(key)))
	p[4] = byte(len(extras))
	binary.BigEndian.PutUint32(p[8:], uint32(len(body)))
	binary.BigEndian.PutUint32(p[12:], opaque)
	binary.BigEndian.PutUint64(p[16:], cas)
	return append(p, body...)
}

// bcBody returns the body of the one response packet in b (failing the test when b is not one).
func bcBody(t testing.TB, b []byte) string {
	t.Helper()
	require.GreaterOrEqual(t, len(b), bcHeaderLen, "not a binary response: %q", b)
	require.Equal(t, byte(bcMagicResponse), b[0], "not a binary response: %q", b)
	n := int(binary.BigEndian.Uint32(b[8:]))
	require.Equal(t, bcHeaderLen+n, len(b), "not one response packet: %q", b)
	return string(b[bcHeaderLen:])
}

// bcNormalizeCAS zeroes the CAS of every whole response packet at the start of b: the one field that
// legitimately differs between the servers.
func bcNormalizeCAS(b string) string {
	out := []byte(b)
	for p := out; len(p) >= bcHeaderLen && p[0] == bcMagicResponse; {
		clear(p[16:bcHeaderLen])
		n := bcHeaderLen + int(binary.BigEndian.Uint32(p[8:]))
		if n > len(p) {
			break
		}
		p = p[n:]
	}
	return string(out)
}

// bcStats parses the STAT response packets in b into name -> value.
func bcStats(b []byte) map[string]string {
	stats := map[string]string{}
	for len(b) >= bcHeaderLen && b[0] == bcMagicResponse {
		kl := int(binary.BigEndian.Uint16(b[2:]))
		el := int(b[4])
		n := bcHeaderLen + int(binary.BigEndian.Uint32(b[8:]))
		if n > len(b) || bcHeaderLen+el+kl > n {
			break
		}
		if kl > 0 {
			stats[string(b[bcHeaderLen+el:bcHeaderLen+el+kl])] = string(b[bcHeaderLen+el+kl : n])
		}
		b = b[n:]
	}
	return stats
}

// bcQuiet is how long a raw exchange's step waits for its reply when nothing tells it how long the reply
// is: replies are not delimited (a connection before authenticating answers no sentinel, and a closed
// one none), so silence ends them. -Y's tests wait 300 ms; a SASL failure under the race detector, with
// the rest of the suite running, has been seen to take longer.
const bcQuiet = time.Second

// bcSlow bounds the wait for a step's reply whose length is known (memcached's, in bcCompareExchanges),
// and bcAfter is how long the step then waits for bytes beyond it: a known length ends the wait as soon
// as it is met, so a slow answer (a password check on a loaded machine took more than bcQuiet) is waited
// for without every step paying for it.
const (
	bcSlow  = 15 * time.Second
	bcAfter = 200 * time.Millisecond
)

// bcExchange sends each step on one connection to d, each whole, and returns what d answered to each and
// whether d closed the connection. A step waits bcQuiet for its reply, or, when want has its index, until
// want[i] bytes came (at most bcSlow) and then bcAfter more (want[i] == 0: bcQuiet). It may run on any
// goroutine.
func bcExchange(d *daemon, steps []string, want []int) (replies []string, closed bool, err error) {
	rc, err := dialRawErr(d)
	if err != nil {
		return nil, false, err
	}
	defer rc.c.Close()
	buf := make([]byte, readBufSize)
	for i, step := range steps {
		if _, err := rc.c.Write([]byte(step)); err != nil {
			return append(replies, ""), true, nil // closed by the server after the last step
		}
		need := 0
		if i < len(want) {
			need = want[i]
		}
		wait := bcQuiet
		if need > 0 {
			wait = bcSlow
		}
		_ = rc.c.SetReadDeadline(time.Now().Add(wait))
		var got []byte
		for {
			n, err := rc.c.Read(buf)
			got = append(got, buf[:n]...)
			if need > 0 && len(got) >= need {
				need = 0
				_ = rc.c.SetReadDeadline(time.Now().Add(bcAfter))
			}
			if err != nil {
				var ne net.Error
				closed = !(errors.As(err, &ne) && ne.Timeout())
				break
			}
		}
		replies = append(replies, string(got))
		if closed {
			return replies, true, nil
		}
	}
	return replies, false, nil
}

// bcOutcome is what one server did with one case's steps.
type bcOutcome struct {
	replies []string
	closed  bool
	err     error
}

// bcCompareExchanges sends every case's steps to mc, all at once (each case a connection of its own: each
// step may wait bcQuiet, so one at a time would take minutes, and t.Parallel would be held to -parallel),
// then to lc the same way, each step waiting for as many bytes as memcached sent; then requires, in a
// subtest per case, the same replies, CAS zeroed, and the same close.
func bcCompareExchanges(t *testing.T, mc, lc *daemon, cases []authCase) {
	t.Helper()
	out := make([][2]bcOutcome, len(cases))
	for i, d := range []*daemon{mc, lc} {
		var wg sync.WaitGroup
		for c, tc := range cases {
			var want []int
			if i == 1 {
				for _, r := range out[c][0].replies {
					want = append(want, len(r))
				}
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				o := &out[c][i]
				o.replies, o.closed, o.err = bcExchange(d, tc.steps, want)
			}()
		}
		wg.Wait()
	}
	for c, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want, got := out[c][0], out[c][1]
			require.NoError(t, want.err, "memcached")
			require.NoError(t, got.err, "leasecached")
			assert.Equal(t, fmt.Sprintf("%q", bcNormalizeCAS(strings.Join(want.replies, ""))),
				fmt.Sprintf("%q", bcNormalizeCAS(strings.Join(got.replies, ""))),
				"replies (memcached, leasecached; CAS zeroed)")
			assert.Equal(t, want.closed, got.closed, "connection closed (memcached, leasecached)")
		})
	}
}

// bcExchangeT is bcExchange on the test's goroutine, failing the test when d cannot be reached; the
// replies are joined.
func bcExchangeT(t *testing.T, d *daemon, steps []string, want []int) (string, bool) {
	t.Helper()
	replies, closed, err := bcExchange(d, steps, want)
	require.NoError(t, err)
	return strings.Join(replies, ""), closed
}

// TestBinarySASLExchanges sends the same raw packets to memcached -S and leasecached -S and compares the
// replies byte for byte, and whether the server closed the connection: the mechanisms, the right and
// wrong passwords, commands before authenticating (AUTH_ERROR), and text commands (refused).
func TestBinarySASLExchanges(t *testing.T) {
	parallelWaiting(t) // with the other binary-protocol tests, after the package's serial ones
	requireMemcached(t)
	requireLeasecached(t)
	mc, lc := bcStartSASLPair(t)
	auth := func(user, password string) string {
		return string(bcPacket(bcOpSASLAuth, "PLAIN", "", "\x00"+user+"\x00"+password, 7, 0))
	}
	pkt := func(op byte, key, extras, value string) string {
		return string(bcPacket(op, key, extras, value, 0x01020304, 0))
	}
	good := auth(bcSASLUser, bcSASLPassword)
	setExtras := "\x00\x00\x00\x05\x00\x00\x00\x00" // flags 5, no expiry
	cases := []authCase{
		{"list mechanisms", []string{pkt(bcOpSASLList, "", "", "")}},
		{"password with a colon and spaces", []string{auth(bcSASLUser2, bcSASLPassword2), pkt(bcOpGet, "k", "", "")}},
		{"that password cut at the colon", []string{auth(bcSASLUser2, "p")}},
		{"bcrypt user", []string{auth(bcSASLUser3, bcSASLPassword3), pkt(bcOpGet, "k", "", "")}},
		{"bcrypt user, the hash as password", []string{auth(bcSASLUser3, "$2a$04$")}},
		{"one user's password for another", []string{auth(bcSASLUser2, bcSASLPassword)}},
		{"authenticate twice", []string{good, good, pkt(bcOpGet, "k", "", "")}},
		{"right, then wrong, then a get", []string{good, auth(bcSASLUser, "nope"), pkt(bcOpGet, "k", "", "")}},
		{"right, then another user", []string{good, auth(bcSASLUser2, bcSASLPassword2), pkt(bcOpGet, "k", "", "")}},
		{"mechanisms after authenticating", []string{good, pkt(bcOpSASLList, "", "", "")}},
		{"step after authenticating", []string{good, pkt(bcOpSASLStep, "PLAIN", "", "x")}},
		{"auth and get in one write", []string{good + pkt(bcOpGet, "k", "", "") + pkt(bcOpNoop, "", "", "")}},
		{"lower-case mechanism", []string{pkt(bcOpSASLAuth, "plain", "", "\x00"+bcSASLUser+"\x00"+bcSASLPassword)}},
		{"empty user", []string{auth("", bcSASLPassword)}},
		{"1000-byte password", []string{auth(bcSASLUser, strings.Repeat("p", 1000))}},
		{"quit before auth", []string{pkt(0x07, "", "", "")}},
		{"text after authenticating", []string{good, "get k\r\nget k\r\nget k\r\n"}},
		// The only case that stores, under a key of its own: the cases run at once, and the others read k.
		{"right password", []string{good, pkt(bcOpSet, "kset", setExtras, "v"), pkt(bcOpGet, "kset", "", "")}},
		{"wrong password then right", []string{auth(bcSASLUser, bcSASLPassword+"x"), good, pkt(bcOpGet, "k", "", "")}},
		{"unknown user", []string{auth("mallory", bcSASLPassword), pkt(bcOpNoop, "", "", "")}},
		{"empty password", []string{auth(bcSASLUser, "")}},
		{"authzid given", []string{string(bcPacket(bcOpSASLAuth, "PLAIN", "", bcSASLUser+"\x00"+bcSASLUser+"\x00"+bcSASLPassword, 9, 0))}},
		{"mechanism not offered", []string{pkt(bcOpSASLAuth, "CRAM-MD5", "", "x")}},
		{"no NULs in the PLAIN data", []string{pkt(bcOpSASLAuth, "PLAIN", "", bcSASLUser+bcSASLPassword)}},
		{"step without start", []string{pkt(bcOpSASLStep, "PLAIN", "", "\x00"+bcSASLUser+"\x00"+bcSASLPassword)}},
		{"version before auth", []string{pkt(bcOpVersion, "", "", ""), good}},
		{"get before auth", []string{pkt(bcOpGet, "k", "", "")}},
		{"set before auth", []string{pkt(bcOpSet, "k", setExtras, "v")}},
		{"quiet get before auth", []string{pkt(bcOpGetKQ, "k", "", "") + pkt(bcOpNoop, "", "", "")}},
		{"noop before auth", []string{pkt(bcOpNoop, "", "", "")}},
		{"stat before auth", []string{pkt(bcOpStat, "", "", "")}},
		{"text command (short)", []string{"version\r\n"}},
		{"text command (a header's length)", []string{"get aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n"}},
		{"text set", []string{"set k 0 0 1\r\nv\r\nget k\r\n"}},
	}
	t.Run("cases", func(t *testing.T) { bcCompareExchanges(t, mc, lc, cases) })
	// The same cases ran on both, so the authentication counters must agree.
	t.Run("stats auth_cmds auth_errors", func(t *testing.T) {
		var views [2]string
		var want []int // leasecached waits for the authentication's reply as long as memcached's
		for i, d := range []*daemon{mc, lc} {
			replies, _, err := bcExchange(d, []string{good, pkt(bcOpStat, "", "", "")}, want)
			require.NoError(t, err)
			require.Len(t, replies, 2, d.name)
			want = []int{len(replies[0])}
			st := bcStats([]byte(strings.Join(replies, "")))
			views[i] = fmt.Sprintf("auth_cmds=%q auth_errors=%q", st["auth_cmds"], st["auth_errors"])
		}
		assert.Equal(t, views[0], views[1], "memcached, leasecached")
	})
}

// TestBinaryClientsTLS runs Dalli's scenarios over TLS (its ssl_context) against memcached -Z and
// leasecached -Z: the whole scenario, and the SASL one against -Z -S.
func TestBinaryClientsTLS(t *testing.T) {
	parallelBusy(t) // with the other binary-protocol tests, after the package's serial ones
	requireMemcached(t)
	requireLeasecached(t)
	cs := bcClientScripts()[0]
	require.Equal(t, "dalli", cs.name)
	certs := testcert.New(t)
	bcRunClientJobs(t, []bcClientJob{
		{name: "scenario", cs: cs, extra: []string{"--tls", certs.CA.CertFile},
			start: func(t *testing.T) (*daemon, *daemon) { return startPair(t, tlsFlags(certs)...) }},
		{name: "SASL", cs: cs, extra: []string{bcSASLUser, bcSASLPassword, "--tls", certs.CA.CertFile},
			start: func(t *testing.T) (*daemon, *daemon) { return bcStartSASLPair(t, tlsFlags(certs)...) }},
	})
}

// TestBinaryProtocolFlagExchanges sends the same bytes to memcached and leasecached started with -B
// ascii, -B binary and neither (auto) and compares the replies byte for byte, and whether the server
// closed: each protocol where it is allowed and where it is not, and both on one connection.
func TestBinaryProtocolFlagExchanges(t *testing.T) {
	parallelWaiting(t) // with the other binary-protocol tests, after the package's serial ones
	requireMemcached(t)
	requireLeasecached(t)
	pkt := func(op byte, key, extras, value string) string {
		return string(bcPacket(op, key, extras, value, 0x0a0b0c0d, 0))
	}
	noop := pkt(bcOpNoop, "", "", "")
	cases := []authCase{
		{"binary noop", []string{noop}},
		{"binary set and get", []string{pkt(bcOpSet, "k", "\x00\x00\x00\x01\x00\x00\x00\x00", "v") + pkt(bcOpGet, "k", "", "")}},
		{"binary version", []string{pkt(bcOpVersion, "", "", "")}},
		{"text version", []string{"version\r\n"}},
		{"text get as long as a header", []string{"get aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n"}},
		{"text, then binary", []string{"version\r\n", noop}},
		{"binary, then text", []string{noop, "version\r\n", "get aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n"}},
		{"a response's magic first", []string{strings.Replace(noop, "\x80", "\x81", 1)}},
		{"half a header", []string{noop[:12]}},
		{"meta no-op", []string{"mn\r\n"}},
	}
	for _, proto := range []struct {
		name string
		args []string
	}{{"auto", nil}, {"ascii", []string{"-B", "ascii"}}, {"binary", []string{"-B", "binary"}}} {
		t.Run(proto.name, func(t *testing.T) {
			parallelWaiting(t)
			mc, lc := startPair(t, proto.args...)
			bcCompareExchanges(t, mc, lc, cases)
		})
	}
}

// TestBinarySASLReload changes the users while both servers run: memcached's Cyrus SASL reads its sasldb
// at each authentication, leasecached re-reads --sasl-pwdb on SIGHUP (sent to both). A new user can then
// authenticate on both, a deleted one no longer, and a connection that authenticated before stays so.
func TestBinarySASLReload(t *testing.T) {
	parallelWaiting(t) // with the other binary-protocol tests, after the package's serial ones
	requireMemcached(t)
	requireLeasecached(t)
	mc, lc, f := bcStartSASLPairFiles(t)
	auth := func(user, password string) string {
		return string(bcPacket(bcOpSASLAuth, "PLAIN", "", "\x00"+user+"\x00"+password, 1, 0))
	}
	get := string(bcPacket(bcOpGet, "k", "", "", 2, 0))
	held := map[*daemon]*rawConn{}
	for _, d := range []*daemon{mc, lc} {
		rc := dialRaw(t, d)
		rep := rc.exchange([]byte(auth(bcSASLUser, bcSASLPassword)), wholeWrite, []byte("Authenticated"), bcSlow)
		require.Equal(t, "Authenticated", bcBody(t, rep.data), d.name)
		held[d] = rc
	}
	bcCompareExchanges(t, mc, lc, []authCase{{"new user before", []string{auth("dave", "new-pw"), get}}})

	dave := bcSASLAccount{"dave", "new-pw", false}
	f.setAccounts(t, []bcSASLAccount{dave, bcSASLAccounts[1], bcSASLAccounts[2]}, []string{bcSASLUser})
	for _, d := range []*daemon{mc, lc} {
		require.NoError(t, d.cmd.Process.Signal(syscall.SIGHUP))
	}
	// leasecached's reload is asynchronous: poll it (bounded) until the new user authenticates.
	deadline := time.Now().Add(authReloadWait)
	for time.Now().Before(deadline) {
		if got, _ := bcExchangeT(t, lc, []string{auth("dave", "new-pw")}, nil); len(got) > bcHeaderLen && got[bcHeaderLen:] == "Authenticated" {
			break
		}
	}
	bcCompareExchanges(t, mc, lc, []authCase{
		{"new user after", []string{auth("dave", "new-pw"), get}},
		{"deleted user after", []string{auth(bcSASLUser, bcSASLPassword), get}},
		{"kept user after", []string{auth(bcSASLUser2, bcSASLPassword2), get}},
	})
	for _, d := range []*daemon{mc, lc} {
		rep := held[d].exchange([]byte(get), wholeWrite, []byte("Not found"), bcSlow)
		assert.Equal(t, "Not found", bcBody(t, rep.data), "%s: authenticated before the reload, still", d.name)
	}
}

// TestBinaryClientsUnixSocket runs Dalli's and pylibmc's scenarios over a unix socket (-s), the address
// they are given being the socket's path.
func TestBinaryClientsUnixSocket(t *testing.T) {
	parallelBusy(t) // with the other binary-protocol tests, after the package's serial ones
	requireMemcached(t)
	requireLeasecached(t)
	var jobs []bcClientJob
	for _, cs := range bcClientScripts() {
		if cs.name != "dalli" && cs.name != "pylibmc" {
			continue
		}
		jobs = append(jobs, bcClientJob{name: cs.name, cs: cs, start: func(t *testing.T) (*daemon, *daemon) {
			sockDir := t.TempDir()
			var ds [2]*daemon
			for i, server := range []string{"memcached", "leasecached"} {
				// The same length for both paths: the scripts show no path, but their stats may count its bytes.
				sock := filepath.Join(sockDir, server[:2]+".sock")
				ds[i] = startOnSocket(t, server, sock, "-s", sock)
				ds[i].addr = sock
			}
			return ds[0], ds[1]
		}})
	}
	bcRunClientJobs(t, jobs)
}
