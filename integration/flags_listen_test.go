package integration

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestListenerFlagErrorsLikeMemcached: the -l, -s, -o, -Z and -Y mistakes memcached 1.6.18 also refuses
// are refused by both, each with one line that names the same thing. memcached's exit status varies with
// where it notices (1 while parsing options, 64 EX_USAGE for TLS setup, 71 EX_OSERR for listeners, which
// it only notices when binding); leasecached refuses them all while reading its command line, with
// status 1. memcached's statuses are checked too, so a change in the oracle shows here.
func TestListenerFlagErrorsLikeMemcached(t *testing.T) {
	requireLeasecached(t)
	requireMemcached(t)
	dir := t.TempDir()
	notSocket := filepath.Join(dir, "plain-file")
	require.NoError(t, os.WriteFile(notSocket, []byte("x"), 0o644))
	cases := []struct {
		name   string
		args   []string
		mcCode int
		both   string // what both reasons say (case-insensitive)
	}{
		{"notls without -Z", []string{"-l", "notls:127.0.0.1"}, 71, "'notls' option is valid only when SSL is enabled"},
		{"-l bad port", []string{"-l", "127.0.0.1:abc"}, 71, "invalid port number"},
		{"-l unclosed IPv6", []string{"-l", "[::1"}, 71, "invalid IPv6 address"},
		{"-s on a file that is not a socket", []string{"-s", notSocket}, 71, notSocket},
		{"-o unknown key", []string{"-o", "no_such_option"}, 1, "no_such_option"},
		{"-o empty key", []string{"-o", "modern,,modern"}, 1, "option"},
		{"-o missing value", []string{"-o", "ssl_chain_cert"}, 1, "missing ssl_chain_cert argument"},
		{"-o idle_timeout without value", []string{"-o", "idle_timeout"}, 1, "idle_timeout"},
		{"-o ssl_verify_mode out of range", []string{"-o", "ssl_verify_mode=7"}, 1, "ssl_verify_mode"},
		{"-o ssl_min_version not a number", []string{"-o", "ssl_min_version=x"}, 1, "ssl_min_version"},
		{"-o ssl_wbuf_size not a number", []string{"-o", "ssl_wbuf_size=abc"}, 1, "ssl_wbuf_size"},
		{"-Z without a certificate", []string{"-Z"}, 64, "certificate chain|ssl_chain_cert"},
		{"-Y unreadable", []string{"-Y", filepath.Join(dir, "no-such-auth")}, 1, "could not open"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			parallelBusy(t)
			port, err := freePort()
			require.NoError(t, err)
			base := []string{"-p", strconv.Itoa(port)}
			mcArgs := append(append([]string{"-U", "0"}, base...), c.args...)
			if os.Geteuid() == 0 {
				mcArgs = append(mcArgs, "-u", "root") // memcached refuses root without a user
			}
			mcOut, mcErr, mcCode := runOnce(t, memcachedPath, mcArgs...)
			lcOut, lcErr, lcCode := runOnce(t, leasecachedPath, append(base, c.args...)...)

			assert.Equal(t, c.mcCode, mcCode, "memcached's status (stdout %q, stderr %q)", mcOut, mcErr)
			assert.Equal(t, 1, lcCode, "leasecached's status (stderr %q)", lcErr)
			reason := strings.TrimRight(lcErr, "\n")
			assert.True(t, reason != "" && !strings.Contains(reason, "\n"), "leasecached: one line, got %q", lcErr)
			assert.Empty(t, lcOut)
			assert.True(t, containsAnyFold(mcOut+mcErr, c.both), "memcached's reason %q lacks %q", mcOut+mcErr, c.both)
			assert.True(t, containsAnyFold(reason, c.both), "leasecached's reason %q lacks %q", reason, c.both)
		})
	}
}

// containsAnyFold says whether s contains one of the |-separated alternatives, ignoring case.
func containsAnyFold(s, alternatives string) bool {
	for _, a := range strings.Split(alternatives, "|") {
		if strings.Contains(strings.ToLower(s), strings.ToLower(a)) {
			return true
		}
	}
	return false
}
