package protocol

import (
	"strconv"
	"strings"
)

// Meta status words: what a meta reply starts with, before its flags.
const (
	MetaHD = "HD" // success, no value
	MetaEN = "EN" // mg/me miss
	MetaNF = "NF" // not found
	MetaNS = "NS" // not stored
	MetaEX = "EX" // exists: CAS mismatch
)

// Meta replies echo return flags in the order the client sent them (memcached 1.6.18). Each command
// echoes its own set: EchoGet for an mg hit, EchoSet for ms, EchoArith for ma, EchoMiss for EN, NF and EX.
const (
	EchoGet   = "stcflhOk"
	EchoSet   = "Okc"
	EchoArith = "ctOk"
	EchoMiss  = "Ok"
)

// MetaEcho is what a meta reply may echo: the item's figures after the command, and the key as the
// reply shows it.
type MetaEcho struct {
	Key       []byte // k: shown in base64 with " b" when KeyBinary
	KeyBinary bool
	Len       int    // s
	Cas       uint64 // c
	Flags     uint32 // f
	Idle      int64  // l: seconds since the last access
	Fetched   bool   // h
	// TTLs[i] is the t value after the first i exptime operations of the request; ExpOps names the flag
	// letters that count as one (mg: TNR, ma: TN), so a t after them shows their effect, as memcached's.
	TTLs   []int64
	ExpOps string
}

// AppendMetaFlags appends, for each flag token of the request in order, the echo of those letters in
// echo (EchoGet, ...): " s<len>", " t<ttl>", " c<cas>", " f<flags>", " l<idle>", " h0|1", the O token
// whole and " k<key>".
func AppendMetaFlags(dst []byte, toks [][]byte, echo string, e *MetaEcho) []byte {
	ops := 0
	for _, tok := range toks {
		o := tok[0]
		if strings.IndexByte(e.ExpOps, o) >= 0 {
			ops++
		}
		if strings.IndexByte(echo, o) < 0 {
			continue
		}
		switch o {
		case 's':
			dst = append(dst, " s"...)
			dst = strconv.AppendInt(dst, int64(e.Len), 10)
		case 't':
			dst = append(dst, " t"...)
			dst = strconv.AppendInt(dst, e.TTLs[ops], 10)
		case 'c':
			dst = append(dst, " c"...)
			dst = strconv.AppendUint(dst, e.Cas, 10)
		case 'f':
			dst = append(dst, " f"...)
			dst = strconv.AppendUint(dst, uint64(e.Flags), 10)
		case 'l':
			dst = append(dst, " l"...)
			dst = strconv.AppendUint(dst, uint64(e.Idle), 10)
		case 'h':
			if e.Fetched {
				dst = append(dst, " h1"...)
			} else {
				dst = append(dst, " h0"...)
			}
		case 'O':
			dst = AppendOpaque(dst, tok)
		case 'k':
			dst = AppendFlagKey(dst, e.Key, e.KeyBinary)
		}
	}
	return dst
}

// AppendMetaHead appends the start of a meta reply that may carry a value: "VA <n>" when the client
// asked for the value (v), else "HD".
func AppendMetaHead(dst []byte, value bool, n int) []byte {
	if !value {
		return append(dst, MetaHD...)
	}
	dst = append(dst, "VA "...)
	return strconv.AppendInt(dst, int64(n), 10)
}
