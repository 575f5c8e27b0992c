package integration

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"github.com/leasecached/leasecached/internal/testdaemon"
)

// SASL: memcached 1.6.18 with -S (Cyrus SASL, PLAIN only, its users in a sasldb made by saslpasswd2
// from Debian's sasl2-bin) against leasecached with -S --sasl-pwdb (the same users as user:password
// lines). Debian's memcached has no MEMCACHED_SASL_PWDB: its users live in a sasldb, which
// SASL_CONF_PATH's memcached.conf points to.

// saslUsers are the accounts both servers know.
var saslUsers = map[string]string{"alice": "wonder", "bob": "b:o\\b"}

// startSASLPair starts memcached and leasecached with SASL on and the same users.
func startSASLPair(t *testing.T) (mc, lc *daemon) { return startSASLPairHashed(t, false) }

// startSASLPairHashed is startSASLPair with leasecached's passwords as bcrypt hashes when hashed is
// set: its checks then run on a checker goroutine, and the requests behind a SASL_AUTH wait for them.
func startSASLPairHashed(t *testing.T, hashed bool) (mc, lc *daemon) {
	t.Helper()
	requireMemcached(t)
	saslpasswd, err := exec.LookPath("saslpasswd2")
	if err != nil {
		saslpasswd = "/usr/sbin/saslpasswd2"
	}
	if _, err := os.Stat(saslpasswd); err != nil {
		t.Fatalf("saslpasswd2 (Debian's sasl2-bin) is needed to give memcached its SASL users; run `make test` (which installs it): %v", err)
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "sasldb2")
	var pwdb strings.Builder
	for user, pass := range saslUsers {
		cmd := exec.Command(saslpasswd, "-p", "-f", db, "-a", "memcached", "-c", user)
		cmd.Stdin = strings.NewReader(pass)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "saslpasswd2: %s", out)
		secret := pass
		if hashed {
			h, err := bcrypt.GenerateFromPassword([]byte(pass), bcrypt.MinCost)
			require.NoError(t, err)
			secret = string(h)
		}
		pwdb.WriteString(user + ":" + secret + "\n")
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "memcached.conf"), []byte("mech_list: plain\nsasldb_path: "+db+"\n"), 0o600))
	pwdbPath := filepath.Join(dir, "pwdb")
	require.NoError(t, os.WriteFile(pwdbPath, []byte(pwdb.String()), 0o600))
	mc = startDaemonSpec(t, testdaemon.Spec{Name: "memcached", Path: memcachedPath, Args: memcachedArgs([]string{"-S"}),
		Env: []string{"SASL_CONF_PATH=" + dir}})
	lc = startLeasecached(t, "-S", "--sasl-pwdb", pwdbPath)
	return mc, lc
}

// TestDifferentialBinarySASL compares the SASL exchanges (and what a connection may do before and
// after one) with memcached's.
func TestDifferentialBinarySASL(t *testing.T) {
	for _, hashed := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain pwdb", true: "bcrypt pwdb"}[hashed], func(t *testing.T) {
			mc, lc := startSASLPairHashed(t, hashed)
			runBinSASLCases(t, mc, lc)
		})
	}
}

// runBinSASLCases runs the SASL cases against a pair.
func runBinSASLCases(t *testing.T, mc, lc *daemon) {
	plain := func(s string) binReq { return bValue(opSASLAuth, "PLAIN", s) }
	ok := plain("\x00alice\x00wonder")
	cases := []binCase{
		{name: "list mechs and version before auth", steps: binOne(bSimple(opSASLList), bSimple(opVersion), bSimple(opSASLList).withOpaque(7))},
		{name: "auth then commands", steps: binOne(ok, bStore(opSet, ka, "a", 1, 0), bGet(opGetK, ka), bGet(opGetQ, kb), bSimple(opNoop))},
		{name: "auth other user with colon and backslash", steps: binOne(plain("\x00bob\x00b:o\\b"), bGet(opGet, ka))},
		{name: "get before auth closes", steps: binOne(bGet(opGet, ka), bSimple(opNoop))},
		{name: "noop before auth closes", steps: binOne(bSimple(opNoop))},
		{name: "quiet get before auth closes", steps: binOne(bGet(opGetQ, ka), bSimple(opVersion))},
		{name: "stat before auth closes", steps: binOne(bKey(opStat, ""))},
		{name: "quit before auth", steps: binOne(bSimple(opQuit))},
		{name: "unknown opcode before auth", steps: binOne(bSimple(0x1b), bSimple(opVersion))},
		{name: "wrong password then get", steps: binOne(plain("\x00alice\x00wrong"), bSimple(opVersion), bGet(opGet, ka))},
		{name: "unknown user", steps: binOne(plain("\x00mallory\x00wonder"), bSimple(opSASLList))},
		{name: "wrong then right", steps: binOne(plain("\x00alice\x00x"), ok, bGet(opGetK, ka))},
		{name: "authzid same and other", steps: binOne(plain("alice\x00alice\x00wonder"), plain("bob\x00alice\x00wonder"), bGet(opGetK, kb))},
		{name: "authzid other", steps: binOne(plain("bob\x00alice\x00wonder"), bGet(opGetK, kb))},
		{name: "malformed plain", steps: binOne(plain("alicewonder"), plain("\x00alice"), plain("\x00\x00wonder"), plain("\x00alice\x00wonder\x00x"), bSimple(opVersion))},
		// Cyrus SASL's PLAIN with no initial response asks for it: AUTH_CONTINUE (0x21) with an empty
		// challenge, and the credentials come in a SASL_STEP.
		{name: "empty plain continues", steps: binOne(plain(""), bSimple(opVersion))},
		{name: "empty plain then step", steps: binOne(plain(""), bValue(opSASLStep, "PLAIN", "\x00alice\x00wonder"), bGet(opGetK, ka))},
		// Every SASL_AUTH or SASL_STEP starts with memcached's init_sasl_conn, which sets the connection
		// unauthenticated: a failed attempt after a success leaves it so (the next command gets
		// AUTH_ERROR and a close), and Cyrus refuses a second start on a connection that completed one.
		{name: "step without auth", steps: binOne(bValue(opSASLStep, "PLAIN", "\x00alice\x00wonder"), bSimple(opVersion))},
		{name: "step after auth", steps: binOne(ok, bValue(opSASLStep, "PLAIN", "\x00alice\x00wonder"), bGet(opGetK, ka))},
		// Cyrus compares mechanism names without regard to case.
		{name: "lower case mechanism", steps: binOne(bValue(opSASLAuth, "plain", "\x00alice\x00wonder"), bGet(opGetK, ka))},
		{name: "unknown mechanism", steps: binOne(bValue(opSASLAuth, "CRAM-MD5", "x"), bValue(opSASLAuth, "PLAINX", "\x00alice\x00wonder"), bSimple(opVersion))},
		{name: "mechanism of 32 and 33 bytes", steps: binOne(bValue(opSASLAuth, strings.Repeat("M", 32), "x"), bValue(opSASLAuth, strings.Repeat("M", 33), "xyz"), bSimple(opVersion))},
		// Listing the mechanisms runs init_sasl_conn too: it logs the connection out.
		{name: "list mechs after auth", steps: binOne(ok, bGet(opGetK, ka), bSimple(opSASLList), bGet(opGetK, ka))},
		{name: "version after auth", steps: binOne(ok, bSimple(opVersion), bGet(opGetK, ka))},
		{name: "re-auth as another user", steps: binOne(ok, plain("\x00bob\x00b:o\\b"), plain("\x00bob\x00bad"), bGet(opGetK, ka))},
		{name: "text on a sasl server", steps: binOne(bRaw("version\r\n"))},
		{name: "list mechs with body", steps: binOne(bSimple(opSASLList).withValue("x"), bSimple(opVersion))},
		{name: "auth with extras", steps: binOne(ok.withExtras(0, 0, 0, 0), bSimple(opVersion))},
		// memcached reads a SASL request's data into an item, and refuses one that would be chunked (over
		// its 512 KB slab chunk limit) with ENOMEM, swallowing the data; smaller data is checked.
		{name: "auth data of 100 KB", chunk: 4096, steps: binOne(plain("\x00alice\x00"+strings.Repeat("w", 100000)), ok, bGet(opGetK, ka))},
		{name: "auth data of 600 KB", chunk: 64 << 10, steps: binOne(plain("\x00alice\x00"+strings.Repeat("w", 600000)), ok, bGet(opGetK, ka))},
		{name: "auth without key", steps: binOne(bValue(opSASLAuth, "", "\x00alice\x00wonder"), bSimple(opVersion))},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			parallelBusy(t)
			runBinCase(t, mc, lc, i, c)
		})
	}
}

// TestBinarySASLStats: auth_cmds and auth_errors count SASL attempts as memcached's do (a
// continuation counts in neither), read with binary STAT once authenticated.
func TestBinarySASLStats(t *testing.T) {
	mc, lc := startSASLPair(t)
	attempts := []binReq{
		bValue(opSASLAuth, "PLAIN", "\x00alice\x00wrong"), bValue(opSASLAuth, "PLAIN", "\x00nobody\x00x"),
		bValue(opSASLAuth, "PLAIN", "garbage"), bValue(opSASLStep, "PLAIN", "x"), bValue(opSASLAuth, "NOPE", "x"),
		bValue(opSASLAuth, "PLAIN", "\x00bob\x00b:o\\b"),
	}
	var got [2]map[string]string
	for i, d := range []*daemon{mc, lc} {
		for _, a := range attempts {
			// A connection each, closed by SASL_LIST_MECHS (allowed before authenticating, unlike NOOP).
			rc := dialRaw(t, d)
			list := bSimple(opSASLList).withOpaque(0x1157)
			want := append(list.encode("", 0, 0)[:binHdrLen:binHdrLen], "PLAIN"...)
			want[0], want[11] = binResMagic, 5
			rep := rc.exchange(append(a.encode("", 1, 0), list.encode("", 0, 0)...), wholeWrite, want, defaultReplyTimeout)
			require.True(t, bytes.HasSuffix(rep.data, want), "%s: %x", d.name, rep.data)
		}
		bc := dialRaw(t, d)
		p := binExchange(t, bc, bValue(opSASLAuth, "PLAIN", "\x00alice\x00wonder"), bKey(opStat, ""))
		require.Greater(t, len(p), 2, "%s", d.name)
		require.Equal(t, uint16(stSuccess), p[0].status(), "%s: %q", d.name, p[0].value())
		got[i] = map[string]string{}
		for _, s := range p[1:] {
			got[i][string(s.key())] = string(s.value())
		}
	}
	for _, name := range []string{"auth_cmds", "auth_errors"} {
		require.Contains(t, got[0], name, "memcached's stats (test bug)")
		require.Equal(t, got[0][name], got[1][name], "STAT %s", name)
	}
}
