package protocol

import (
	"strings"
	"testing"
)

// splitLineCases are lines at the edges of splitLine's one-pass path: every kind of terminator, control
// bytes, bytes above 0x7f, and lengths around a word and around shortLine.
var splitLineCases = []string{
	"", "\n", "\r\n", "\r", "\r\r\n", "\n\n", " \r\n", "  \n", "get\n", "get\r\n", "get k\r\n", "get k",
	"get k\r", "get  k  \r\n", " get k\r\n", "get k \r\n", "get k\rx\r\n", "get k\r \r\n", "get\tk\r\n",
	"get k\x00x\r\n", "get k\x00\r\n", "\x00\r\n", "get k\x01\r\n", "get \x80\xff\xc3\xa9 k\r\n",
	"12345678\r\n", "1234567\r\n", "123456789\r\n", "a b c d e f g h i\r\n", "get !\"#$%&'()*+,-./\r\n",
	"get k\r\nget j\r\n", "get k\nset j 0 0 1\r\nx\r\n", "set k 0 0 1\r\nx\r\n",
	"get " + strings.Repeat("k", shortLine-8) + "\r\n", "get " + strings.Repeat("k", shortLine-6) + "\r\n",
	"get " + strings.Repeat("k", shortLine-5) + "\r\n", "get " + strings.Repeat("k", shortLine) + "\r\n",
	"get " + strings.Repeat("k ", MaxLineLength) + "\r\n", "set " + strings.Repeat("k", MaxLineLength+1),
	strings.Repeat(" ", shortLine+1) + "\r\n",
}

func TestSplitLineMatchesFrameAndTokenize(t *testing.T) {
	for _, s := range splitLineCases {
		checkSplitLine(t, []byte(s))
		for cut := range len(s) { // every prefix: a line that has not fully arrived
			checkSplitLine(t, []byte(s[:cut]))
		}
	}
}

// checkSplitLine fails t unless splitLine(in) equals frameLine then tokenize.
func checkSplitLine(t *testing.T, in []byte) {
	t.Helper()
	gotToks, gotNext, gotSt := splitLine(in, nil)
	line, next, st := frameLine(in)
	var want [][]byte
	if st == lineComplete {
		want = tokenize(line, nil)
	}
	if gotNext != next || gotSt != st || joinQ(gotToks) != joinQ(want) {
		t.Fatalf("splitLine(%q) = %s, %d, %d; frameLine+tokenize = %s, %d, %d", in, joinQ(gotToks), gotNext, gotSt, joinQ(want), next, st)
	}
}
