package protocol

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
)

func TestParseMetaFlags(t *testing.T) {
	cases := []struct {
		name string
		key  string
		toks string
		err  string // "" = accepted
		chk  func(f *MetaFlags) bool
	}{
		{"none", "k", "", "", nil},
		{"return flags", "k", "v s t c f h l k Oab P L u q", "", func(f *MetaFlags) bool {
			return f.Value && f.NoUpdate && f.NoReply && f.Locked
		}},
		{"T N R values", "k", "T10 N-1 R4294967396", "", func(f *MetaFlags) bool {
			return f.NewTTL && f.Exptime == 10 && f.Vivify && f.VivifyExp == -1 && f.Recache && f.RecacheExp == 100
		}},
		{"ms ma values", "k", "F4294967297 C12 MD J5 D7 I", "", func(f *MetaFlags) bool {
			return f.ClientFlags == 1 && f.HasCas && f.Cas == 12 && f.Mode == 'D' && f.Initial == 5 && f.Delta == 7 && f.SetStale
		}},
		{"duplicate", "k", "v v", "CLIENT_ERROR duplicate flag", nil},
		{"high byte is duplicate", "k", "\xff", "CLIENT_ERROR duplicate flag", nil},
		{"unknown", "k", "E5", "CLIENT_ERROR invalid flag", nil},
		{"unknown wins over earlier bad value", "k", "Tx Z", "CLIENT_ERROR invalid flag", nil},
		{"bad T", "k", "Tx", "CLIENT_ERROR bad token in command line format", nil},
		{"empty N", "k", "N", "CLIENT_ERROR bad token in command line format", nil},
		{"bad F keeps default", "k", "Fx", "CLIENT_ERROR bad command line format", nil},
		{"bad F keeps earlier", "k", "Tx Fx", "CLIENT_ERROR bad token in command line format", nil},
		{"last message wins", "k", "Tx Jx", "CLIENT_ERROR invalid numeric initial value", nil},
		{"bad D", "k", "D-1", "CLIENT_ERROR invalid numeric delta value", nil},
		{"M length", "k", "MXX", "CLIENT_ERROR incorrect length for M token", nil},
		{"bad C", "k", "C", "CLIENT_ERROR bad token in command line format", nil},
		{"b decodes", "Ymlu", "b", "", func(f *MetaFlags) bool { return f.KeyBinary && string(f.Key) == "bin" }},
		{"b fails", "abc", "b", "CLIENT_ERROR error decoding key", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var f MetaFlags
			var buf [250]byte
			var toks [][]byte
			for _, s := range strings.Fields(c.toks) {
				toks = append(toks, []byte(s))
			}
			got := string(bytes.TrimSuffix(ParseMetaFlags(&f, []byte(c.key), toks, buf[:]), []byte("\r\n")))
			if got != c.err {
				t.Fatalf("error %q, want %q", got, c.err)
			}
			if c.chk != nil && !c.chk(&f) {
				t.Errorf("flags %+v", f)
			}
		})
	}
}

func FuzzParseMetaFlags(f *testing.F) {
	for _, s := range []string{"k v t c", "Ymlu b k", "k T10 N5 R1 O12 q", "k MD J1 D2 C3 F4 I", "k Tx Fx", "k \xff", "a=== b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			return
		}
		var toks [][]byte
		for _, s := range fields[1:] {
			toks = append(toks, []byte(s))
		}
		key := []byte(fields[0])
		var fl MetaFlags
		var buf [250]byte
		errReply := ParseMetaFlags(&fl, key, toks, buf[:])
		if errReply != nil {
			if !bytes.HasPrefix(errReply, []byte("CLIENT_ERROR ")) || !bytes.HasSuffix(errReply, []byte("\r\n")) {
				t.Fatalf("bad error reply %q", errReply)
			}
			return
		}
		if fl.KeyBinary {
			if len(fl.Key) == 0 || len(fl.Key) > len(key)/4*3 {
				t.Fatalf("decoded key %q from %q", fl.Key, key)
			}
			return
		}
		if !bytes.Equal(fl.Key, key) {
			t.Fatalf("key changed without b: %q", fl.Key)
		}
	})
}

func FuzzDecodeKeyBase64(f *testing.F) {
	for _, s := range []string{"Ymlu", "YQ==", "a===", "Y!m(l)u", "", "===="} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		buf := make([]byte, len(src))
		got, ok := DecodeKeyBase64(buf, src)
		if !ok {
			return
		}
		// Whatever was decoded must survive a round trip through the strict encoder and decoder.
		enc := base64.StdEncoding.EncodeToString(got)
		again, ok2 := DecodeKeyBase64(make([]byte, len(enc)), []byte(enc))
		if !ok2 || !bytes.Equal(again, got) {
			t.Fatalf("round trip of %q: %q -> %q", src, got, again)
		}
	})
}
