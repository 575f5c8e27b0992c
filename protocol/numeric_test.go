package protocol

import (
	"math/rand/v2"
	"testing"
)

// Expected values follow glibc strtol/strtoul and memcached's safe_* wrappers on LP64.
func TestParseUint64(t *testing.T) {
	cases := []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"0", 0, true},
		{"42", 42, true},
		{"+42", 42, true},
		{"-0", 0, true},
		{"-1", 0, false},
		{"18446744073709551615", 1<<64 - 1, true},
		{"18446744073709551616", 0, false},
		{"99999999999999999999999", 0, false},
		{"-9223372036854775809", 9223372036854775807, true}, // negation wraps positive: accepted
		{"-9223372036854775808", 0, false},
		{"5x", 0, false},
		{"5\tx", 5, true},
		{"\t5", 5, true},
		{"5\r", 5, true},
		{"", 0, false},
		{"+", 0, false},
		{"-", 0, false},
		{"x5", 0, false},
		{"0x10", 0, false},
		{"18446744073709551615\t-", 0, false}, // strchr finds '-' past the number
	}
	for _, tc := range cases {
		got, ok := parseUint64([]byte(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseUint64(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParseUint32(t *testing.T) {
	cases := []struct {
		in   string
		want uint32
		ok   bool
	}{
		{"0", 0, true},
		{"4294967295", 4294967295, true},
		{"4294967296", 0, true}, // truncated, as memcached stores it
		{"4294967297", 1, true},
		{"-1", 0, false},
		{"abc", 0, false},
	}
	for _, tc := range cases {
		got, ok := parseUint32([]byte(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseUint32(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParseInt32(t *testing.T) {
	cases := []struct {
		in   string
		want int32
		ok   bool
	}{
		{"0", 0, true},
		{"-1", -1, true},
		{"+7", 7, true},
		{"2147483647", 2147483647, true},
		{"2147483648", -2147483648, true}, // long truncated to int32
		{"4294967296", 0, true},
		{"4294967297", 1, true},
		{"9223372036854775807", -1, true},
		{"9223372036854775808", 0, false}, // ERANGE
		{"-9223372036854775808", 0, true},
		{"-9223372036854775809", 0, false},
		{"1 ", 1, true},
		{"1x", 0, false},
		{"", 0, false},
	}
	for _, tc := range cases {
		got, ok := parseInt32([]byte(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseInt32(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestBase64DecodedLen(t *testing.T) {
	cases := []struct {
		in   string
		want int
		ok   bool
	}{
		{"a2V5", 3, true},
		{"a2V5a2V5", 6, true},
		{"aw==", 1, true},
		{"a2U=", 2, true},
		{"a2U=zzzz", 2, true}, // decoding stops after the padded block
		{"a===", 0, false},
		{"====", 0, false},
		{"k", 0, false},
		{"a2V", 0, false},
		{"a2-V5!", 3, true}, // bytes outside the alphabet are skipped
		{"", 0, false},
		{"!!!!", 0, false},
	}
	for _, tc := range cases {
		var buf [KeyMaxLength]byte
		key, ok := DecodeKeyBase64(buf[:], []byte(tc.in))
		if got := len(key); got != tc.want || ok != tc.ok {
			t.Errorf("DecodeKeyBase64(%q): %d bytes, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestTokenize(t *testing.T) {
	cases := []struct {
		in   string
		want string
	}{
		{"", "[]"},
		{"   ", "[]"},
		{"a", "[a]"},
		{" a  b ", "[a b]"},
		{"a\tb c", "[a\tb c]"},
	}
	for _, tc := range cases {
		if got := joinQ(tokenize([]byte(tc.in), nil)); got != tc.want {
			t.Errorf("tokenize(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// TestStrtoMagnitudeFastPathAgrees checks that the plain-digits fast path answers exactly as the general
// path on every kind of token near its edges: lengths 0-25, overflow boundaries, signs, spaces, junk.
func TestStrtoMagnitudeFastPathAgrees(t *testing.T) {
	toks := []string{"", "0", "00", "9", "18446744073709551615", "18446744073709551616", "9999999999999999999",
		"99999999999999999999", "1844674407370955161", "0000000000000000000001", "+5", "-5", " 5", "5 ", "5x",
		"x5", "5\t", "\t5", "1-", "--1", ":", "/", "5:", "5/"}
	r := rand.New(rand.NewPCG(3, 4))
	const alphabet = "0123456789 -+x\t/:"
	for range 200000 {
		n := r.IntN(26)
		b := make([]byte, n)
		digitsOnly := r.IntN(2) == 0
		for i := range b {
			if digitsOnly {
				b[i] = byte('0' + r.IntN(10))
			} else {
				b[i] = alphabet[r.IntN(len(alphabet))]
			}
		}
		toks = append(toks, string(b))
	}
	for _, tok := range toks {
		m1, n1, ok1 := strtoMagnitude([]byte(tok))
		m2, n2, ok2 := strtoMagnitudeC([]byte(tok))
		if m1 != m2 || n1 != n2 || ok1 != ok2 {
			t.Fatalf("%q: fast path (%d, %v, %v), general path (%d, %v, %v)", tok, m1, n1, ok1, m2, n2, ok2)
		}
	}
}

func FuzzStrtoMagnitude(f *testing.F) {
	for _, s := range []string{"0", "18446744073709551615", "18446744073709551616", " -5", "5 x", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, tok []byte) {
		m1, n1, ok1 := strtoMagnitude(tok)
		m2, n2, ok2 := strtoMagnitudeC(tok)
		if m1 != m2 || n1 != n2 || ok1 != ok2 {
			t.Fatalf("%q: fast path (%d, %v, %v), general path (%d, %v, %v)", tok, m1, n1, ok1, m2, n2, ok2)
		}
	})
}
