package protocol

import (
	"bytes"
	"strings"
	"testing"
)

var (
	key250 = strings.Repeat("k", KeyMaxLength)
	key251 = strings.Repeat("k", KeyMaxLength+1)
)

// parseCases pairs one request (at the front of the buffer) with the expected single outcome:
// describe(req) on success, describeErr(err) on failure, and the bytes consumed.
// Unless noted, behaviour was checked against memcached 1.6.18 (see the oracle test).
var parseCases = []struct {
	name string
	in   string
	want string
	n    int // -1: len(in)
}{
	// framing
	{"empty line crlf", "\r\n", "ERR ERROR", -1},
	{"empty line lf", "\n", "ERR ERROR", -1},
	{"one byte name", "x\r\n", "ERR ERROR", -1},
	{"only spaces", "   \r\n", "ERR ERROR", -1},
	{"unknown", "bogus a b\r\n", "ERR ERROR", -1},
	{"case sensitive", "GET a\r\n", "ERR ERROR", -1},
	{"bare lf ending", "get a\n", "get keys=[a]", -1},
	{"extra spaces", "  get  a   b \r\n", "get keys=[a b]", -1},
	{"tab is part of key", "get a\tb\r\n", "get keys=[a\tb]", -1},
	{"nul truncates line", "set k\x00junk 0 0 1\r\n", "ERR ERROR", -1},
	{"cr only stripped once", "get a\r\r\n", "get keys=[a\r]", -1},
	{"trailing bytes untouched", "version\r\nget", "version", 9},

	// fetches
	{"get", "get a\r\n", "get keys=[a]", -1},
	{"get no key", "get\r\n", "ERR ERROR", -1},
	{"gets", "gets a b c\r\n", "gets keys=[a b c]", -1},
	{"gets no key", "gets\r\n", "ERR ERROR", -1},
	{"bget alias", "bget a\r\n", "get keys=[a]", -1},
	{"get key 250", "get " + key250 + "\r\n", "get keys=[" + key250 + "]", -1},
	{"get key 251", "get a " + key251 + " b\r\n", "ERR CLIENT_ERROR bad command line format", -1},
	{"gat", "gat 10 a b\r\n", "gat keys=[a b] e=10", -1},
	{"gats negative", "gats -1 a\r\n", "gats keys=[a] e=-1", -1},
	{"gat no keys", "gat 0\r\n", "gat", -1},
	{"gat no exptime", "gat\r\n", "ERR ERROR", -1},
	{"gat bad exptime", "gat x a\r\n", "ERR CLIENT_ERROR invalid exptime argument", -1},
	{"gat long key", "gat 1 " + key251 + "\r\n", "ERR CLIENT_ERROR bad command line format", -1},
	{"lease-get", "lease-get a b\r\n", "lease-get keys=[a b]", -1},
	{"lease-get no key", "lease-get\r\n", "ERR ERROR", -1},

	// storage
	{"set", "set k 5 100 5\r\nhello\r\n", `set keys=[k] f=5 e=100 b=5 data="hello"`, -1},
	{"set empty", "set k 0 0 0\r\n\r\n", `set keys=[k] data=""`, -1},
	{"set noreply", "set k 0 0 1 noreply\r\na\r\n", `set keys=[k] b=1 noreply data="a"`, -1},
	{"set extra token ignored", "set k 0 0 1 foo\r\na\r\n", `set keys=[k] b=1 data="a"`, -1},
	{"set data with crlf inside", "set k 0 0 4\r\na\r\nb\r\n", `set keys=[k] b=4 data="a\r\nb"`, -1},
	{"add", "add k 1 2 1\r\na\r\n", `add keys=[k] f=1 e=2 b=1 data="a"`, -1},
	{"replace", "replace k 0 0 1\r\na\r\n", `replace keys=[k] b=1 data="a"`, -1},
	{"append", "append k 0 0 1\r\na\r\n", `append keys=[k] b=1 data="a"`, -1},
	{"prepend", "prepend k 0 0 1\r\na\r\n", `prepend keys=[k] b=1 data="a"`, -1},
	{"cas", "cas k 0 0 1 99\r\na\r\n", `cas keys=[k] b=1 cas=99 data="a"`, -1},
	{"cas noreply", "cas k 0 0 1 99 noreply\r\na\r\n", `cas keys=[k] b=1 cas=99 noreply data="a"`, -1},
	{"cas max unique", "cas k 0 0 1 18446744073709551615\r\na\r\n", `cas keys=[k] b=1 cas=18446744073709551615 data="a"`, -1},
	{"cas missing unique", "cas k 0 0 1\r\na\r\n", "ERR ERROR", len("cas k 0 0 1\r\n")},
	{"cas bad unique", "cas k 0 0 1 x\r\na\r\n", "ERR CLIENT_ERROR bad command line format", len("cas k 0 0 1 x\r\n")},
	{"cas negative unique", "cas k 0 0 1 -1\r\na\r\n", "ERR CLIENT_ERROR bad command line format", len("cas k 0 0 1 -1\r\n")},
	{"lease-set", "lease-set k 77 3 4 1\r\na\r\n", `lease-set keys=[k] f=3 e=4 b=1 cas=77 data="a"`, -1},
	{"lease-set noreply", "lease-set k 77 0 0 1 noreply\r\na\r\n", `lease-set keys=[k] b=1 cas=77 noreply data="a"`, -1},
	{"lease-set bad token", "lease-set k x 0 0 1\r\na\r\n", "ERR CLIENT_ERROR bad command line format", len("lease-set k x 0 0 1\r\n")},
	{"lease-set short", "lease-set k 0 0 1\r\n", "ERR ERROR", -1},
	{"set too few", "set k 0 0\r\n", "ERR ERROR", -1},
	{"set too many", "set k 0 0 1 noreply x\r\n", "ERR ERROR", -1},
	{"set key 251", "set " + key251 + " 0 0 1\r\na\r\n", "ERR CLIENT_ERROR bad command line format", len("set " + key251 + " 0 0 1\r\n")},
	{"set bad flags", "set k abc 0 5\r\nhello\r\n", "ERR CLIENT_ERROR bad command line format", len("set k abc 0 5\r\n")},
	{"set bad flags noreply", "set k abc 0 5 noreply\r\nhello\r\n", "SILENT", len("set k abc 0 5 noreply\r\n")},
	{"set negative flags", "set k -1 0 1\r\n", "ERR CLIENT_ERROR bad command line format", -1},
	{"set bad exptime", "set k 0 x 1\r\n", "ERR CLIENT_ERROR bad command line format", -1},
	{"set negative bytes", "set k 0 0 -1\r\n", "ERR CLIENT_ERROR bad command line format", -1},
	{"set bytes int max", "set k 0 0 2147483646\r\n", "ERR CLIENT_ERROR bad command line format", -1},
	{"set noreply as bytes", "set k 0 0 noreply\r\n", "SILENT", -1},
	{"set flags wrap 32 bits", "set k 4294967296 0 1\r\na\r\n", `set keys=[k] b=1 data="a"`, -1},
	{"set bytes wrap 32 bits", "set k 0 0 4294967297\r\na\r\n", `set keys=[k] b=1 data="a"`, -1},
	{"set exptime wrap 32 bits", "set k 0 4294967295 1\r\na\r\n", `set keys=[k] e=-1 b=1 data="a"`, -1},
	{"set space-terminated number", "set k 0 0 1\tjunk\r\na\r\n", `set keys=[k] b=1 data="a"`, -1},
	{"set plus sign", "set k +1 +2 +1\r\na\r\n", `set keys=[k] f=1 e=2 b=1 data="a"`, -1},
	{"bad data chunk", "set k 0 0 5\r\nhelloXXget k\r\n", "ERR CLIENT_ERROR bad data chunk", len("set k 0 0 5\r\nhelloXX")},
	{"bad data chunk lf", "set k 0 0 3\r\nabc\nget k\r\n", "ERR CLIENT_ERROR bad data chunk", len("set k 0 0 3\r\nabc\ng")},
	{"bad data chunk noreply", "set k 0 0 1 noreply\r\naXX", "SILENT", -1},
	{"too large", "set k 0 0 2000000\r\nabc", "ERR SERVER_ERROR object too large for cache swallow=1999999", -1},
	{"too large noreply", "set k 0 0 2000000 noreply\r\n", "SILENT swallow=2000002", -1},
	{"largest value", "set k 0 0 1048516\r\n" + strings.Repeat("v", 1048516) + "\r\n", "", -1},
	{"too large by one", "set k 0 0 1048517\r\n", "ERR SERVER_ERROR object too large for cache swallow=1048519", -1},
	{"too large with flags", "set k 1 0 1048513\r\n", "ERR SERVER_ERROR object too large for cache swallow=1048515", -1},

	// incr/decr, touch, delete
	{"incr", "incr k 5\r\n", "incr keys=[k] d=5", -1},
	{"decr noreply", "decr k 5 noreply\r\n", "decr keys=[k] d=5 noreply", -1},
	{"incr extra token", "incr k 1 x\r\n", "incr keys=[k] d=1", -1},
	{"incr max", "incr k 18446744073709551615\r\n", "incr keys=[k] d=18446744073709551615", -1},
	{"incr overflow", "incr k 18446744073709551616\r\n", "ERR CLIENT_ERROR invalid numeric delta argument", -1},
	{"incr bad delta", "incr k abc\r\n", "ERR CLIENT_ERROR invalid numeric delta argument", -1},
	{"incr negative delta", "incr k -1\r\n", "ERR CLIENT_ERROR invalid numeric delta argument", -1},
	{"incr bad delta noreply", "incr k x noreply\r\n", "SILENT", -1},
	{"incr key 251", "incr " + key251 + " 1\r\n", "ERR CLIENT_ERROR bad command line format", -1},
	{"incr missing delta", "incr k\r\n", "ERR ERROR", -1},
	{"touch", "touch k 10\r\n", "touch keys=[k] e=10", -1},
	{"touch noreply", "touch k 10 noreply\r\n", "touch keys=[k] e=10 noreply", -1},
	{"touch bad", "touch k x\r\n", "ERR CLIENT_ERROR invalid exptime argument", -1},
	{"touch bad noreply", "touch k x noreply\r\n", "SILENT", -1},
	{"touch short", "touch k\r\n", "ERR ERROR", -1},
	{"delete", "delete k\r\n", "delete keys=[k]", -1},
	{"delete zero", "delete k 0\r\n", "delete keys=[k]", -1},
	{"delete noreply", "delete k noreply\r\n", "delete keys=[k] noreply", -1},
	{"delete zero noreply", "delete k 0 noreply\r\n", "delete keys=[k] noreply", -1},
	{"delete hold time", "delete k 1\r\n", "ERR CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]", -1},
	{"delete zero zero", "delete k 0 0\r\n", "ERR CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]", -1},
	{"delete bad noreply", "delete k x noreply\r\n", "SILENT", -1},
	{"delete too many", "delete k 0 noreply x\r\n", "ERR ERROR", -1},
	{"delete key 251", "delete " + key251 + "\r\n", "ERR CLIENT_ERROR bad command line format", -1},
	{"delete no key", "delete\r\n", "ERR ERROR", -1},

	// admin
	{"flush_all", "flush_all\r\n", "flush_all", -1},
	{"flush_all delay", "flush_all 10\r\n", "flush_all e=10", -1},
	{"flush_all noreply", "flush_all noreply\r\n", "flush_all noreply", -1},
	{"flush_all delay noreply", "flush_all 10 noreply\r\n", "flush_all e=10 noreply", -1},
	{"flush_all extra ignored", "flush_all 1 2\r\n", "flush_all e=1", -1},
	{"flush_all bad", "flush_all x\r\n", "ERR CLIENT_ERROR invalid exptime argument", -1},
	{"flush_all bad noreply", "flush_all x noreply\r\n", "SILENT", -1},
	{"flush_all too many", "flush_all 1 2 3\r\n", "ERR ERROR", -1},
	{"version", "version\r\n", "version", -1},
	{"version args", "version x y\r\n", "version args=[x y]", -1},
	{"verbosity", "verbosity 1\r\n", "verbosity d=1 args=[1]", -1},
	{"verbosity noreply", "verbosity 1 noreply\r\n", "verbosity d=1 noreply args=[1 noreply]", -1},
	{"verbosity missing", "verbosity\r\n", "ERR ERROR", -1},
	{"verbosity bad", "verbosity x\r\n", "ERR CLIENT_ERROR bad command line format", -1},
	{"verbosity only noreply", "verbosity noreply\r\n", "SILENT", -1},

	// cache_memlimit: the limits on the value (8 MB floor, megabytes sanity) are the server's
	{"memlimit", "cache_memlimit 64\r\n", "cache_memlimit d=64", -1},
	{"memlimit plus sign", "cache_memlimit +64\r\n", "cache_memlimit d=64", -1},
	{"memlimit noreply", "cache_memlimit 64 noreply\r\n", "cache_memlimit d=64 noreply", -1},
	{"memlimit extra token ignored", "cache_memlimit 8 x\r\n", "cache_memlimit d=8", -1},
	{"memlimit truncated to 32 bits", "cache_memlimit 4294967304\r\n", "cache_memlimit d=8", -1},
	{"memlimit missing", "cache_memlimit\r\n", "ERR ERROR", -1},
	{"memlimit too many tokens", "cache_memlimit 64 noreply extra\r\n", "ERR ERROR", -1},
	{"memlimit not a number", "cache_memlimit x\r\n", "ERR ERROR", -1},
	{"memlimit negative", "cache_memlimit -1\r\n", "ERR ERROR", -1},
	{"memlimit bad number noreply", "cache_memlimit x noreply\r\n", "SILENT", -1},
	{"memlimit only noreply", "cache_memlimit noreply\r\n", "SILENT", -1},
	{"stats", "stats\r\n", "stats", -1},
	{"stats args", "stats slabs x\r\n", "stats args=[slabs x]", -1},
	{"quit", "quit\r\n", "quit", -1},
	{"shutdown", "shutdown graceful\r\n", "shutdown args=[graceful]", -1},

	// meta
	{"mn", "mn\r\n", "mn", -1},
	{"mn args", "mn x\r\n", "mn args=[x]", -1},
	{"mg", "mg k v t N30 Oabc q\r\n", "mg keys=[k] args=[v t N30 Oabc q]", -1},
	{"mg no flags", "mg k\r\n", "mg keys=[k]", -1},
	{"mg no key", "mg\r\n", "ERR ERROR", -1},
	{"mg key 251", "mg " + key251 + " v\r\n", "ERR CLIENT_ERROR bad command line format", -1},
	{"mg 17 flags", "mg k A B C D E F G H I J K L M N O P Q\r\n", "mg keys=[k] args=[A B C D E F G H I J K L M N O P Q]", -1},
	{"mg 18 flags", "mg k A B C D E F G H I J K L M N O P Q R\r\n", "ERR CLIENT_ERROR options flags are too long", -1},
	{"md 18 flags", "md k A B C D E F G H I J K L M N O P Q R\r\n", "ERR CLIENT_ERROR options flags too long", -1},
	{"md", "md k q\r\n", "md keys=[k] args=[q]", -1},
	{"ma", "ma k D5 MD\r\n", "ma keys=[k] args=[D5 MD]", -1},
	{"ma no key", "ma\r\n", "ERR ERROR", -1},
	{"me", "me k\r\n", "me keys=[k]", -1},
	{"me no key", "me\r\n", "ERR CLIENT_ERROR bad command line format", -1},
	{"unknown meta", "mx\r\n", "ERR ERROR", -1},
	{"ms", "ms k 2 T10 F5 q\r\nab\r\n", `ms keys=[k] f=5 b=2 data="ab" args=[T10 F5 q]`, -1},
	{"ms no flags", "ms k 0\r\n\r\n", `ms keys=[k] data=""`, -1},
	{"ms no key", "ms\r\n", "ERR ERROR", -1},
	{"ms no len", "ms k\r\n", "ERR CLIENT_ERROR bad command line format", -1},
	{"ms bad len", "ms k x\r\n", "ERR CLIENT_ERROR bad command line format", -1},
	{"ms negative len", "ms k -1\r\n", "ERR CLIENT_ERROR bad command line format", -1},
	{"ms key 251 keeps data", "ms " + key251 + " 2\r\nab\r\n", "ERR CLIENT_ERROR bad command line format", len("ms " + key251 + " 2\r\n")},
	{"ms 17 flags keeps data", "ms k 2 A B C D E F G H I J K L M N O P Q\r\nab\r\n", "ERR CLIENT_ERROR options flags too long", len("ms k 2 A B C D E F G H I J K L M N O P Q\r\n")},
	{"ms bad chunk", "ms k 2\r\nabXX", "ERR CLIENT_ERROR bad data chunk", -1},
	{"ms bad chunk quiet still replies", "ms k 2 q\r\nabXX", "ERR CLIENT_ERROR bad data chunk", -1},
	{"ms invalid flag swallows", "ms k 3 Z\r\nabc\r\n", "ERR CLIENT_ERROR invalid flag", -1},
	{"ms invalid flag partial data", "ms k 3 Z\r\na", "ERR CLIENT_ERROR invalid flag swallow=4", -1},
	{"ms duplicate flag", "ms k 2 T T\r\nab\r\n", "ERR CLIENT_ERROR duplicate flag", -1},
	{"ms high byte flag", "ms k 2 \xff\r\nab\r\n", "ERR CLIENT_ERROR duplicate flag", -1},
	{"ms bad token", "ms k 2 N1x\r\nab\r\n", "ERR CLIENT_ERROR bad token in command line format", -1},
	{"ms empty T", "ms k 2 T\r\nab\r\n", "ERR CLIENT_ERROR bad token in command line format", -1},
	{"ms bad F", "ms k 2 Fx\r\nab\r\n", "ERR CLIENT_ERROR bad command line format", -1},
	{"ms bad C", "ms k 2 Cx\r\nab\r\n", "ERR CLIENT_ERROR bad token in command line format", -1},
	{"ms bad J", "ms k 2 J5x\r\nab\r\n", "ERR CLIENT_ERROR invalid numeric initial value", -1},
	{"ms bad D", "ms k 2 D-1\r\nab\r\n", "ERR CLIENT_ERROR invalid numeric delta value", -1},
	{"ms M length", "ms k 2 M\r\nab\r\n", "ERR CLIENT_ERROR incorrect length for M token", -1},
	{"ms bad mode", "ms k 2 MX\r\nab\r\n", "ERR CLIENT_ERROR invalid mode for ms M token", -1},
	{"ms opaque too long", "ms k 2 O" + strings.Repeat("x", 40) + "\r\nab\r\n", "ERR CLIENT_ERROR opaque token too long", -1},
	{"ms bad base64", "ms k 2 b\r\nab\r\n", "ERR CLIENT_ERROR error decoding key", -1},
	{"ms base64", "ms a2V5 2 b\r\nab\r\n", `ms keys=[a2V5] b=2 data="ab" args=[b]`, -1},
	{"ms too large", "ms k 2000000\r\n", "ERR SERVER_ERROR object too large for cache swallow=2000002", -1},
	{"ms too large quiet", "ms k 2000000 q\r\n", "ERR SERVER_ERROR object too large for cache swallow=2000002", -1},
	{"ms flag error beats too large", "ms k 2000000 T\r\n", "ERR CLIENT_ERROR bad token in command line format swallow=2000002", -1},
}

func TestParseTable(t *testing.T) {
	for _, tc := range parseCases {
		t.Run(tc.name, func(t *testing.T) {
			var p Parser
			var req Request
			in := []byte(tc.in)
			n, err := p.Parse(in, &req)
			got := ""
			if err != nil {
				got = describeErr(err)
			} else {
				got = describe(&req)
			}
			wantN := tc.n
			if wantN < 0 {
				wantN = len(in)
			}
			if tc.want != "" && got != tc.want {
				t.Errorf("Parse(%q):\n got  %s\n want %s", trunc(tc.in), got, tc.want)
			}
			if tc.want == "" && err != nil {
				t.Errorf("Parse(%q): unexpected error %s", trunc(tc.in), got)
			}
			if n != wantN {
				t.Errorf("Parse(%q): n = %d, want %d", trunc(tc.in), n, wantN)
			}
		})
	}
}

// TestParseByteByByte feeds every table input one byte at a time: until the outcome is decided
// Parse must consume nothing, and the event sequence must equal the one-shot sequence.
func TestParseByteByByte(t *testing.T) {
	for _, tc := range parseCases {
		t.Run(tc.name, func(t *testing.T) {
			in := []byte(tc.in)
			if len(in) > 64<<10 {
				in = in[:64<<10] // the 1 MB case is covered by TestParseLargeValue
			}
			var p Parser
			whole := drive(&p, [][]byte{in})
			for _, k := range []int{1, 2, 3, 7} {
				got := drive(&p, splitEvery(in, k))
				if !equalStrings(got, whole) {
					t.Fatalf("chunk %d:\n got  %q\n want %q", k, got, whole)
				}
			}
		})
	}
}

// TestParseIncompleteReturnsZero checks the (0, nil) contract on every strict prefix of every
// successfully parsed request.
func TestParseIncompleteReturnsZero(t *testing.T) {
	for _, tc := range parseCases {
		if tc.n >= 0 || strings.HasPrefix(tc.want, "ERR") || strings.HasPrefix(tc.want, "SILENT") || len(tc.in) > 4096 {
			continue
		}
		var p Parser
		var req Request
		in := []byte(tc.in)
		whole, _ := p.Parse(in, &req)
		// Need: once the command line of a request with a data block is in, where the request ends.
		lineEnd, withBlock := bytes.IndexByte(in, '\n')+1, req.Cmd.IsStorage()
		for i := 0; i < len(in); i++ {
			n, err := p.Parse(in[:i], &req)
			if n != 0 || err != nil {
				t.Errorf("%s: prefix %d/%d: n=%d err=%v, want 0, nil", tc.name, i, len(in), n, err)
				break
			}
			want := 0
			if withBlock && i >= lineEnd {
				want = whole
			}
			if got := p.Need(); got != want {
				t.Errorf("%s: prefix %d/%d: Need %d, want %d", tc.name, i, len(in), got, want)
				break
			}
		}
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func trunc(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

func TestParsePipelined(t *testing.T) {
	in := "set a 0 0 1\r\n1\r\nget a b\r\nbogus\r\nincr a 2 noreply\r\n" +
		"set b 0 0 3\r\nxyzQQmn\r\nms k 1 T5\r\nZ\r\nlease-get a\r\nget"
	want := []string{
		`set keys=[a] b=1 data="1"`,
		"get keys=[a b]",
		"ERR ERROR",
		"incr keys=[a] d=2 noreply",
		"ERR CLIENT_ERROR bad data chunk",
		"mn",
		`ms keys=[k] b=1 data="Z" args=[T5]`,
		"lease-get keys=[a]",
		`rest="get" swallow=0`,
	}
	var p Parser
	for _, k := range []int{len(in), 1, 5} {
		got := drive(&p, splitEvery([]byte(in), k))
		if !equalStrings(got, want) {
			t.Fatalf("chunk %d:\n got  %q\n want %q", k, got, want)
		}
	}
}

// TestParseSwallow: a too-large value is answered at once and its data discarded however it
// arrives, after which parsing resumes exactly at the next command.
func TestParseSwallow(t *testing.T) {
	const size = 2_000_000
	in := "set k 0 0 2000000\r\n" + strings.Repeat("y", size) + "\r\nmn\r\n"
	want := []string{"ERR SERVER_ERROR object too large for cache", "mn", `rest="" swallow=0`}
	var p Parser
	for _, k := range []int{len(in), 1 << 16, 4093} {
		got := drive(&p, splitEvery([]byte(in), k))
		if !equalStrings(got, want) {
			t.Fatalf("chunk %d:\n got  %q\n want %q", k, got, want)
		}
	}
}

func TestParseManyKeys(t *testing.T) {
	for _, cmd := range []string{"get", "gets", "gat 0", "gats 0", "lease-get"} {
		var keys []string
		for i := 0; i < 150; i++ {
			keys = append(keys, strings.Repeat("k", 20)+string(rune('a'+i%26))+strings.Repeat("x", i%7))
		}
		line := cmd + " " + strings.Join(keys, " ") + "\r\n"
		if len(line) <= MaxLineLength {
			t.Fatalf("test line too short to exercise the long-line path: %d", len(line))
		}
		var p Parser
		var req Request
		// arrive in pieces so the unterminated-long-line rule is exercised
		for i := 1; i < len(line); i += 700 {
			if n, err := p.Parse([]byte(line[:i]), &req); n != 0 || err != nil {
				t.Fatalf("%s: prefix %d: n=%d err=%v", cmd, i, n, err)
			}
		}
		n, err := p.Parse([]byte(line), &req)
		if err != nil || n != len(line) {
			t.Fatalf("%s: n=%d err=%v", cmd, n, err)
		}
		if len(req.Keys) != len(keys) {
			t.Fatalf("%s: %d keys, want %d", cmd, len(req.Keys), len(keys))
		}
		for i, k := range keys {
			if string(req.Keys[i]) != k {
				t.Fatalf("%s: key %d = %q, want %q", cmd, i, req.Keys[i], k)
			}
		}
	}
}

func TestParseLongLines(t *testing.T) {
	var p Parser
	var req Request
	cases := []struct {
		name string
		in   string
		want string // "" means (0, nil)
	}{
		{"2048 unterminated", strings.Repeat("x", MaxLineLength), ""},
		{"2049 unterminated", strings.Repeat("x", MaxLineLength+1), "SILENT CLOSE"},
		// A complete line is processed whatever its length, as memcached does when it arrives whole.
		{"2049 terminated unknown command", "foo " + strings.Repeat("x", MaxLineLength) + "\r\n", "ERR ERROR"},
		{"HTTP request line", "GET / HTTP/1.1\r\n", "SILENT CLOSE"},
		{"lone HTTP token", "HTTP/1.0\r\n", "SILENT CLOSE"},
		{"HTTP token not last", "foo HTTP/1.0 x\r\n", "ERR ERROR"},
		{"get exempt", "get " + strings.Repeat("k", 3000), ""},
		{"100 spaces then get", strings.Repeat(" ", 100) + "get " + strings.Repeat("k", 3000), ""},
		{"101 spaces then get", strings.Repeat(" ", 101) + "get " + strings.Repeat("k", 3000), "SILENT CLOSE"},
		{"get without space", "get" + strings.Repeat("k", 3000), "SILENT CLOSE"},
		{"multi-key cap", "get " + strings.Repeat("k ", MaxMultiKeyLineLength/2), "SILENT CLOSE"},
	}
	for _, tc := range cases {
		n, err := p.Parse([]byte(tc.in), &req)
		got := ""
		if err != nil {
			got = describeErr(err)
		}
		if got != tc.want || (err == nil && n != 0) {
			t.Errorf("%s: n=%d got %q want %q", tc.name, n, got, tc.want)
		}
	}
}

func TestParseLargeValue(t *testing.T) {
	value := bytes.Repeat([]byte("0123456789abcdef"), (1<<20)/16)
	in := append([]byte("set big 7 0 1048576\r\n"), value...)
	in = append(in, "\r\n"...)
	p := Parser{MaxItemSize: 2 << 20}
	var req Request
	for _, cut := range []int{10, 30, len(in) / 2, len(in) - 1} {
		if n, err := p.Parse(in[:cut], &req); n != 0 || err != nil {
			t.Fatalf("prefix %d: n=%d err=%v", cut, n, err)
		}
	}
	n, err := p.Parse(in, &req)
	if err != nil || n != len(in) {
		t.Fatalf("n=%d err=%v", n, err)
	}
	if req.Cmd != CmdSet || req.Bytes != 1<<20 || req.Flags != 7 || !bytes.Equal(req.Data, value) {
		t.Fatalf("bad request: %s", describe(&req)[:60])
	}
	// With the default 1 MB limit the same value is too large and swallowed.
	var def Parser
	n, err = def.Parse(in, &req)
	if e, ok := err.(*Error); !ok || !bytes.Equal(e.Reply, replyTooLarge) || n != len(in) || e.Swallow != 0 {
		t.Fatalf("default limit: n=%d err=%v", n, err)
	}
}

func TestRequestKey(t *testing.T) {
	var r Request
	if r.Key() != nil {
		t.Fatal("empty request has a key")
	}
	r.Keys = append(r.Keys, []byte("a"), []byte("b"))
	if string(r.Key()) != "a" {
		t.Fatal("Key is not Keys[0]")
	}
}

func TestCommandString(t *testing.T) {
	for c := CmdNone; c < numCommands; c++ {
		if c.String() == "" || c.String() == "unknown" {
			t.Errorf("command %d has no name", c)
		}
	}
	if Command(200).String() != "unknown" {
		t.Error("out of range command")
	}
	if !CmdLeaseSet.IsStorage() || CmdGet.IsStorage() || !CmdMetaNoop.IsMeta() || CmdLeaseGet.IsMeta() {
		t.Error("classification")
	}
}

func TestErrorString(t *testing.T) {
	cases := map[*Error]string{
		errBadDataChunk:   "protocol: CLIENT_ERROR bad data chunk",
		errBadFormatQuiet: "protocol: silent error (noreply)",
		errLineTooLong:    "protocol: connection must be closed",
	}
	for e, want := range cases {
		if e.Error() != want {
			t.Errorf("%q, want %q", e.Error(), want)
		}
	}
}

func TestTooLargeDropsKey(t *testing.T) {
	cases := []struct {
		name, in string
		drop     string // "" means no key to drop
	}{
		{"set drops the old value", "set k 0 0 2000\r\n", "k"},
		{"add keeps it", "add k 0 0 2000\r\n", ""},
		{"replace keeps it", "replace k 0 0 2000\r\n", ""},
		{"append keeps it", "append k 0 0 2000\r\n", ""},
		{"cas keeps it", "cas k 0 0 2000 5\r\n", ""},
		{"lease-set keeps it", "lease-set k 5 0 0 2000\r\n", ""},
		{"ms drops it in any mode", "ms k 2000 ME\r\n", "k"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := Parser{MaxItemSize: 1024}
			var req Request
			_, err := p.Parse([]byte(tc.in), &req)
			e, ok := err.(*Error)
			if !ok || e.Swallow != 2002 {
				t.Fatalf("want a too-large error swallowing 2002 bytes, got %v", err)
			}
			if string(e.DropKey) != tc.drop {
				t.Fatalf("DropKey %q, want %q", e.DropKey, tc.drop)
			}
		})
	}
}
