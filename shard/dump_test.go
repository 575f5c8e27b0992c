package shard

import (
	"fmt"
	"slices"
	"testing"
)

// coldKeys lists class id's cold items' keys, sorted.
func coldKeys(s *Store, id int) []string {
	var keys []string
	s.ColdItems(id, func(it DumpItem) bool {
		keys = append(keys, string(it.Key))
		return true
	})
	slices.Sort(keys)
	return keys
}

func TestColdItems(t *testing.T) {
	type step struct {
		op  string // "set", "get", "tick", "ttl" (set with a 5 s exptime), "del"
		key string
	}
	old := func(keys ...string) []step { // stored a while ago
		var st []step
		for _, k := range keys {
			st = append(st, step{"set", k})
		}
		return append(st, step{"tick", ""}, step{"tick", ""})
	}
	cases := []struct {
		name  string
		steps []step
		want  []string
	}{
		{"lone item just stored is cold (over the hot share)", []step{{"set", "a"}}, []string{"a"}},
		{"items all stored this second are cold", []step{{"set", "a"}, {"set", "b"}, {"set", "c"}}, []string{"a", "b", "c"}},
		{"newest item within the hot share stays hot", append(old("a", "b", "c", "d", "e", "f"), step{"set", "g"}),
			[]string{"a", "b", "c", "d", "e", "f"}},
		{"read twice: warm", append(old("a", "b", "c", "d"), step{"get", "b"}, step{"get", "b"}),
			[]string{"a", "c", "d"}},
		{"read once: still cold", append(old("a", "b", "c"), step{"get", "b"}), []string{"a", "b", "c"}},
		{"active items over the warm share: least recently read go cold", append(old("a", "b", "c", "d"),
			step{"get", "a"}, step{"get", "a"}, step{"tick", ""}, step{"get", "b"}, step{"get", "b"},
			step{"tick", ""}, step{"get", "c"}, step{"get", "c"}),
			[]string{"a", "b", "d"}}, // four equal items: only the newest fits in 40%
		{"active item alone in its class is cold", []step{{"set", "a"}, {"get", "a"}, {"get", "a"}, {"tick", ""}},
			[]string{"a"}},
		{"expired and deleted items are not listed", append(old("a", "b"), step{"ttl", "c"}, step{"tick", ""},
			step{"tick", ""}, step{"tick", ""}, step{"tick", ""}, step{"tick", ""}, step{"del", "b"}),
			[]string{"a"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, clk := newStore(t, Config{})
			for _, st := range tc.steps {
				switch st.op {
				case "set":
					set(t, s, st.key, "value")
				case "ttl":
					if r := s.Store(ModeSet, []byte(st.key), 0, 5, []byte("value"), 0); r != Stored {
						t.Fatal(r)
					}
				case "get":
					mustGet(t, s, st.key)
				case "del":
					s.Delete([]byte(st.key))
				case "tick":
					clk.advance(1)
				}
			}
			id, _ := s.classes.For(headerLen(layoutOf(0, 0, 5), false) + 1 + len("value"))
			if got := coldKeys(s, id); !slices.Equal(got, tc.want) {
				t.Fatalf("cold keys %q, want %q", got, tc.want)
			}
			if got := coldKeys(s, id+1); len(got) != 0 {
				t.Fatalf("class %d lists %q", id+1, got)
			}
		})
	}
}

// Every shard is visited, in batches, and the callback can stop the listing.
func TestColdItemsShardsAndStop(t *testing.T) {
	s, clk := newStore(t, Config{Shards: 4})
	const n = 3 * dumpBatch
	for i := range n {
		set(t, s, fmt.Sprintf("k%05d", i), "v")
	}
	clk.advance(2)
	id, _ := s.classes.For(headerLen(layoutOf(0, 0, 1), false) + 6 + 1)
	if got := coldKeys(s, id); len(got) != n {
		t.Fatalf("listed %d of %d", len(got), n)
	}
	seen := 0
	s.ColdItems(id, func(DumpItem) bool { seen++; return seen < 10 })
	if seen != 10 {
		t.Fatalf("callback ran %d times after asking to stop at 10", seen)
	}
	s.ColdItems(-1, func(DumpItem) bool { t.Fatal("class -1 listed"); return false })
	s.ColdItems(s.classes.Count(), func(DumpItem) bool { t.Fatal("class past the last listed"); return false })
}
