package protocol

import (
	"reflect"
	"strings"
	"testing"
)

// hotCases are requests at the edges of the hot path: the forms it takes and their nearest neighbours,
// which it must leave to the general path or parse identically.
var hotCases = []string{
	"get k\r\n", "get k\n", "gets k\r\n", "get k", "get k\r", "get  k\r\n", "get k \r\n", "get k j\r\n",
	"get k\rj\r\n", "get k\x00\r\n", "get k\tj\r\n", "get \r\n", "gets\r\n", "getsk\r\n", "get\r\n",
	"get " + strings.Repeat("k", KeyMaxLength) + "\r\n", "get " + strings.Repeat("k", KeyMaxLength+1) + "\r\n",
	"get \x80\xff\r\n", "GET k\r\n", "get k\r\nget j\r\n", "lease-get k\r\n", "lease-get k\n", "lease-get k j\r\n",
	"lease-get \r\n", "lease-gets k\r\n", "lease-get\r\n", "lease-set k 2 0 0 1\r\nx\r\n",
	"set k 0 0 1\r\nx\r\n", "set k 0 0 1\nx\r\n", "set k 1 2 3\r\nabc\r\nget k\r\n", "set k 0 0 1\r\nx",
	"set k 0 0 1\r\nxy\r\n", "set k 0 0 1\r\nx\n", "set k 0 0 1 noreply\r\nx\r\n", "set k 0 0 -1\r\n\r\n",
	"set k -1 0 1\r\nx\r\n", "set k 0 -1 1\r\nx\r\n", "set k +1 0 1\r\nx\r\n", "set k 01 007 0001\r\nx\r\n",
	"set k 999999999 999999999 1\r\nx\r\n", "set k 1234567890 0 1\r\nx\r\n", "set k 4294967296 0 1\r\nx\r\n",
	"set k 0 1234567890 1\r\nx\r\n", "set k 0 0 1234567890\r\n", "set k 0 0 2000000\r\n", "set k 0 0 1048500\r\n",
	"set k 0  0 1\r\nx\r\n", "set k 0 0 1 \r\nx\r\n", "set k 0 0\r\n", "set k 0 0 1a\r\nx\r\n", "set  k 0 0 1\r\nx\r\n",
	"set " + strings.Repeat("k", KeyMaxLength+1) + " 0 0 1\r\nx\r\n", "set k 0 0 0\r\n\r\n",
	// Numbers up to eighteen digits, truncated to their fields as safe_strtoul and safe_strtol do.
	"set k 3735928559 0 1\r\nx\r\n", "set k 4294967295 0 1\r\nx\r\n", "set k 999999999999999999 0 1\r\nx\r\n",
	"set k 9999999999999999999 0 1\r\nx\r\n", "set k 18446744073709551616 0 1\r\nx\r\n",
	"set k 0 4294967295 1\r\nx\r\n", "set k 0 2147483648 1\r\nx\r\n", "set k 0 1764000000 1\r\nx\r\n",
	"set k 0 0 4294967297\r\nx\r\n", "set k 0 0 2147483648\r\nx\r\n", "set k 0 0 000000000000000001\r\nx\r\n",
}

func TestParseHotMatchesGeneral(t *testing.T) {
	took := 0
	for _, s := range hotCases {
		if checkParseHot(t, []byte(s)) {
			took++
		}
	}
	if took < 10 {
		t.Errorf("the hot path took only %d of the cases", took)
	}
}

// checkParseHot fails t unless the general path agrees with what the hot path made of in (if it took it),
// and reports whether it did.
func checkParseHot(t *testing.T, in []byte) bool {
	t.Helper()
	p := Parser{MaxItemSize: 1 << 20}
	var hot, gen Request
	n, ok := p.parseHot(in, &hot)
	if !ok {
		return false
	}
	gn, err := p.parseGeneral(in, &gen)
	if err != nil || gn != n || !reflect.DeepEqual(normal(hot), normal(gen)) {
		t.Fatalf("%q: hot path %d %+v; general path %d %v %+v", in, n, hot, gn, err, gen)
	}
	return true
}

// normal is r with empty slices made nil, so that equal requests compare equal whatever their capacity.
func normal(r Request) Request {
	if len(r.Keys) == 0 {
		r.Keys = nil
	}
	if len(r.Args) == 0 {
		r.Args = nil
	}
	return r
}
