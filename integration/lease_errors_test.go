package integration

import (
	"fmt"
	"strings"
	"testing"
)

// leaseSetTooLarge is a value size above both servers' default 1 MiB item limit.
const leaseSetTooLarge = 2 << 20

// leaseSetErrorCases pairs a malformed or refused `set` (or `cas`, for the token, which plays the role of
// cas's unique) with the same mistake made in lease-set. leases.md: lease-set gets the same errors as set,
// and swallows the data block the same way, so memcached's answer to the set form is the oracle for
// leasecached's answer to the lease-set form. Each script stores "old" first and reads the key after, so
// the comparison also covers what the error did to the key and whether the connection still works.
func leaseSetErrorCases() []struct{ name, set, leaseSet string } {
	big := strings.Repeat("x", leaseSetTooLarge)
	longKey := keyOfLen(251) // memcached's KEY_MAX_LENGTH is 250
	return []struct{ name, set, leaseSet string }{
		{"too few tokens", "set $k 1 0\r\n", "lease-set $k 5 1 0\r\n"},
		{"key only", "set $k\r\n", "lease-set $k\r\n"},
		{"too many tokens", "set $k 1 0 2 3 4 5\r\nhi\r\n", "lease-set $k 5 1 0 2 3 4\r\nhi\r\n"},
		{"bad flags", "set $k x 0 2\r\nhi\r\n", "lease-set $k 5 x 0 2\r\nhi\r\n"},
		{"negative flags", "set $k -1 0 2\r\nhi\r\n", "lease-set $k 5 -1 0 2\r\nhi\r\n"},
		{"bad exptime", "set $k 1 x 2\r\nhi\r\n", "lease-set $k 5 1 x 2\r\nhi\r\n"},
		{"bad length", "set $k 1 0 x\r\nhi\r\n", "lease-set $k 5 1 0 x\r\nhi\r\n"},
		{"negative length", "set $k 1 0 -1\r\nhi\r\n", "lease-set $k 5 1 0 -1\r\nhi\r\n"},
		{"bad token", "cas $k 1 0 2 x\r\nhi\r\n", "lease-set $k x 1 0 2\r\nhi\r\n"},
		{"negative token", "cas $k 1 0 2 -5\r\nhi\r\n", "lease-set $k -5 1 0 2\r\nhi\r\n"},
		{"token above 2^64-1", "cas $k 1 0 2 18446744073709551616\r\nhi\r\n",
			"lease-set $k 18446744073709551616 1 0 2\r\nhi\r\n"},
		{"key too long", "set " + longKey + " 1 0 2\r\nhi\r\n", "lease-set " + longKey + " 5 1 0 2\r\nhi\r\n"},
		{"bad data chunk", "set $k 1 0 2\r\nhiX\r\n", "lease-set $k 5 1 0 2\r\nhiX\r\n"},
		// Too large: the oracle is cas, not set. memcached drops the old value after a refused plain set
		// (its "avoid stale data" unlink) but not after a refused conditional store, and lease-set is one:
		// leases.md has a refused lease-set leave the cache exactly as it was.
		{"too large, data swallowed", fmt.Sprintf("cas $k 1 0 %d 5\r\n%s\r\n", len(big), big),
			fmt.Sprintf("lease-set $k 5 1 0 %d\r\n%s\r\n", len(big), big)},
		{"too large noreply", fmt.Sprintf("cas $k 1 0 %d 5 noreply\r\n%s\r\n", len(big), big),
			fmt.Sprintf("lease-set $k 5 1 0 %d noreply\r\n%s\r\n", len(big), big)},
	}
}

// leaseErrorChunk is the piece size of the chunked sends of the large cases.
const leaseErrorChunk = 4096

// TestLeaseSetErrors compares leasecached's reply to each malformed lease-set with memcached's reply to
// the same mistake in set, whole and split across reads.
func TestLeaseSetErrors(t *testing.T) {
	requireLeases(t)
	mc, lc := startPair(t)
	for i, tc := range leaseSetErrorCases() {
		for _, mode := range []sendMode{wholeWrite, randomChunks} {
			t.Run(tc.name+"/"+mode.String(), func(t *testing.T) {
				prefix := runPrefix(i, mode)
				wrap := func(s string) []string {
					return []string{"set $k 0 0 3\r\nold\r\n", s, "get $k\r\n"}
				}
				sr := scriptRun{mode: mode, prefix: prefix}
				if len(tc.set) > leaseErrorChunk {
					sr.chunk = leaseErrorChunk // random 1..17-byte pieces of 2 MiB would take minutes
				}
				sr.steps = wrap(tc.set)
				want := normalize(runScript(mc, sr), prefix)
				sr.steps = wrap(tc.leaseSet)
				got := normalize(runScript(lc, sr), prefix)
				if got != want {
					t.Errorf("lease-set form vs memcached's set form:\n%s", describeDiff(want, got))
				}
			})
		}
	}
}
