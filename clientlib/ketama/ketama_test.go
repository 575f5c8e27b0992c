package ketama

import (
	"fmt"
	"testing"
)

// The expected placements below come from a real twemproxy (nutcracker 0.5.0, `hash: md5`,
// `distribution: ketama`) in front of memcached on 127.0.0.1:21201..21203: keys were set through the
// proxy and found by reading each backend directly. clientlib's TestKetamaMatchesTwemproxy repeats
// that experiment live with 1000 keys per pool.
func TestPlacementMatchesTwemproxyFixture(t *testing.T) {
	names := []string{"127.0.0.1:21201", "127.0.0.1:21202", "127.0.0.1:21203"}
	tests := []struct {
		name    string
		prefix  string
		weights []int
		want    []int
	}{
		{"equal weights", "fx:", []int{1, 1, 1},
			[]int{0, 1, 1, 2, 2, 0, 2, 0, 1, 1, 1, 1, 2, 1, 2, 0, 0, 2, 1, 0, 1, 1, 2, 2}},
		{"weights 1,2,3", "fxw:", []int{1, 2, 3},
			[]int{2, 1, 2, 2, 2, 2, 0, 0, 0, 1, 1, 2, 2, 2, 1, 0, 2, 0, 2, 0, 2, 1, 2, 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nodes := make([]Node, len(names))
			for i, n := range names {
				nodes[i] = Node{Name: n, Weight: tc.weights[i]}
			}
			r := New(nodes)
			for i, want := range tc.want {
				key := fmt.Sprintf("%s%d", tc.prefix, i)
				if got := r.Get(key); got != want {
					t.Errorf("Get(%q) = %d, twemproxy chose %d", key, got, want)
				}
			}
		})
	}
}

func TestPointsPerNode(t *testing.T) {
	tests := []struct {
		weights []int
		want    int
	}{
		{[]int{1}, 160},
		{[]int{1, 1, 1}, 480},
		{[]int{0, 0}, 320},               // weight below 1 counts as 1
		{[]int{1, 2, 3}, 80 + 160 + 240}, // floor(w/6 * 40 * 3) * 4 each
		{[]int{1, 1, 2}, 120 + 120 + 240},
	}
	for _, tc := range tests {
		nodes := make([]Node, len(tc.weights))
		for i, w := range tc.weights {
			nodes[i] = Node{Name: fmt.Sprintf("n%d", i), Weight: w}
		}
		if got := New(nodes).Points(); got != tc.want {
			t.Errorf("weights %v: %d points, want %d", tc.weights, got, tc.want)
		}
	}
}

func TestNodeName(t *testing.T) {
	tests := []struct{ addr, want string }{
		{"10.0.0.1:11211", "10.0.0.1"}, // libmemcached leaves the default port out
		{"10.0.0.1:11212", "10.0.0.1:11212"},
		{"cache-a:22122", "cache-a:22122"},
		{"[::1]:11211", "::1"},
		{"no-port", "no-port"},
		{"/run/memcached/memcached.sock", "/run/memcached/memcached.sock:"}, // twemproxy's name for a socket
		{"/tmp/x:11211", "/tmp/x:11211:"},                                   // a path, even with a colon
	}
	for _, tc := range tests {
		if got := NodeName(tc.addr); got != tc.want {
			t.Errorf("NodeName(%q) = %q, want %q", tc.addr, got, tc.want)
		}
	}
}

func TestEmptyRingAndBalance(t *testing.T) {
	if got := New(nil).Get("k"); got != -1 {
		t.Fatalf("empty ring Get = %d", got)
	}
	r := New([]Node{{Name: "a"}, {Name: "b"}, {Name: "c"}, {Name: "d"}})
	counts := make([]int, 4)
	const n = 40000
	for i := range n {
		counts[r.Get(fmt.Sprintf("key-%d", i))]++
	}
	for i, c := range counts {
		if c < n/4*7/10 || c > n/4*13/10 {
			t.Errorf("node %d owns %d of %d keys: more than 30%% off an even share", i, c, n)
		}
	}
}

// TestRemovingNodeMovesOnlyItsKeys is the consistent-hashing promise: keys of surviving nodes stay.
func TestRemovingNodeMovesOnlyItsKeys(t *testing.T) {
	all := New([]Node{{Name: "a"}, {Name: "b"}, {Name: "c"}})
	without := New([]Node{{Name: "a"}, {Name: "c"}})
	for i := range 5000 {
		key := fmt.Sprintf("k%d", i)
		before := all.Get(key)
		after := without.Get(key)
		mapped := []int{0, 2}[after]
		if before != 1 && mapped != before {
			t.Fatalf("%s moved from node %d to %d although its node survived", key, before, mapped)
		}
	}
}

func TestGetAllocatesNothing(t *testing.T) {
	r := New([]Node{{Name: "a"}, {Name: "b"}})
	long := fmt.Sprintf("%0250d", 7)
	if n := testing.AllocsPerRun(1000, func() { r.Get("user:42:profile"); r.Get(long) }); n != 0 {
		t.Fatalf("Get allocates %v times per call", n)
	}
}

func BenchmarkGet(b *testing.B) {
	r := New([]Node{{Name: "a"}, {Name: "b"}, {Name: "c"}})
	b.ReportAllocs()
	for b.Loop() {
		r.Get("user:42:profile")
	}
}
