package protocol

import "encoding/base64"

// Base64 keys (the meta flag b). memcached decodes leniently and encodes strictly; we do the same so
// a client sees the same key back (k) and the same errors.

// base64Invalid marks bytes outside the alphabet in base64Values.
const base64Invalid = 0x80

// base64Values maps a byte to its 6-bit value; '=' counts as an alphabet byte worth 0.
var base64Values = func() (t [256]byte) {
	for i := range t {
		t[i] = base64Invalid
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	for i := range len(alphabet) {
		t[alphabet[i]] = byte(i)
	}
	t['='] = 0
	return t
}()

// DecodeKeyBase64 decodes src into dst as memcached's base64_decode does and returns the decoded
// bytes, or false where memcached fails (it returns 0 bytes): bytes outside the alphabet are skipped;
// the alphabet count (with '=') must be a non-zero multiple of 4; decoding stops after the first
// block holding padding, which may hold at most two '='. dst must hold len(src)/4*3 bytes.
func DecodeKeyBase64(dst, src []byte) ([]byte, bool) {
	count := 0
	for _, c := range src {
		if base64Values[c] != base64Invalid {
			count++
		}
	}
	if count == 0 || count%4 != 0 || len(dst) < count/4*3 {
		return nil, false
	}
	var block [4]byte
	n, inBlock, pad := 0, 0, 0
	for _, c := range src {
		v := base64Values[c]
		if v == base64Invalid {
			continue
		}
		if c == '=' {
			pad++
		}
		block[inBlock] = v
		inBlock++
		if inBlock < len(block) {
			continue
		}
		inBlock = 0
		dst[n] = block[0]<<2 | block[1]>>4
		dst[n+1] = block[1]<<4 | block[2]>>2
		dst[n+2] = block[2]<<6 | block[3]
		n += 3
		if pad > 0 {
			if pad > 2 {
				return nil, false
			}
			n -= pad
			break
		}
	}
	return dst[:n], n > 0
}

// AppendBase64 appends key in standard base64 with padding, as memcached's base64_encode writes it.
func AppendBase64(dst, key []byte) []byte { return base64.StdEncoding.AppendEncode(dst, key) }

// AppendMetaKey appends a key as meta replies show it: raw, or base64 followed by " b" when binary.
func AppendMetaKey(dst, key []byte, binary bool) []byte {
	if !binary {
		return append(dst, key...)
	}
	dst = AppendBase64(dst, key)
	return append(dst, " b"...)
}
