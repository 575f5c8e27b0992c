package protocol

import (
	"bytes"
	"encoding/binary"
	"math/bits"
)

// Line framing and tokenising, as memcached's try_read_command_ascii and tokenize_command do it:
//   - a line ends at the first "\n"; one "\r" before it is stripped, but only when the line has at
//     least one other byte ("(el - rcurr) > 1"), so a lone "\r\n" is the one-byte line "\r";
//   - the line is a C string: it ends at its first NUL byte (memcached runs strlen on it; verified:
//     "set k\x00junk 0 0 1" is the two-token line "set k" and gets ERROR);
//   - only ' ' separates tokens; tabs and other control bytes are part of tokens.

// lineStatus is the outcome of framing the front of the buffer.
type lineStatus uint8

const (
	lineComplete lineStatus = iota // a full line was found
	lineNeedMore                   // no newline yet, still within limits
	lineTooLong                    // the connection must be closed
)

// shortLine bounds the lines splitLine reads in one pass; longer ones (multi-key fetches, mostly) are
// framed with a vectorised search for their newline instead, which a byte loop would scan again on every
// partial read.
const shortLine = 256

// splitLine is frameLine followed by tokenize, returning the line's tokens (reusing toks) and the offset
// past its "\n". A line of plain tokens (bytes above ' ', single spaces or runs of them, "\r\n" or "\n")
// of up to shortLine bytes takes one pass over its bytes; any other line, complete or not, takes the
// general path.
//
// Why: frameLine and tokenize call bytes.IndexByte once for the newline, once for a NUL and once per
// token, and on request lines of 20 to 60 bytes those calls' set-up cost more than the search (a set line
// parsed about 30% faster in one pass).
func splitLine(buf []byte, toks [][]byte) ([][]byte, int, lineStatus) {
	toks = toks[:0]
	b := buf[:min(len(buf), shortLine)]
	for i := 0; ; {
		start := i
		i = plainEnd(b, i)
		if i == len(b) {
			break // no newline within shortLine bytes, or not yet arrived
		}
		if i > start { // a run of spaces leaves empty tokens, which are skipped
			toks = append(toks, b[start:i])
		}
		c := b[i]
		i++
		if c == ' ' {
			continue
		}
		if c == '\n' {
			return toks, i, lineComplete
		}
		// frameLine strips a "\r" before the "\n" unless it is the line's only byte.
		if c == '\r' && i > 1 && i < len(b) && b[i] == '\n' {
			return toks, i + 1, lineComplete
		}
		break // a NUL, a lone "\r" or another control byte: the general rules apply
	}
	line, next, st := frameLine(buf)
	if st != lineComplete {
		return toks[:0], next, st
	}
	return tokenize(line, toks), next, st
}

// plainEnd is the index of the first byte at or below ' ' in b[i:] (len(b) if none), found eight bytes at a
// time: a word has such a byte exactly when (x - 0x21 in each byte) &^ x has a byte's top bit set, and the
// lowest such bit marks the first one (a borrow only runs upwards from it).
func plainEnd(b []byte, i int) int {
	const ones = 0x0101010101010101
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		if m := (x - ones*0x21) &^ x & (ones * 0x80); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for i < len(b) && b[i] > ' ' {
		i++
	}
	return i
}

// frameLine finds the request line at the front of buf. On lineComplete, line is the line content
// (terminator, "\r" and anything after a NUL removed) and next is the offset just past the "\n".
func frameLine(buf []byte) (line []byte, next int, st lineStatus) {
	nl := bytes.IndexByte(buf, '\n')
	end := nl
	if nl < 0 {
		end = len(buf)
	}
	// memcached gives up on a line only while its newline has not arrived: a complete line of any
	// length up to its read buffer is processed (a 3000-byte junk line answers ERROR), but more than
	// MaxLineLength bytes without a newline close the connection unless it is a multi-key fetch.
	limit := MaxMultiKeyLineLength
	if nl < 0 && !isMultiKeyLine(buf[:end]) {
		limit = MaxLineLength
	}
	if end > limit {
		return nil, 0, lineTooLong
	}
	if nl < 0 {
		return nil, 0, lineNeedMore
	}
	line = buf[:nl]
	if nl > 1 && line[nl-1] == '\r' {
		line = line[:nl-1]
	}
	if z := bytes.IndexByte(line, 0); z >= 0 {
		line = line[:z]
	}
	return line, nl + 1, lineComplete
}

// multiKeyPrefixes are the commands whose lines may exceed MaxLineLength. memcached exempts only
// "get " and "gets "; see MaxMultiKeyLineLength for why we add the other multi-key fetches.
var multiKeyPrefixes = [...]string{"get ", "gets ", "gat ", "gats ", "bget ", "lease-get "}

// isMultiKeyLine reports whether a (partial) line is a multi-key fetch, skipping at most
// maxLeadingSpaces leading spaces as memcached does.
func isMultiKeyLine(line []byte) bool {
	i := 0
	for i < len(line) && line[i] == ' ' {
		i++
	}
	if i > maxLeadingSpaces {
		return false
	}
	rest := line[i:]
	for _, p := range multiKeyPrefixes {
		if len(rest) >= len(p) && string(rest[:len(p)]) == p {
			return true
		}
	}
	return false
}

// tokenize splits line on spaces into toks (reusing its capacity) and returns it.
func tokenize(line []byte, toks [][]byte) [][]byte {
	toks = toks[:0]
	for {
		for len(line) > 0 && line[0] == ' ' {
			line = line[1:]
		}
		if len(line) == 0 {
			return toks
		}
		sp := bytes.IndexByte(line, ' ')
		if sp < 0 {
			return append(toks, line)
		}
		toks = append(toks, line[:sp])
		line = line[sp+1:]
	}
}
