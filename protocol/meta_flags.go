package protocol

// Meta flag parsing: memcached 1.6.18's _meta_flag_preparse, shared by mg, ms, md and ma. Its
// precedence is part of the wire behaviour: a repeated or unknown flag stops the scan at once; a bad
// value is remembered (the last one's message wins) and reported after the scan; a bad F value keeps
// whatever message was already chosen ("bad command line format" by default). Parse runs it for ms (its
// outcome decides the framing: a refused ms swallows its block); the server runs it for every meta
// command it executes, with a buffer for the decoded key.

// MetaFlags is the outcome of the preparse: what mg, ms, md and ma do with their flags.
type MetaFlags struct {
	Key       []byte // the key as stored: base64-decoded with b
	KeyBinary bool   // b
	NoReply   bool   // q
	Value     bool   // v
	NoUpdate  bool   // u
	// locked: T, N, R, l or h make memcached take the item lock and bump the item only after the reply
	// is built (so h and l report the state before this read).
	Locked   bool
	Vivify   bool // N
	Recache  bool // R
	NewTTL   bool // T
	SetStale bool // I
	HasCas   bool // C

	Mode        byte   // M
	Exptime     int64  // T
	VivifyExp   int64  // N
	RecacheExp  int64  // R
	ClientFlags uint32 // F
	Cas         uint64 // C
	Delta       uint64 // D
	Initial     uint64 // J

	// ExpOps are the T, N and R flags ('T', 'N', 'R') in request order, those before OpaqueAbort only:
	// memcached notices an over-long opaque while writing the reply, after acting on the flags before it.
	ExpOps      [3]byte
	NumExpOps   int
	OpaqueAbort int // index of the first O token longer than memcached accepts; -1: none
}

// preparseMeta fills req.Meta for mg, ms, md and ma from the key and flag tokens Parse left in it: the preparse
// once, its error reply in the command's words (md and ma report every flag error alike), and the ordered
// exptime operations. It allocates only the first time a Request decodes a base64 key.
func (req *Request) preparseMeta() {
	if cap(req.metaKey) < KeyMaxLength {
		req.metaKey = make([]byte, KeyMaxLength)
	}
	f := &req.Meta
	*f = MetaFlags{}
	if req.Cmd == CmdMetaArithmetic {
		f.Delta = 1 // no D: by one
	}
	req.MetaErr = ParseMetaFlags(f, req.Key(), req.Args, req.metaKey[:KeyMaxLength])
	if req.MetaErr != nil && (req.Cmd == CmdMetaDelete || req.Cmd == CmdMetaArithmetic) {
		req.MetaErr = ReplyInvalidOrDuplicateFlag
	}
	f.OpaqueAbort = OpaqueAbortAt(req.Args)
	for i, tok := range req.Args {
		if i == f.OpaqueAbort {
			break
		}
		switch tok[0] {
		case 'T', 'N', 'R':
			if f.NumExpOps < len(f.ExpOps) { // each at most once: a repeat is refused
				f.ExpOps[f.NumExpOps] = tok[0]
				f.NumExpOps++
			}
		}
	}
}

// ParseMetaFlags fills f from a meta command's key and flag tokens. It returns the error reply, or nil.
// keyBuf receives the decoded key when b is given.
func ParseMetaFlags(f *MetaFlags, key []byte, toks [][]byte, keyBuf []byte) []byte {
	f.Key = key
	var seen [2]uint64 // one bit per flag byte below 128
	errReply := replyBadFormat
	hasErr := false
	for _, tok := range toks {
		o := tok[0]
		if o >= 127 || seen[o>>6]&(1<<(o&63)) != 0 {
			return ReplyDuplicateFlag
		}
		seen[o>>6] |= 1 << (o & 63)
		arg := tok[1:]
		switch o {
		case 'b':
			dec, ok := DecodeKeyBase64(keyBuf, key)
			if !ok {
				errReply, hasErr = ReplyDecodingKey, true
			}
			f.Key, f.KeyBinary = dec, true
		case 'N', 'T', 'R':
			f.Locked = true
			v, ok := parseInt32(arg)
			if !ok {
				errReply, hasErr = ReplyBadToken, true
				break
			}
			switch o {
			case 'N':
				f.Vivify, f.VivifyExp = true, int64(v)
			case 'T':
				f.NewTTL, f.Exptime = true, int64(v)
			default:
				f.Recache, f.RecacheExp = true, int64(v)
			}
		case 'l', 'h':
			f.Locked = true
		case 'O', 'P', 'L', 'k', 's', 't', 'c', 'f':
		case 'v':
			f.Value = true
		case 'u':
			f.NoUpdate = true
		case 'q':
			f.NoReply = true
		case 'F':
			v, ok := parseUint64(arg)
			if !ok {
				hasErr = true
			}
			f.ClientFlags = uint32(v)
		case 'C':
			v, ok := parseUint64(arg)
			if !ok {
				errReply, hasErr = ReplyBadToken, true
			}
			f.Cas, f.HasCas = v, ok
		case 'M':
			if len(tok) != 2 {
				errReply, hasErr = ReplyBadMLength, true
			} else {
				f.Mode = tok[1]
			}
		case 'J':
			v, ok := parseUint64(arg)
			if !ok {
				errReply, hasErr = ReplyBadInitial, true
			}
			f.Initial = v
		case 'D':
			v, ok := parseUint64(arg)
			if !ok {
				errReply, hasErr = ReplyBadDeltaValue, true
			}
			f.Delta = v
		case 'I':
			f.SetStale = true
		default:
			return ReplyInvalidFlag
		}
	}
	if hasErr {
		return errReply
	}
	return nil
}

// OpaqueAbortAt is the index of the first O token longer than memcached accepts, or -1. memcached
// notices it only while writing the reply, after acting on the flags before it.
func OpaqueAbortAt(toks [][]byte) int {
	for i, tok := range toks {
		if tok[0] == 'O' && len(tok) > metaMaxOpaqueLength {
			return i
		}
	}
	return -1
}

// AppendOpaque appends " <O token>": memcached echoes the whole token, 'O' included.
func AppendOpaque(dst, tok []byte) []byte {
	dst = append(dst, ' ')
	return append(dst, tok...)
}

// AppendFlagKey appends " k<key>" (base64 and " b" for binary keys).
func AppendFlagKey(dst, key []byte, binary bool) []byte {
	dst = append(dst, " k"...)
	return AppendMetaKey(dst, key, binary)
}
