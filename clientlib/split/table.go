package split

import (
	"slices"
	"strconv"
	"strings"

	"github.com/leasecached/leasecached/clientlib"
	"github.com/leasecached/leasecached/clientlib/internal/placement"
)

// table is an immutable snapshot: the split keys and their copies' names over one server list. The
// Client swaps in a new one when the server list or the hot-listed keys change; lookups never lock.
type table struct {
	ring placement.Ring
	keys map[string]*entry
}

// entry is one split key's copies.
type entry struct {
	names []string // names[0] is the key itself
	hot   bool     // split because a server listed it (not in Config.Keys): replicas' TTL is capped
}

// copyNames names key's copies over r: the key itself, then, for each further copy, the first
// candidate "<key>#split<c>" (c = 1, 2, ...) whose server no earlier copy has. Deterministic in the
// key, the server list and n, so every process with the same list agrees. Fewer than n names come
// back when r has fewer servers, when names would exceed clientlib.MaxKeyLength, or after
// maxCandidates tries.
func copyNames(r placement.Ring, key string, n int) []string {
	n = min(n, r.Servers())
	names := []string{key}
	used := []string{r.Addr(key)}
	for c := 1; len(names) < n && c <= maxCandidates; c++ {
		name := key + Suffix + strconv.Itoa(c)
		if len(name) > clientlib.MaxKeyLength {
			break
		}
		if addr := r.Addr(name); !slices.Contains(used, addr) {
			names = append(names, name)
			used = append(used, addr)
		}
	}
	return names
}

// baseOf returns the key a copy's name belongs to, or the name itself when it is no copy's.
func baseOf(name string) string {
	i := strings.LastIndex(name, Suffix)
	if i <= 0 {
		return name
	}
	digits := name[i+len(Suffix):]
	if digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return name
	}
	return name[:i]
}

// buildTable names the copies of the configured keys and of the hot-listed ones over r. A key with a
// single copy (one server) is not split at all.
func buildTable(r placement.Ring, n int, static []string, hot map[string]struct{}) *table {
	t := &table{ring: r, keys: make(map[string]*entry, len(static)+len(hot))}
	for _, k := range static {
		if names := copyNames(r, k, n); len(names) > 1 {
			t.keys[k] = &entry{names: names}
		}
	}
	for k := range hot {
		if _, ok := t.keys[k]; ok {
			continue
		}
		if names := copyNames(r, k, n); len(names) > 1 {
			t.keys[k] = &entry{names: names, hot: true}
		}
	}
	return t
}
