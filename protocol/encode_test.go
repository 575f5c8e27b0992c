package protocol

import "testing"

func TestEncode(t *testing.T) {
	cases := []struct {
		name string
		got  []byte
		want string
	}{
		{"value", AppendValue(nil, []byte("k"), 5, []byte("hello")), "VALUE k 5 5\r\nhello\r\n"},
		{"value empty", AppendValue(nil, []byte("k"), 0, nil), "VALUE k 0 0\r\n\r\n"},
		{"value cas", AppendValueCas(nil, []byte("k"), 4294967295, []byte("x"), 18446744073709551615),
			"VALUE k 4294967295 1 18446744073709551615\r\nx\r\n"},
		{"header", AppendValueHeader([]byte("pre:"), []byte("key"), 1, 10, 0, false), "pre:VALUE key 1 10\r\n"},
		{"header cas", AppendValueHeader(nil, []byte("key"), 1, 10, 7, true), "VALUE key 1 10 7\r\n"},
		{"lvalue grant", AppendLValue(nil, []byte("k"), 12345, 0, nil), "LVALUE k 12345 0 0\r\n\r\n"},
		{"lvalue stale", AppendLValue(nil, []byte("k"), 1, 3, []byte("old")), "LVALUE k 1 3 3\r\nold\r\n"},
		{"uint", AppendUint(nil, 18446744073709551615), "18446744073709551615\r\n"},
		{"uint zero", AppendUint(nil, 0), "0\r\n"},
		{"stat", AppendStat(nil, "version", "1.6.18"), "STAT version 1.6.18\r\n"},
		{"stat bytes", AppendStatBytes(nil, "x", []byte("y")), "STAT x y\r\n"},
		{"stat uint", AppendStatUint(nil, "curr_items", 42), "STAT curr_items 42\r\n"},
		{"stat int", AppendStatInt(nil, "delta", -3), "STAT delta -3\r\n"},
		{"stat bool", AppendStatBool(nil, "cas_enabled", true), "STAT cas_enabled yes\r\n"},
		{"stat bool no", AppendStatBool(nil, "cas_enabled", false), "STAT cas_enabled no\r\n"},
		{"stat timeval", AppendStatTimeval(nil, "rusage_user", 3, 4500), "STAT rusage_user 3.004500\r\n"},
		{"version", AppendVersion(nil, "1.6.18"), "VERSION 1.6.18\r\n"},
		{"line", AppendLine(nil, "CLIENT_ERROR x"), "CLIENT_ERROR x\r\n"},
	}
	for _, tc := range cases {
		if string(tc.got) != tc.want {
			t.Errorf("%s: got %q want %q", tc.name, tc.got, tc.want)
		}
	}
}

func TestReplyConstants(t *testing.T) {
	for _, r := range [][]byte{ReplyStored, ReplyNotStored, ReplyExists, ReplyNotFound, ReplyDeleted,
		ReplyTouched, ReplyEnd, ReplyOK, ReplyError, ReplyReset, ReplyMN, ReplyEN, ReplyHD, ReplyNF,
		ReplyNS, ReplyEX, ReplyServerErrorTooLarge, ReplyClientErrorBadFormat, ReplyClientErrorBadChunk,
		ReplyClientErrorNonNumber, ReplyServerErrorOOM, ReplyServerErrorOOMStore, ReplyShutdownDisabled} {
		if len(r) < 4 || string(r[len(r)-2:]) != "\r\n" {
			t.Errorf("reply %q does not end in CRLF", r)
		}
	}
}
