package split

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/leasecached/leasecached/clientlib"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// addrs are servers that are never dialled: placement needs only the list.
func addrs(n int) []clientlib.Server {
	s := make([]clientlib.Server, n)
	for i := range s {
		s[i] = clientlib.Server{Addr: "127.0.0.1:" + strconv.Itoa(40001+i)}
	}
	return s
}

// TestCopiesOnDistinctServers: for many keys, each of the N copies lands on its own server (as the
// client routes them, ServerFor), under both distributions, and two clients with the same list name
// the copies alike (every process must agree).
func TestCopiesOnDistinctServers(t *testing.T) {
	const keys = 400
	for _, dist := range []struct {
		name string
		d    clientlib.Distribution
	}{{"ketama", clientlib.Ketama}, {"modulo", clientlib.Modulo}} {
		for _, tc := range []struct{ servers, copies, want int }{
			{5, 2, 2}, {5, 3, 3}, {5, 4, 4}, {5, 5, 5}, {3, 5, 3}, {2, 2, 2}, {1, 3, 1},
		} {
			t.Run(fmt.Sprintf("%s/%d servers/%d copies", dist.name, tc.servers, tc.copies), func(t *testing.T) {
				cfg := clientlib.Config{Servers: addrs(tc.servers), Distribution: dist.d}
				var list []string
				for k := 0; k < keys; k++ {
					list = append(list, "hot:"+strconv.Itoa(k))
				}
				s1 := newSplit(t, newClient(t, cfg), Config{Keys: list, Copies: tc.copies})
				s2 := newSplit(t, newClient(t, cfg), Config{Keys: list, Copies: tc.copies})
				for _, k := range list {
					names := s1.Copies(k)
					require.Len(t, names, tc.want, k)
					require.Equal(t, k, names[0], "copy 0 is the key itself")
					require.Equal(t, names, s2.Copies(k), "another process names %s's copies differently", k)
					seen := map[string]string{}
					for _, n := range names {
						addr, err := s1.c.ServerFor(n)
						require.NoError(t, err)
						require.NotContains(t, seen, addr, "%s and %s share %s", seen[addr], n, addr)
						seen[addr] = n
					}
				}
			})
		}
	}
}

// TestCopiesFollowTheServerList: SetServers renames the copies over the new list (still distinct),
// and a key not split is its own only copy.
func TestCopiesFollowTheServerList(t *testing.T) {
	c := newClient(t, clientlib.Config{Servers: addrs(2), Distribution: clientlib.Ketama})
	s := newSplit(t, c, Config{Keys: []string{"k"}, Copies: 4})
	assert.Len(t, s.Copies("k"), 2)
	assert.Equal(t, []string{"other"}, s.Copies("other"))
	require.NoError(t, c.SetServers(addrs(5)...))
	names := s.Copies("k")
	require.Len(t, names, 4)
	seen := map[string]bool{}
	for _, n := range names {
		addr, err := c.ServerFor(n)
		require.NoError(t, err)
		require.False(t, seen[addr], "two copies on %s", addr)
		seen[addr] = true
	}
	assert.Equal(t, 1, s.Stats().SplitKeys)
}

// TestConfigRefused: keys that cannot be split are refused by New.
func TestConfigRefused(t *testing.T) {
	c := newClient(t, clientlib.Config{Servers: addrs(3)})
	long := string(make([]byte, 0))
	for len(long) < clientlib.MaxKeyLength-5 {
		long += "k"
	}
	for _, tc := range []struct{ name, key string }{
		{"space", "a b"}, {"empty", ""}, {"too long for its copies", long}, {"a copy's name", "k" + Suffix + "2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(c, Config{Keys: []string{tc.key}})
			require.Error(t, err)
		})
	}
}

func TestBaseOf(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"k#split3", "k"}, {"k#split", "k#split"}, {"k#splitx", "k#splitx"}, {"#split1", "#split1"},
		{"a#split1#split2", "a#split1"}, {"plain", "plain"},
	} {
		assert.Equal(t, tc.want, baseOf(tc.in), tc.in)
	}
}

// TestLookupAllocatesNothing: what splitting adds to a request (is the key split, which copy) costs
// no allocation, for a key split or not.
func TestLookupAllocatesNothing(t *testing.T) {
	s := newSplit(t, newClient(t, clientlib.Config{Servers: addrs(3)}), Config{Keys: []string{"hot"}})
	for _, key := range []string{"hot", "other"} {
		allocs := testing.AllocsPerRun(1000, func() {
			if e := s.lookup(key); e != nil {
				_ = e.names[s.pick(e)]
			}
		})
		assert.Zero(t, allocs, key)
	}
}
