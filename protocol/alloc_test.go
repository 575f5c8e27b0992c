package protocol

import (
	"strings"
	"testing"
)

// TestParseZeroAllocs asserts the hot path allocates nothing once the Parser and Request have
// warmed up their scratch slices.
func TestParseZeroAllocs(t *testing.T) {
	inputs := map[string]string{
		"get":       "get some:key:1 other:key:2 third\r\n",
		"gets":      "gets a b c d e f g h\r\n",
		"set":       "set user:42 0 3600 11\r\nhello world\r\n",
		"lease-get": "lease-get user:42 user:43\r\n",
		"lease-set": "lease-set user:42 123456 0 0 5\r\nhello\r\n",
		"incr":      "incr counter 17 noreply\r\n",
		"delete":    "delete user:42\r\n",
		"mg":        "mg user:42 v t f c Oopaque q\r\n",
		"ms":        "ms user:42 5 T30 F3 c\r\nhello\r\n",
		"error":     "set k abc 0 5\r\n",
		"too large": "set k 0 0 9999999\r\n",
		"stats":     "stats slabs\r\n",
	}
	for name, in := range inputs {
		buf := []byte(in)
		var p Parser
		var req Request
		p.Parse(buf, &req) // warm up
		allocs := testing.AllocsPerRun(200, func() {
			if n, _ := p.Parse(buf, &req); n == 0 {
				t.Fatalf("%s: incomplete", name)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %.1f allocs per parse, want 0", name, allocs)
		}
	}
}

func TestEncodeZeroAllocs(t *testing.T) {
	dst := make([]byte, 0, 4096)
	key, val := []byte("user:42"), []byte(strings.Repeat("v", 100))
	allocs := testing.AllocsPerRun(200, func() {
		d := AppendValue(dst[:0], key, 3, val)
		d = AppendValueCas(d, key, 3, val, 99)
		d = AppendLValue(d, key, 12345, 0, nil)
		d = AppendStatUint(d, "curr_items", 1234)
		d = AppendStatTimeval(d, "rusage_user", 1, 2)
		_ = AppendUint(d, 77)
	})
	if allocs != 0 {
		t.Errorf("%.1f allocs per encode, want 0", allocs)
	}
}

func BenchmarkParseGet(b *testing.B) {
	buf := []byte("get user:profile:123456 user:profile:654321 session:abcdef\r\n")
	var p Parser
	var req Request
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		if n, err := p.Parse(buf, &req); n != len(buf) || err != nil {
			b.Fatal(n, err)
		}
	}
}

func BenchmarkParseGet100Keys(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("get")
	for i := 0; i < 100; i++ {
		sb.WriteString(" user:profile:")
		sb.WriteString(strings.Repeat("x", i%10))
	}
	sb.WriteString("\r\n")
	buf := []byte(sb.String())
	var p Parser
	var req Request
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		if n, err := p.Parse(buf, &req); n != len(buf) || err != nil {
			b.Fatal(n, err)
		}
	}
}

func BenchmarkParseSet(b *testing.B) {
	buf := []byte("set user:profile:123456 0 3600 100\r\n" + strings.Repeat("v", 100) + "\r\n")
	var p Parser
	var req Request
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		if n, err := p.Parse(buf, &req); n != len(buf) || err != nil {
			b.Fatal(n, err)
		}
	}
}

func BenchmarkParseMetaGet(b *testing.B) {
	buf := []byte("mg user:profile:123456 v t f c k Oabc q\r\n")
	var p Parser
	var req Request
	b.ReportAllocs()
	for b.Loop() {
		if n, err := p.Parse(buf, &req); n != len(buf) || err != nil {
			b.Fatal(n, err)
		}
	}
}

func BenchmarkAppendValue(b *testing.B) {
	dst := make([]byte, 0, 512)
	key, val := []byte("user:profile:123456"), []byte(strings.Repeat("v", 100))
	b.ReportAllocs()
	for b.Loop() {
		dst = AppendValue(dst[:0], key, 12, val)
	}
}
