package protocol

import "bytes"

// PeekLines bounds how many request lines one PeekKeys call looks at, so a buffer of thousands of
// keyless commands costs no more than this per call.
const PeekLines = 32

// PeekKeys collects the keys of the requests at the front of buf, in order, without parsing them for
// real. A server hands them to its store before it executes the requests one by one, so the memory
// of all their lookups is fetched at once instead of one cache miss at a time.
//
// The result is a hint, never an authority: PeekKeys does not validate anything, a key it returns may
// be one the real parse refuses (or a meta command's base64 text rather than the key it encodes), and
// it may stop early. It stops at the first incomplete line, at a data block whose length does not
// parse or has not fully arrived, when keys is full, or after PeekLines lines. A fetch line whose keys do
// not all fit is left for the next peek, unless no key has been taken yet: then its first keys are.
//
// It returns how many entries of keys it filled, each aliasing buf, and end: the offset just past the
// last request it looked at (0 when it looked at none), so the caller knows when to peek again.
func PeekKeys(buf []byte, keys [][]byte) (n, end int) {
	for lines := 0; lines < PeekLines && n < len(keys); lines++ {
		rest := buf[end:]
		nl := bytes.IndexByte(rest, '\n')
		if nl < 0 {
			break
		}
		line := rest[:nl]
		next := end + nl + 1
		name, args := nextToken(line)
		cmd, kind := lookupCommand(name)
		switch kind {
		case kindFetch:
			if cmd == CmdGat || cmd == CmdGats {
				_, args = nextToken(args) // the exptime
			}
			first := n
			for {
				var k []byte
				if k, args = nextToken(args); len(k) == 0 {
					break
				}
				if n == len(keys) {
					if first > 0 {
						return first, end // leave the whole line to the next peek
					}
					break
				}
				keys[n] = k
				n++
			}
		case kindStorage, kindMetaSet:
			key, rest := nextToken(args)
			// The data length follows flags and exptime in the classic commands (and the token too in
			// lease-set); in ms it comes right after the key.
			skip := 2
			switch {
			case kind == kindMetaSet:
				skip = 0
			case cmd == CmdLeaseSet:
				skip = 3
			}
			for ; skip > 0; skip-- {
				_, rest = nextToken(rest)
			}
			size, _ := nextToken(rest)
			v, ok := peekLength(size)
			if !ok || len(key) == 0 {
				return n, end
			}
			if next += v + 2; next > len(buf) {
				return n, end
			}
			keys[n] = key
			n++
		case kindArith, kindTouch, kindDelete, kindMeta:
			if key, _ := nextToken(args); len(key) > 0 {
				keys[n] = key
				n++
			}
		}
		end = next
	}
	return n, end
}

// nextToken splits the first space-separated token off s (a "\r" ending the line sticks to the last
// token; PeekKeys tolerates that because a wrong key only wastes a prefetch).
func nextToken(s []byte) (tok, rest []byte) {
	for len(s) > 0 && s[0] == ' ' {
		s = s[1:]
	}
	if sp := bytes.IndexByte(s, ' '); sp >= 0 {
		return s[:sp], s[sp+1:]
	}
	if len(s) > 0 && s[len(s)-1] == '\r' {
		s = s[:len(s)-1]
	}
	return s, nil
}

// peekLength reads a data block length: decimal digits only, at most nine of them (a block that long
// is never skipped within one read buffer anyway).
func peekLength(tok []byte) (int, bool) {
	if len(tok) == 0 || len(tok) > 9 {
		return 0, false
	}
	v := 0
	for _, c := range tok {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	return v, true
}
