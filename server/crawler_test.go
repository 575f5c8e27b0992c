package server

import (
	"sort"
	"strings"
	"testing"
)

func TestLruCrawler(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"metadump needs an argument", "lru_crawler metadump\r\n", "ERROR\r\n"},
		{"no sub-command", "lru_crawler\r\n", "ERROR\r\n"},
		{"unknown sub-command", "lru_crawler enable now\r\n", "ERROR\r\n"},
		{"class 0", "lru_crawler metadump 0\r\n", "BADCLASS invalid class id\r\n"},
		{"class 64", "lru_crawler metadump 64\r\n", "BADCLASS invalid class id\r\n"},
		{"bad list", "lru_crawler metadump 1,x\r\n", "BADCLASS invalid class id\r\n"},
		{"empty class", "lru_crawler metadump 63\r\n", "END\r\n"},
		{"crawl", "lru_crawler crawl all\r\n", "OK\r\n"},
		{"crawl bad class", "lru_crawler crawl 99\r\n", "BADCLASS invalid class id\r\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cn, fc := newConn(newTestServer(t), nil), &fakeConn{}
			if got, _ := feed(cn, fc, tc.in); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestMetadumpLines(t *testing.T) {
	cn, fc := newConn(newTestServer(t), nil), &fakeConn{}
	feed(cn, fc, "set a 0 0 1\r\nx\r\nset k\xc3\xa9/:=& 5 0 2\r\nyz\r\nget a\r\n")
	fc.out.Reset()
	got, _ := feed(cn, fc, "lru_crawler metadump all\r\n")
	if !strings.HasSuffix(got, "\nEND\r\n") {
		t.Fatalf("dump does not end with END: %q", got)
	}
	lines := strings.Split(strings.TrimSuffix(got, "\nEND\r\n"), "\n")
	sort.Strings(lines)
	// memcached 1.6.18 prints exactly these fields for these items (its cls/size for a 1-byte and a
	// 2-byte value with these keys, upper-case %XX for every byte outside RFC 3986's unreserved set).
	want := []string{
		"key=a exp=-1 la=* cas=1 fetch=yes cls=1 size=61",
		"key=k%C3%A9%2F%3A%3D%26 exp=-1 la=* cas=2 fetch=no cls=1 size=72",
	}
	if len(lines) != len(want) {
		t.Fatalf("dump lines %q", lines)
	}
	for i, l := range lines {
		pre, post, _ := strings.Cut(want[i], "*")
		la := strings.TrimPrefix(l, pre)
		if !strings.HasPrefix(l, pre) || !strings.HasSuffix(l, post) || strings.ContainsAny(la[:len(la)-len(post)], " =") {
			t.Errorf("line %q, want %q", l, want[i])
		}
	}
	fc.out.Reset()
	if got, _ := feed(cn, fc, "lru_crawler metadump 2\r\n"); got != "END\r\n" {
		t.Fatalf("dump of an empty class: %q", got)
	}
}

func TestAppendURIEncoded(t *testing.T) {
	for in, want := range map[string]string{
		"abc-._~XYZ09": "abc-._~XYZ09",
		"a b":          "a%20b",
		"\x00\xff%":    "%00%FF%25",
	} {
		if got := string(appendURIEncoded(nil, []byte(in))); got != want {
			t.Errorf("%q -> %q, want %q", in, got, want)
		}
	}
}
