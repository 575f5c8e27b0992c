package integration

import (
	"fmt"
	"strings"
	"testing"
)

// Sizes used by the differential scripts.
const (
	// diffItemMax is the -I given to both daemons in the differential test:
	// large enough that a 1 MiB value fits in either server whatever its
	// per-item overhead, so that the limit itself is not what is compared.
	diffItemMax = "2m"
	// overItemMax is a value length over diffItemMax.
	overItemMax = 2<<20 + 1
	// mebibyte is the size of the "1 MiB value" case.
	mebibyte = 1 << 20
	// bigChunk is the write size used to send megabyte scripts.
	bigChunk = 1 << 10
	// manyKeys is the key count of the large multi-get.
	manyKeys = 100
	// pipelineLen is the command count of the pipelining case.
	pipelineLen = 50
	// neverEndingLine is the length of a line sent without a newline; it
	// exceeds memcached's 2048-byte limit for non-get lines.
	neverEndingLine = 3000
)

// TestDifferentialClassic compares memcached and leasecached on every classic
// text command, its error paths and its edge cases, each script sent whole,
// byte by byte and in random pauses-separated chunks.
func TestDifferentialClassic(t *testing.T) {
	mc, lc := startPair(t, "-I", diffItemMax)
	runDifferential(t, mc, lc, classicCases())
}

func classicCases() []diffCase {
	return []diffCase{
		// --- retrieval -----------------------------------------------------
		{name: "get miss", steps: one("get $ka\r\n")},
		{name: "get hit", steps: one("set $ka 5 0 3\r\nabc\r\nget $ka\r\n")},
		{name: "get multi hits misses duplicates", steps: one(
			"set $ka 1 0 1\r\na\r\nset $kc 3 0 3\r\nccc\r\nget $ka $kb $kc $ka $kd\r\n")},
		{name: "get no key", steps: one("get\r\ngets\r\nget \r\n")},
		{name: "get extra spaces", steps: one("set $ka 0 0 1\r\na\r\nget  $ka\r\nget $ka \r\n  get $ka\r\n")},
		{name: "gets", steps: one("set $ka 0 0 1\r\nx\r\ngets $ka $kb\r\ngets $kb\r\n")},
		{name: "gat", steps: one("set $ka 2 0 1\r\nx\r\ngat 100 $ka $kb\r\ngat 0 $ka\r\nget $ka\r\n")},
		{name: "gats", steps: one("set $ka 2 0 1\r\nx\r\ngats 100 $ka $kb\r\n")},
		{name: "gat negative exptime expires", steps: one("set $ka 0 0 1\r\nx\r\ngat -1 $ka\r\nget $ka\r\n")},
		{name: "gat bad args", steps: one("set $ka 0 0 1\r\nx\r\ngat x $ka\r\ngat $ka\r\ngat\r\ngat 10\r\ngats 10\r\n")},

		// --- storage -------------------------------------------------------
		{name: "set overwrite", steps: one("set $ka 1 0 1\r\na\r\nset $ka 2 0 2\r\nbb\r\nget $ka\r\n")},
		{name: "add", steps: one("add $ka 0 0 1\r\na\r\nadd $ka 0 0 1\r\nb\r\nget $ka\r\n")},
		{name: "replace", steps: one("replace $ka 0 0 1\r\na\r\nget $ka\r\nset $ka 0 0 1\r\nb\r\nreplace $ka 9 0 1\r\nc\r\nget $ka\r\n")},
		{name: "append prepend", steps: one("append $ka 0 0 1\r\nx\r\nprepend $ka 0 0 1\r\nx\r\nget $ka\r\n" +
			"set $ka 5 0 1\r\nb\r\nappend $ka 7 0 1\r\nc\r\nprepend $ka 9 0 1\r\na\r\nget $ka\r\n" +
			"append $ka 0 0 0\r\n\r\nprepend $ka 0 0 0\r\n\r\ngets $kb\r\nget $ka\r\n")},
		{name: "cas stored exists not_found", steps: []string{
			"set $ka 0 0 1\r\n1\r\ngets $ka\r\n",
			"cas $ka 7 0 1 $cas\r\n2\r\ngets $ka\r\n",
			"set $ka 0 0 1\r\n3\r\ncas $ka 0 0 1 $cas\r\n4\r\nget $ka\r\ncas $kb 0 0 1 1\r\nx\r\nget $kb\r\n",
		}},
		{name: "cas after append changes unique", steps: []string{
			"set $ka 0 0 1\r\n1\r\ngets $ka\r\n",
			"append $ka 0 0 1\r\n2\r\ncas $ka 0 0 1 $cas\r\n3\r\nget $ka\r\n",
		}},
		{name: "cas noreply", steps: []string{
			"set $ka 0 0 1\r\n1\r\ngets $ka\r\n",
			"cas $ka 0 0 1 $cas noreply\r\n2\r\ncas $ka 0 0 1 $cas noreply\r\n3\r\ncas $kb 0 0 1 1 noreply\r\n4\r\nget $ka $kb\r\n",
		}},
		{name: "cas malformed", steps: one("set $ka 0 0 1\r\n1\r\ncas $ka 0 0 1\r\n2\r\ncas $ka 0 0 1 x\r\n2\r\ncas $ka 0 0 1 -1\r\n2\r\ncas\r\nget $ka\r\n")},
		{name: "empty value", steps: one("set $ka 3 0 0\r\n\r\nget $ka\r\ngets $kb\r\n")},
		{name: "binary-ish value", steps: one("set $ka 0 0 7\r\na\r\nb\x00c\r\r\nget $ka\r\n")},

		// --- incr / decr ---------------------------------------------------
		{name: "incr decr basic", steps: one("set $ka 0 0 1\r\n5\r\nincr $ka 3\r\ndecr $ka 2\r\nget $ka\r\nincr $kb 1\r\ndecr $kb 1\r\n")},
		{name: "decr floors at zero", steps: one("set $ka 0 0 1\r\n1\r\ndecr $ka 1\r\ndecr $ka 1\r\ndecr $ka 100\r\nget $ka\r\n")},
		{name: "decr shortens number pads with spaces", steps: one("set $ka 0 0 2\r\n10\r\ndecr $ka 1\r\nget $ka\r\nincr $ka 0\r\nset $ka 0 0 3\r\n100\r\ndecr $ka 95\r\nget $ka\r\n")},
		{name: "incr lengthens number", steps: one("set $ka 0 0 2\r\n99\r\nincr $ka 1\r\nget $ka\r\nset $ka 0 0 1\r\n9\r\nincr $ka 18446744073709551610\r\nget $ka\r\n")},
		{name: "incr wraps at 2^64", steps: one("set $ka 0 0 20\r\n18446744073709551615\r\nincr $ka 1\r\nget $ka\r\nset $ka 0 0 2\r\n10\r\nincr $ka 18446744073709551615\r\nget $ka\r\n")},
		{name: "incr leading zeros and spaces", steps: one("set $ka 0 0 3\r\n007\r\nincr $ka 1\r\nget $ka\r\nset $ka 0 0 3\r\n 12\r\nincr $ka 1\r\nset $ka 0 0 3\r\n12 \r\nincr $ka 1\r\nset $ka 0 0 3\r\n-12\r\nincr $ka 1\r\n")},
		{name: "incr non-numeric value", steps: one("set $ka 0 0 2\r\nab\r\nincr $ka 1\r\ndecr $ka 1\r\nset $ka 0 0 0\r\n\r\nincr $ka 1\r\nset $ka 0 0 21\r\n184467440737095516150\r\nincr $ka 1\r\n")},
		{name: "incr invalid delta", steps: one("set $ka 0 0 1\r\n1\r\nincr $ka x\r\nincr $ka -1\r\nincr $ka 18446744073709551616\r\ndecr $ka 1x\r\nincr $ka\r\nincr\r\ndecr $ka 1 2\r\nget $ka\r\n")},
		{name: "incr keeps flags", steps: one("set $ka 77 0 1\r\n1\r\nincr $ka 1\r\ngets $kb\r\nget $ka\r\n")},

		// --- touch / delete ------------------------------------------------
		{name: "touch", steps: one("set $ka 0 0 1\r\nx\r\ntouch $ka 100\r\ntouch $kb 100\r\ntouch $ka\r\ntouch $ka x\r\ntouch\r\nget $ka\r\ntouch $ka -1\r\nget $ka\r\n")},
		{name: "delete", steps: one("set $ka 0 0 1\r\nx\r\ndelete $ka\r\ndelete $ka\r\nget $ka\r\n")},
		{name: "delete with time", steps: one("set $ka 0 0 1\r\nx\r\ndelete $ka 0\r\nset $ka 0 0 1\r\nx\r\ndelete $ka 5\r\ndelete $ka x\r\nget $ka\r\ndelete $ka 0 noreply\r\nget $ka\r\ndelete\r\ndelete $ka 0 0\r\n")},

		// --- noreply on every command that takes it ------------------------
		{name: "noreply storage", steps: one("set $ka 0 0 1 noreply\r\na\r\nadd $ka 0 0 1 noreply\r\nb\r\nadd $kb 0 0 1 noreply\r\nb\r\n" +
			"replace $ka 0 0 1 noreply\r\nc\r\nreplace $kc 0 0 1 noreply\r\nc\r\nappend $ka 0 0 1 noreply\r\nd\r\nprepend $ka 0 0 1 noreply\r\ne\r\n" +
			"append $kc 0 0 1 noreply\r\nd\r\nget $ka $kb $kc\r\n")},
		{name: "noreply arith touch delete", steps: one("set $ka 0 0 1\r\n5\r\nincr $ka 5 noreply\r\ndecr $ka 1 noreply\r\nincr $kz 1 noreply\r\n" +
			"touch $ka 100 noreply\r\ntouch $kz 100 noreply\r\nget $ka\r\ndelete $ka noreply\r\ndelete $ka noreply\r\nget $ka\r\n")},
		{name: "noreply errors", steps: one("set $ka 0 0 1 noreply\r\nab\r\nset $ka 0 0 x noreply\r\nx\r\nincr $ka x noreply\r\nset $kb 0 0 1 noreply\r\nb\r\nincr $kb 1 noreply\r\nget $ka $kb\r\n")},
		{name: "noreply misspelled", steps: one("set $ka 0 0 1 norepl\r\na\r\nset $ka 0 0 1 NOREPLY\r\nb\r\nget $ka\r\n")},

		// --- misc commands -------------------------------------------------
		{name: "version", steps: one("version\r\nversion x\r\n")},
		{name: "verbosity", steps: one("verbosity\r\nverbosity 1\r\nverbosity 0 noreply\r\nverbosity x\r\nverbosity 1 2 3\r\nverbosity 0\r\n")},
		{name: "quit", steps: one("set $ka 0 0 1\r\nx\r\nget $ka\r\nquit\r\nget $ka\r\n")},
		{name: "quit with argument", steps: one("quit now\r\nget $ka\r\n")},

		// --- keys ----------------------------------------------------------
		{name: "key 250 ok", steps: one("set " + keyOfLen(250) + " 0 0 1\r\nx\r\nget " + keyOfLen(250) + "\r\ndelete " + keyOfLen(250) + "\r\n")},
		// memcached drops the replies queued before a failing get in the
		// same read batch, so each get with a bad key starts its own step.
		{name: "key 251 rejected", steps: []string{
			"set " + keyOfLen(251) + " 0 0 1\r\nx\r\nset $ka 0 0 1\r\na\r\n",
			"get " + keyOfLen(251) + "\r\n",
			"get $ka " + keyOfLen(251) + " $kb\r\n",
			"gets $kb $ka " + keyOfLen(251) + "\r\n",
			"delete " + keyOfLen(251) + "\r\nincr " + keyOfLen(251) + " 1\r\ntouch " + keyOfLen(251) + " 1\r\n" +
				"add " + keyOfLen(251) + " 0 0 1\r\nx\r\ncas " + keyOfLen(251) + " 0 0 1 1\r\nx\r\n",
		}},
		{name: "key control and high bytes", steps: one("set $k\x01a 0 0 1\r\nx\r\nget $k\x01a\r\nset $k\x7fb 0 0 1\r\ny\r\nget $k\x7fb\r\n" +
			"set $k\tc 0 0 1\r\nz\r\nget $k\tc\r\nset $k\xc3\xa9 0 0 1\r\nw\r\nget $k\xc3\xa9\r\n")},

		// --- flags and exptime ---------------------------------------------
		{name: "flags range", steps: one("set $ka 0 0 1\r\na\r\nset $kb 4294967295 0 1\r\nb\r\nset $kc 4294967296 0 1\r\nc\r\nset $kd -1 0 1\r\nd\r\nset $ke abc 0 1\r\ne\r\nget $ka $kb $kc $kd $ke\r\n")},
		{name: "exptime negative and absolute", steps: one("set $ka 0 -1 1\r\na\r\nget $ka\r\nset $kb 0 $past 1\r\nb\r\nget $kb\r\nset $kc 0 $future 1\r\nc\r\nget $kc\r\n" +
			"set $kd 0 2592000 1\r\nd\r\nget $kd\r\nset $ke 0 2592001 1\r\ne\r\nget $ke\r\nset $kf 0 x 1\r\nf\r\nget $kf\r\n")},
		{name: "exptime beyond int32", steps: one("set $ka 0 4000000000 1\r\na\r\nget $ka\r\nset $kb 0 99999999999999999999 1\r\nb\r\nget $kb\r\n")},
		{name: "touch and gat absolute", steps: one("set $ka 0 0 1\r\na\r\ntouch $ka $past\r\nget $ka\r\nset $kb 0 0 1\r\nb\r\ngat $future $kb\r\nget $kb\r\n")},

		// --- data block errors ---------------------------------------------
		{name: "bytes too few", steps: one("set $ka 0 0 3\r\nold\r\nset $ka 0 0 5\r\nabc\r\nget $ka\r\nget $ka\r\n")},
		{name: "bytes too many", steps: one("set $ka 0 0 1\r\nA\r\nset $ka 0 0 2\r\nabcdefgh\r\nget $ka\r\n")},
		{name: "data without CR", steps: one("set $ka 0 0 1\r\nA\r\nset $ka 0 0 1\nx\nget $ka\r\nget $ka\r\n")},
		{name: "negative or garbage length", steps: one("set $ka 0 0 -1\r\nabc\r\nset $ka 0 0 abc\r\nabc\r\nset $ka 0 0 1x\r\nx\r\nset $ka 0 0 99999999999999999999\r\nget $ka\r\n")},
		{name: "value over item max", chunk: 64 << 10, steps: one("set $ka 0 0 1\r\nA\r\nset $ka 0 0 " + fmt.Sprint(overItemMax) + "\r\n" +
			strings.Repeat("v", overItemMax) + "\r\nget $ka\r\nset $kb 0 0 1\r\nB\r\nget $kb\r\n")},
		{name: "value over item max other verbs", chunk: 64 << 10, steps: one("set $ka 0 0 1\r\nA\r\nadd $ka 0 0 " + fmt.Sprint(overItemMax) + "\r\n" +
			strings.Repeat("v", overItemMax) + "\r\nget $ka\r\nappend $ka 0 0 " + fmt.Sprint(overItemMax) + "\r\n" + strings.Repeat("v", overItemMax) + "\r\nget $ka\r\n")},

		// --- command line errors -------------------------------------------
		{name: "unknown commands", steps: one("foo\r\nfoo bar baz\r\nGET $ka\r\nSet $ka 0 0 1\r\nx\r\nGETS $ka\r\n")},
		{name: "empty and blank lines", steps: one("\r\n\n \r\n   \r\n\t\r\n")},
		{name: "too few tokens", steps: one("set\r\nset $ka\r\nset $ka 0\r\nset $ka 0 0\r\nadd $ka 0 0\r\nreplace $ka 0\r\nappend $ka\r\nprepend\r\ncas $ka 0 0\r\ntouch\r\nincr $ka\r\ndecr\r\n")},
		{name: "too many tokens", steps: one("set $ka 0 0 1 noreply extra\r\nx\r\nset $ka 0 0 1 a b c d e f g h i j\r\nx\r\nget $ka\r\ntouch $ka 0 noreply x\r\nincr $ka 1 noreply x\r\n")},
		{name: "bare LF line endings", steps: one("set $ka 0 0 1\nx\r\nget $ka\nadd $ka 0 0 1\ny\r\nincr $ka 1\ndelete $ka\nget $ka\nversion\n")},

		// --- pipelining and sizes ------------------------------------------
		{name: "pipeline 50 mixed", steps: one(pipelineScript())},
		{name: "pipeline 5000 commands", chunk: bigChunk, steps: one(strings.Repeat("set $ka 0 0 2\r\nab\r\nget $ka $kb\r\nincr $ka 1\r\nappend $ka 0 0 1\r\nc\r\ndelete $ka\r\n", 1000))},
		{name: "1 MiB value in 1 KiB pieces", chunk: bigChunk, steps: one("set $ka 9 0 " + fmt.Sprint(mebibyte) + "\r\n" +
			strings.Repeat("m", mebibyte) + "\r\nget $ka\r\nappend $ka 0 0 2\r\nzz\r\ngets $kb\r\n")},
		{name: "get 100 keys long line", steps: one(manyKeysScript())},

		// --- number syntax and separators ----------------------------------
		{name: "numbers with signs zeros and hex", steps: one("set $ka 007 +0 01\r\nx\r\nget $ka\r\nset $kb +1 0 1\r\nb\r\nget $kb\r\n" +
			"set $kc 0 0 +1\r\nc\r\nget $kc\r\nset $kd 0x10 0 1\r\nd\r\nset $ke 0 0 0x1\r\ne\r\n" +
			"set $kn 0 0 1\r\n5\r\nincr $kn +1\r\nincr $kn -0\r\nincr $kn 007\r\ndecr $kn 0x1\r\ntouch $kn +100\r\ntouch $kn -0\r\nget $kn\r\n")},
		{name: "trailing spaces", steps: one("set $ka 0 0 1 \r\nx\r\nget $ka \r\nincr $ka 1 \r\ntouch $ka 10 \r\ndelete $ka \r\nget $ka\r\n" +
			"set $ka 0 0 1  noreply \r\ny\r\nget $ka\r\n")},
		{name: "tab is not a separator", steps: one("set $ka 0 0 1\r\nx\r\nget\t$ka\r\nget $ka\t\r\nset\t$kb 0 0 1\r\nb\r\n")},
		{name: "gat noreply is a key", steps: one("set $ka 0 0 1\r\nx\r\ngat 0 $ka noreply\r\n")},
		{name: "half close answers everything", halfClose: true, steps: one("set $ka 0 0 1\r\nx\r\nget $ka\r\nget $ka $ka\r\nincr $ka 1\r\n")},
		// 8 MiB of replies: under -race on a loaded machine this takes seconds, so allow them.
		{name: "large replies", chunk: 64 << 10, timeout: 5 * defaultReplyTimeout, steps: one(largeRepliesScript())},

		// --- framing limits ------------------------------------------------
		{name: "line that never ends", noSentinel: true, timeout: defaultReplyTimeout,
			steps: one("set " + strings.Repeat("x", neverEndingLine))},
		{name: "long non-get line with newline", wholeOnly: true,
			steps: one(strings.Repeat("y", neverEndingLine) + "\r\nget $ka\r\n")},
	}
}

// pipelineScript is pipelineLen mixed commands in one write.
func pipelineScript() string {
	var b strings.Builder
	for i := 0; i < pipelineLen; i++ {
		k := fmt.Sprintf("$kp%d", i%7)
		switch i % 10 {
		case 0:
			fmt.Fprintf(&b, "set %s %d 0 %d\r\n%s\r\n", k, i, len(fmt.Sprint(i)), fmt.Sprint(i))
		case 1:
			fmt.Fprintf(&b, "get %s $kp1 $kp2\r\n", k)
		case 2:
			fmt.Fprintf(&b, "incr %s 3\r\n", k)
		case 3:
			fmt.Fprintf(&b, "add %s 0 0 1\r\na\r\n", k)
		case 4:
			fmt.Fprintf(&b, "append %s 0 0 2\r\n%02d\r\n", k, i)
		case 5:
			fmt.Fprintf(&b, "delete %s\r\n", k)
		case 6:
			fmt.Fprintf(&b, "touch %s 100\r\n", k)
		case 7:
			fmt.Fprintf(&b, "bogus %d\r\n", i)
		case 8:
			fmt.Fprintf(&b, "replace %s 1 0 1\r\nr\r\n", k)
		case 9:
			fmt.Fprintf(&b, "decr %s 1\r\n", k)
		}
	}
	return b.String()
}

// largeRepliesScript stores a few 1 MiB values and fetches them all, twice,
// in one write: the replies far exceed socket buffers, so the server must
// cope with a client whose receive window is full.
func largeRepliesScript() string {
	var b strings.Builder
	const n = 4
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("$kbig%d", i)
		fmt.Fprintf(&b, "set %s %d 0 %d\r\n%s\r\n", keys[i], i, mebibyte, strings.Repeat(string(rune('A'+i)), mebibyte))
	}
	get := "get " + strings.Join(keys, " ") + "\r\n"
	b.WriteString(get + get)
	return b.String()
}

// manyKeysScript stores every other one of manyKeys long keys, then fetches
// all of them in one get line well over 2048 bytes.
func manyKeysScript() string {
	var b strings.Builder
	keys := make([]string, manyKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("$k%s%03d", strings.Repeat("k", 24), i)
		if i%2 == 0 {
			fmt.Fprintf(&b, "set %s %d 0 4\r\nv%03d\r\n", keys[i], i, i)
		}
	}
	fmt.Fprintf(&b, "get %s\r\n", strings.Join(keys, " "))
	return b.String()
}
