package protocol

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Each case was checked against memcached 1.6.18 -Y (doc/design/auth.md; integration/auth_test.go
// compares the server's answers byte for byte).
func TestParseAuth(t *testing.T) {
	cases := []struct {
		name       string
		in         string
		st         AuthStatus
		n, need    int
		user, pass string
	}{
		{"credentials", "set a 0 0 7\r\nfoo bar\r\n", AuthCredentials, 22, 0, "foo", "bar"},
		{"noreply and extra tokens ignored", "set a 0 0 7 noreply x y\r\nfoo bar\r\n", AuthCredentials, 34, 0, "foo", "bar"},
		{"flags and exptime not looked at", "set a b c 7\r\nfoo bar\r\n", AuthCredentials, 22, 0, "foo", "bar"},
		{"leading spaces", "  set a 0 0 7\r\nfoo bar\r\n", AuthCredentials, 24, 0, "foo", "bar"},
		{"line ends in a bare newline", "set a 0 0 7\nfoo bar\r\n", AuthCredentials, 21, 0, "foo", "bar"},
		{"size followed by a tab", "set a 0 0 7\tjunk\r\nfoo bar\r\n", AuthCredentials, 27, 0, "foo", "bar"},
		{"size truncated to 32 bits", "set a 0 0 4294967303\r\nfoo bar\r\n", AuthCredentials, 31, 0, "foo", "bar"},
		{"third token ignored", "set a 0 0 11\r\nfoo bar baz\r\n", AuthCredentials, 27, 0, "foo", "bar"},
		{"NUL ends the data", "set a 0 0 8\r\nfoo bar\x00\r\n", AuthCredentials, 23, 0, "foo", "bar"},
		{"one byte waits", "\n", AuthIncomplete, 0, 0, "", ""},
		{"empty line", "\n\n", AuthNotAttempt, 1, 0, "", ""},
		{"not set", "get a\r\n", AuthNotAttempt, 7, 0, "", ""},
		{"set\\r is not set", "set\r a 0 0 7\r\n", AuthNotAttempt, 14, 0, "", ""},
		{"four tokens", "set a 0 0\r\n", AuthNotAttempt, 11, 0, "", ""},
		{"negative size", "set a 0 0 -1\r\n", AuthNotAttempt, 14, 0, "", ""},
		{"size not a number", "set a 0 0 5x\r\n", AuthNotAttempt, 14, 0, "", ""},
		{"line incomplete", "set a 0 0", AuthIncomplete, 0, 0, "", ""},
		{"block incomplete", "set a 0 0 7\r\nfoo", AuthIncomplete, 0, 22, "", ""},
		{"bad terminator", "set a 0 0 7\r\nfoo barXX", AuthBadTermination, 22, 0, "", ""},
		{"bare LF terminator", "set a 0 0 7\r\nfoo bar\n\n", AuthBadTermination, 22, 0, "", ""},
		{"block of 0 bytes (size 2^32-2)", "set a 0 0 4294967294\r\nfoo", AuthBadTermination, 22, 0, "", ""},
		{"block of 1 byte (size 2^32-1)", "set a 0 0 4294967295\r\nfoo", AuthBadTermination, 23, 0, "", ""},
		{"one token", "set a 0 0 3\r\nfoo\r\n", AuthBadTokens, 18, 0, "", ""},
		{"empty data", "set a 0 0 0\r\n\r\n", AuthBadTokens, 15, 0, "", ""},
		{"2048 bytes without newline wait", strings.Repeat("x", 2048), AuthIncomplete, 0, 0, "", ""},
		{"2049 bytes without newline close", strings.Repeat("x", 2049), AuthLineTooLong, 0, 0, "", ""},
		{"a get line is not exempt", "get " + strings.Repeat("k", 2100), AuthLineTooLong, 0, 0, "", ""},
		{"a long line that has ended", strings.Repeat("x", 3000) + "\n", AuthNotAttempt, 3001, 0, "", ""},
		{"newline past the read buffer", strings.Repeat("x", ReadBufferSize) + "\n", AuthLineTooLong, 0, 0, "", ""},
		{"largest block fits", "set a 0 0 16382\r\n" + strings.Repeat("y", 16382) + "\r\n", AuthBadTokens, 17 + 16384, 0, "", ""},
		{"block over the buffer waits", "set a 0 0 16383\r\n" + strings.Repeat("y", 16384), AuthIncomplete, 0, 17 + 16385, "", ""},
		{"block over the buffer closes", "set a 0 0 16383\r\n" + strings.Repeat("y", 16385), AuthBlockTooLong, 0, 0, "", ""},
	}
	var p Parser
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			at := p.ParseAuth([]byte(tc.in))
			assert.Equal(t, tc.st, at.Status, "status")
			assert.Equal(t, tc.n, at.N, "consumed")
			assert.Equal(t, tc.need, at.Need, "need")
			assert.Equal(t, tc.user, string(at.User), "user")
			assert.Equal(t, tc.pass, string(at.Pass), "pass")
		})
	}
}

// FuzzParseAuth: whatever the input, ParseAuth answers within it: a consumed span fits the input, an
// incomplete request's Need lies beyond it, credentials are two non-empty tokens inside the data block, and
// more input after a complete request does not change the answer.
func FuzzParseAuth(f *testing.F) {
	for _, s := range []string{"set a 0 0 7\r\nfoo bar\r\n", "get a\r\n", "set a 0 0 4294967294\r\nfoo",
		"set a 0 0 20000\r\n", "\n\n", "set a 0 0 8\r\nfoo bar\x00\r\n", strings.Repeat("x", MaxLineLength+1)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, buf []byte) {
		var p Parser
		at := p.ParseAuth(buf)
		switch at.Status {
		case AuthIncomplete:
			if at.Need != 0 && at.Need <= len(buf) {
				t.Fatalf("Need %d within the %d bytes held", at.Need, len(buf))
			}
			return
		case AuthLineTooLong, AuthBlockTooLong:
			return
		}
		if at.N < 1 || at.N > len(buf) {
			t.Fatalf("status %d spans %d of %d bytes", at.Status, at.N, len(buf))
		}
		if at.Status == AuthCredentials {
			for _, tok := range [][]byte{at.User, at.Pass} {
				if len(tok) == 0 || bytes.ContainsAny(tok, " \x00") {
					t.Fatalf("token %q", tok)
				}
			}
		}
		again := p.ParseAuth(append(append([]byte(nil), buf...), "get more\r\n"...))
		if again.Status != at.Status || again.N != at.N || string(again.User) != string(at.User) ||
			string(again.Pass) != string(at.Pass) {
			t.Fatalf("more input changed the answer: %+v then %+v", at, again)
		}
	})
}
