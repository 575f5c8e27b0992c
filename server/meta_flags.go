package server

import "github.com/leasecached/leasecached/protocol"

// Meta flag parsing: memcached 1.6.18's _meta_flag_preparse, shared by mg, ms, md and ma. Its
// precedence is part of the wire behaviour: a repeated or unknown flag stops the scan at once; a bad
// value is remembered (the last one's message wins) and reported after the scan; a bad F value keeps
// whatever message was already chosen ("bad command line format" by default).

// Error replies of the meta commands, in memcached's words.
var (
	replyMetaDuplicateFlag = []byte("CLIENT_ERROR duplicate flag\r\n")
	replyMetaInvalidFlag   = []byte("CLIENT_ERROR invalid flag\r\n")
	replyMetaBadToken      = []byte("CLIENT_ERROR bad token in command line format\r\n")
	replyMetaDecodingKey   = []byte("CLIENT_ERROR error decoding key\r\n")
	replyMetaMLength       = []byte("CLIENT_ERROR incorrect length for M token\r\n")
	replyMetaBadInitial    = []byte("CLIENT_ERROR invalid numeric initial value\r\n")
	replyMetaBadDelta      = []byte("CLIENT_ERROR invalid numeric delta value\r\n")
	replyMetaOpaqueLong    = []byte("CLIENT_ERROR opaque token too long\r\n")
	replyMetaMaMode        = []byte("CLIENT_ERROR invalid mode for ma M token\r\n")
	replyMetaInvalidOrDup  = []byte("CLIENT_ERROR invalid or duplicate flag\r\n") // md and ma say only this
	replyMetaMaVivifyOOM   = []byte("SERVER_ERROR Out of memory allocating new item\r\n")
	replyMetaSetUnhandled  = []byte("SERVER_ERROR Unhandled storage type.\r\n")
)

// metaMaxOpaqueLength is memcached's MFLAG_MAX_OPAQUE_LENGTH: the longest O token, 'O' included.
const metaMaxOpaqueLength = 32

// metaFlags is the outcome of the preparse.
type metaFlags struct {
	key       []byte // the key as stored: base64-decoded with b
	keyBinary bool   // b
	noReply   bool   // q
	value     bool   // v
	noUpdate  bool   // u
	// locked: T, N, R, l or h make memcached take the item lock and bump the item only after the reply
	// is built (so h and l report the state before this read).
	locked   bool
	vivify   bool // N
	recache  bool // R
	newTTL   bool // T
	setStale bool // I
	hasCas   bool // C

	mode        byte   // M
	exptime     int64  // T
	vivifyExp   int64  // N
	recacheExp  int64  // R
	clientFlags uint32 // F
	cas         uint64 // C
	delta       uint64 // D
	initial     uint64 // J
}

// parseMetaFlags fills f from a meta command's key and flag tokens. It returns the error reply, or nil.
// keyBuf receives the decoded key when b is given.
func parseMetaFlags(f *metaFlags, key []byte, toks [][]byte, keyBuf []byte) []byte {
	f.key = key
	var seen [2]uint64 // one bit per flag byte below 128
	errReply := protocol.ReplyClientErrorBadFormat
	hasErr := false
	for _, tok := range toks {
		o := tok[0]
		if o >= 127 || seen[o>>6]&(1<<(o&63)) != 0 {
			return replyMetaDuplicateFlag
		}
		seen[o>>6] |= 1 << (o & 63)
		arg := tok[1:]
		switch o {
		case 'b':
			dec, ok := decodeKeyBase64(keyBuf, key)
			if !ok {
				errReply, hasErr = replyMetaDecodingKey, true
			}
			f.key, f.keyBinary = dec, true
		case 'N', 'T', 'R':
			f.locked = true
			v, ok := protocol.SafeStrtol(arg)
			if !ok {
				errReply, hasErr = replyMetaBadToken, true
				break
			}
			switch o {
			case 'N':
				f.vivify, f.vivifyExp = true, int64(v)
			case 'T':
				f.newTTL, f.exptime = true, int64(v)
			default:
				f.recache, f.recacheExp = true, int64(v)
			}
		case 'l', 'h':
			f.locked = true
		case 'O', 'P', 'L', 'k', 's', 't', 'c', 'f':
		case 'v':
			f.value = true
		case 'u':
			f.noUpdate = true
		case 'q':
			f.noReply = true
		case 'F':
			v, ok := protocol.SafeStrtoull(arg)
			if !ok {
				hasErr = true
			}
			f.clientFlags = uint32(v)
		case 'C':
			v, ok := protocol.SafeStrtoull(arg)
			if !ok {
				errReply, hasErr = replyMetaBadToken, true
			}
			f.cas, f.hasCas = v, ok
		case 'M':
			if len(tok) != 2 {
				errReply, hasErr = replyMetaMLength, true
			} else {
				f.mode = tok[1]
			}
		case 'J':
			v, ok := protocol.SafeStrtoull(arg)
			if !ok {
				errReply, hasErr = replyMetaBadInitial, true
			}
			f.initial = v
		case 'D':
			v, ok := protocol.SafeStrtoull(arg)
			if !ok {
				errReply, hasErr = replyMetaBadDelta, true
			}
			f.delta = v
		case 'I':
			f.setStale = true
		default:
			return replyMetaInvalidFlag
		}
	}
	if hasErr {
		return errReply
	}
	return nil
}

// opaqueAbortAt is the index of the first O token longer than memcached accepts, or -1. memcached
// notices it only while writing the reply, after acting on the flags before it.
func opaqueAbortAt(toks [][]byte) int {
	for i, tok := range toks {
		if tok[0] == 'O' && len(tok) > metaMaxOpaqueLength {
			return i
		}
	}
	return -1
}

// appendOpaque appends " <O token>": memcached echoes the whole token, 'O' included.
func appendOpaque(dst, tok []byte) []byte {
	dst = append(dst, ' ')
	return append(dst, tok...)
}

// appendFlagKey appends " k<key>" (base64 and " b" for binary keys).
func appendFlagKey(dst, key []byte, binary bool) []byte {
	dst = append(dst, " k"...)
	return appendKey(dst, key, binary)
}
