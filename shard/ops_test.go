package shard

import (
	"fmt"
	"testing"
	"unsafe"
)

// step is one operation of a scripted scenario and its expected outcome.
type step struct {
	op    string // set add replace append prepend cas delete touch get incr decr gat
	key   string
	val   string
	flags uint32
	exp   int64
	cas   uint64 // for cas; casPrev means "the CAS of the last get"
	want  Result
	// for get/gat/incr/decr
	hit     bool
	wantVal string
	wantFl  uint32
	wantN   uint64
}

const casPrev = ^uint64(0)

func run(t *testing.T, s *Store, steps []step) {
	t.Helper()
	var lastCas uint64
	for i, st := range steps {
		where := fmt.Sprintf("step %d (%s %s)", i, st.op, st.key)
		cas := st.cas
		if cas == casPrev {
			cas = lastCas
		}
		switch st.op {
		case "set", "add", "replace", "append", "prepend", "cas":
			mode := map[string]Mode{"set": ModeSet, "add": ModeAdd, "replace": ModeReplace,
				"append": ModeAppend, "prepend": ModePrepend, "cas": ModeCas}[st.op]
			if r := s.Store(mode, []byte(st.key), st.flags, st.exp, []byte(st.val), cas); r != st.want {
				t.Fatalf("%s: %v, want %v", where, r, st.want)
			}
		case "delete":
			if r := s.Delete([]byte(st.key)); r != st.want {
				t.Fatalf("%s: %v, want %v", where, r, st.want)
			}
		case "touch":
			if r := s.Touch([]byte(st.key), st.exp); r != st.want {
				t.Fatalf("%s: %v, want %v", where, r, st.want)
			}
		case "get", "gat":
			var v []byte
			var info Info
			var ok bool
			if st.op == "gat" {
				v, info, ok = s.GetAndTouch(nil, []byte(st.key), st.exp)
			} else {
				v, info, ok = s.Get(nil, []byte(st.key))
			}
			if ok != st.hit || (ok && (string(v) != st.wantVal || info.Flags != st.wantFl || info.Len != len(v))) {
				t.Fatalf("%s: %q %+v %v, want %q flags %d hit %v", where, v, info, ok, st.wantVal, st.wantFl, st.hit)
			}
			if ok {
				lastCas = info.Cas
			}
		case "incr", "decr":
			n, r := s.Arith([]byte(st.key), st.op == "incr", st.wantN)
			if r != st.want {
				t.Fatalf("%s: %v, want %v", where, r, st.want)
			}
			_ = n
		default:
			t.Fatalf("bad op %q", st.op)
		}
	}
}

func TestStoreModes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"set then get", []step{
			{op: "set", key: "k", val: "v1", flags: 7, want: Stored},
			{op: "get", key: "k", hit: true, wantVal: "v1", wantFl: 7},
			{op: "set", key: "k", val: "v2", want: Stored},
			{op: "get", key: "k", hit: true, wantVal: "v2"},
		}},
		{"empty value", []step{
			{op: "set", key: "k", val: "", want: Stored},
			{op: "get", key: "k", hit: true, wantVal: ""},
		}},
		{"add", []step{
			{op: "add", key: "k", val: "a", want: Stored},
			{op: "add", key: "k", val: "b", want: NotStored},
			{op: "get", key: "k", hit: true, wantVal: "a"},
		}},
		{"replace", []step{
			{op: "replace", key: "k", val: "a", want: NotStored},
			{op: "get", key: "k"},
			{op: "set", key: "k", val: "a", want: Stored},
			{op: "replace", key: "k", val: "b", flags: 3, want: Stored},
			{op: "get", key: "k", hit: true, wantVal: "b", wantFl: 3},
		}},
		{"append prepend keep flags", []step{
			{op: "append", key: "k", val: "x", want: NotStored},
			{op: "prepend", key: "k", val: "x", want: NotStored},
			{op: "set", key: "k", val: "mid", flags: 9, want: Stored},
			{op: "append", key: "k", val: "_end", flags: 1, want: Stored},
			{op: "prepend", key: "k", val: "start_", flags: 2, want: Stored},
			{op: "get", key: "k", hit: true, wantVal: "start_mid_end", wantFl: 9},
		}},
		{"append with cas", []step{
			{op: "set", key: "k", val: "a", want: Stored},
			{op: "get", key: "k", hit: true, wantVal: "a"},
			{op: "append", key: "k", val: "b", cas: 12345, want: Exists},
			{op: "append", key: "k", val: "b", cas: casPrev, want: Stored},
			{op: "get", key: "k", hit: true, wantVal: "ab"},
		}},
		{"cas", []step{
			{op: "cas", key: "k", val: "a", cas: 1, want: NotFound},
			{op: "set", key: "k", val: "a", want: Stored},
			{op: "get", key: "k", hit: true, wantVal: "a"},
			{op: "cas", key: "k", val: "b", cas: 0, want: Exists},
			{op: "cas", key: "k", val: "b", cas: 999999, want: Exists},
			{op: "cas", key: "k", val: "b", flags: 4, cas: casPrev, want: Stored},
			{op: "cas", key: "k", val: "c", cas: casPrev, want: Exists}, // unique changed
			{op: "get", key: "k", hit: true, wantVal: "b", wantFl: 4},
		}},
		{"delete", []step{
			{op: "delete", key: "k", want: NotFound},
			{op: "set", key: "k", val: "a", want: Stored},
			{op: "delete", key: "k", want: Deleted},
			{op: "get", key: "k"},
			{op: "delete", key: "k", want: NotFound},
		}},
		{"touch", []step{
			{op: "touch", key: "k", exp: 10, want: NotFound},
			{op: "set", key: "k", val: "a", want: Stored},
			{op: "touch", key: "k", exp: 10, want: Touched},
			{op: "get", key: "k", hit: true, wantVal: "a"},
		}},
		{"bad keys", []step{
			{op: "set", key: "", val: "a", want: NotStored},
			{op: "set", key: string(make([]byte, MaxKeyLen+1)), val: "a", want: NotStored},
			{op: "set", key: string(make([]byte, MaxKeyLen)), val: "a", want: Stored},
			{op: "get", key: string(make([]byte, MaxKeyLen)), hit: true, wantVal: "a"},
			{op: "delete", key: "", want: NotFound},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newStore(t, Config{})
			run(t, s, tc.steps)
		})
	}
}

// Every modification gets a fresh, increasing CAS; touch and gat keep it.
func TestCasUniques(t *testing.T) {
	s, _ := newStore(t, Config{})
	k := []byte("k")
	last := uint64(0)
	fresh := func(what string) {
		t.Helper()
		_, info := mustGet(t, s, "k")
		if info.Cas <= last {
			t.Fatalf("%s: cas %d not above %d", what, info.Cas, last)
		}
		last = info.Cas
	}
	same := func(what string) {
		t.Helper()
		if _, info := mustGet(t, s, "k"); info.Cas != last {
			t.Fatalf("%s changed cas %d -> %d", what, last, info.Cas)
		}
	}
	s.Store(ModeSet, k, 0, 0, []byte("1"), 0)
	fresh("set")
	s.Store(ModeReplace, k, 0, 0, []byte("2"), 0)
	fresh("replace")
	s.Store(ModeAppend, k, 0, 0, []byte("0"), 0)
	fresh("append")
	s.Store(ModePrepend, k, 0, 0, []byte("1"), 0)
	fresh("prepend")
	s.Store(ModeCas, k, 0, 0, []byte("5"), last)
	fresh("cas")
	s.Arith(k, true, 1)
	fresh("incr in place")
	s.Arith(k, true, 100)
	fresh("incr grow")
	s.Arith(k, false, 1)
	fresh("decr")
	s.Touch(k, 100)
	same("touch")
	s.GetAndTouch(nil, k, 200)
	same("gat")
	s.Store(ModeAdd, k, 0, 0, []byte("x"), 0)
	same("failed add")
}

// Expected values were taken from memcached 1.6.18 over the text protocol:
// a get after incr/decr must return the same bytes.
func TestArith(t *testing.T) {
	for _, tc := range []struct {
		name    string
		val     string
		incr    bool
		delta   uint64
		want    Result
		wantN   uint64
		wantVal string // what a get returns afterwards
	}{
		{"incr", "1", true, 1, Stored, 2, "2"},
		{"decr pads in place", "100", false, 95, Stored, 5, "5  "},
		{"decr floors at zero", "5", false, 10, Stored, 0, "0"},
		{"incr grows the item", "9", true, 2, Stored, 11, "11"},
		{"incr wraps", "18446744073709551615", true, 2, Stored, 1, "1                   "},
		{"leading space", " 5", true, 1, Stored, 6, "6 "},
		{"plus sign", "+5", true, 2, Stored, 7, "7 "},
		{"minus zero", "-0", true, 1, Stored, 1, "1 "},
		{"minus wraps to small", "-18446744073709551615", true, 1, Stored, 2, "2                    "},
		{"trailing text after space", "5 ab", true, 2, Stored, 7, "7   "},
		{"leading zeros", "0000000000000000000005", true, 2, Stored, 7, "7                     "},
		{"trailing NUL", "5\x00", true, 1, Stored, 6, "6 "},
		{"negative", "-1", true, 1, NonNumeric, 0, "-1"},
		{"overflow", "18446744073709551616", true, 2, NonNumeric, 0, "18446744073709551616"},
		{"spaces only", "   ", true, 2, NonNumeric, 0, "   "},
		{"trailing letter", "5a", true, 2, NonNumeric, 0, "5a"},
		{"empty", "", true, 2, NonNumeric, 0, ""},
		{"sign then space", "- 5", true, 1, NonNumeric, 0, "- 5"},
		{"hex", "0x10", true, 1, NonNumeric, 0, "0x10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newStore(t, Config{})
			s.Store(ModeSet, []byte("c"), 3, 0, []byte(tc.val), 0)
			n, r := s.Arith([]byte("c"), tc.incr, tc.delta)
			if r != tc.want || n != tc.wantN {
				t.Fatalf("arith: %d %v, want %d %v", n, r, tc.wantN, tc.want)
			}
			v, info := mustGet(t, s, "c")
			if v != tc.wantVal || info.Flags != 3 {
				t.Fatalf("get after: %q flags %d, want %q flags 3", v, info.Flags, tc.wantVal)
			}
		})
	}
	s, _ := newStore(t, Config{})
	if _, r := s.Arith([]byte("none"), true, 1); r != NotFound {
		t.Fatalf("missing key: %v", r)
	}
}

func TestParseCounterMatchesStrtoull(t *testing.T) {
	for _, tc := range []struct {
		in string
		n  uint64
		ok bool
	}{
		{"0", 0, true}, {"42", 42, true}, {"\t\n42", 42, true}, {"42\r", 42, true},
		{"18446744073709551615", 1<<64 - 1, true}, {"18446744073709551616", 0, false},
		{"99999999999999999999999", 0, false}, {"-", 0, false}, {"+", 0, false},
		{"--1", 0, false}, {"1-", 0, false}, {"-9223372036854775808", 0, false},
		{"-9223372036854775809", 9223372036854775807, true},
	} {
		n, ok := parseCounter([]byte(tc.in))
		if n != tc.n || ok != tc.ok {
			t.Errorf("%q: %d %v, want %d %v", tc.in, n, ok, tc.n, tc.ok)
		}
	}
}

// memcached's -I accounting: with the default 1 MiB limit and a 1-byte key
// the largest value is 1048516 bytes, 4 less with non-zero flags.
func TestItemSizeLimitMatchesMemcached(t *testing.T) {
	s, _ := newStore(t, Config{})
	for _, tc := range []struct {
		n     int
		flags uint32
		want  Result
	}{
		{1048516, 0, Stored},
		{1048517, 0, TooLarge},
		{1048512, 7, Stored},
		{1048513, 7, TooLarge},
	} {
		if r := s.Store(ModeSet, []byte("k"), tc.flags, 0, pattern(tc.n, tc.n), 0); r != tc.want {
			t.Errorf("value %d flags %d: %v, want %v", tc.n, tc.flags, r, tc.want)
		}
	}
}

func TestTooLargeSetDeletesOldValue(t *testing.T) {
	big := make([]byte, 2<<20)
	for _, tc := range []struct {
		mode    Mode
		want    Result
		survive bool
	}{
		{ModeSet, TooLarge, false},
		{ModeReplace, TooLarge, true},
		{ModeAdd, TooLarge, true},
		{ModeCas, TooLarge, true},
		{ModeAppend, TooLarge, true},
	} {
		s, _ := newStore(t, Config{})
		set(t, s, "k", "old")
		if r := s.Store(tc.mode, []byte("k"), 0, 0, big, 1); r != tc.want {
			t.Fatalf("%v: %v", tc.mode, r)
		}
		_, _, ok := s.Get(nil, []byte("k"))
		if ok != tc.survive {
			t.Fatalf("%v: old value present=%v, want %v", tc.mode, ok, tc.survive)
		}
	}
}

func TestAppendBeyondLimitIsNotStored(t *testing.T) {
	s, _ := newStore(t, Config{})
	if r := s.Store(ModeSet, []byte("a"), 0, 0, make([]byte, 1<<20-100), 0); r != Stored {
		t.Fatal(r)
	}
	if r := s.Store(ModeAppend, []byte("a"), 0, 0, make([]byte, 50), 0); r != NotStored {
		t.Fatalf("append past -I: %v", r)
	}
	if _, info := mustGet(t, s, "a"); info.Len != 1<<20-100 {
		t.Fatalf("value changed: %d", info.Len)
	}
}

func TestResultAndModeStrings(t *testing.T) {
	if Stored.String() != "STORED" || NonNumeric.String() != "NON_NUMERIC" || Result(0).String() != "RESULT?" {
		t.Fatal("result names")
	}
	if ModeCas.String() != "cas" || Mode(99).String() != "mode?" {
		t.Fatal("mode names")
	}
}

// Each shard's lock and the fields every find writes share one cache line, with nothing of another shard
// but its unused padding: the shard is whole lines long, ends in 8 bytes of padding, and the shards start
// at most 8 bytes past a line (Go's allocation header).
func TestShardLayout(t *testing.T) {
	var sh shard
	if size := unsafe.Sizeof(sh); size%64 != 0 {
		t.Errorf("a shard is %d bytes, not whole cache lines: re-pad it", size)
	}
	for name, off := range map[string]uintptr{"mu": unsafe.Offsetof(sh.mu), "missCause": unsafe.Offsetof(sh.missCause),
		"foundSlot": unsafe.Offsetof(sh.foundSlot), "totalItems": unsafe.Offsetof(sh.totalItems)} {
		if off+8 > 64-8 {
			t.Errorf("%s at offset %d: it could be pushed off the lock's cache line", name, off)
		}
	}
	if last := unsafe.Offsetof(sh.reclaimMid); last+1 > unsafe.Sizeof(sh)-8 {
		t.Errorf("the last field ends at %d of %d: the padding is under 8 bytes", last+1, unsafe.Sizeof(sh))
	}
	for _, n := range []int{1, 3, 4, 16, 37, MaxShards} {
		s, _ := newStore(t, Config{MemoryLimit: 512 << 20, Shards: n})
		if p := uintptr(unsafe.Pointer(&s.shards[0])); p%64 > 8 {
			t.Errorf("%d shards start at %#x: %d bytes past a cache line", n, p, p%64)
		}
	}
}
