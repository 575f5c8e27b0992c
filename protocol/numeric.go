package protocol

// Numeric token parsing that reproduces memcached's safe_strto* helpers (util.c) on 64-bit Linux,
// quirks included, because a client can observe every difference:
//   - leading C whitespace and one '+' or '-' sign are accepted (strtol/strtoul);
//   - the number may be followed by one whitespace character and then anything ("5\tjunk" is 5):
//     the helpers only check that *endptr is a space or the terminator;
//   - values are parsed as 64-bit C longs and then truncated to the 32-bit destination, so flags
//     4294967296 store as 0 and <bytes> 4294967297 reads as 1 (verified with 1.6.18);
//   - unsigned parses accept a leading '-' unless the result looks negative as a signed 64-bit
//     value, in which case any '-' anywhere in the token rejects it (strchr on the whole token:
//     "18446744073709551615\t-" is refused by 1.6.18).

// isCSpace is C isspace() in the "C" locale.
func isCSpace(c byte) bool {
	return c == ' ' || (c >= '\t' && c <= '\r')
}

// strtoMagnitude parses [space*][sign][digits] like glibc's strtoul family in base 10. It returns
// the magnitude, whether a '-' sign was seen, and whether the token is acceptable to memcached's
// safe_* wrappers (digits present, no overflow of uint64, followed by the end or a space).
func strtoMagnitude(tok []byte) (mag uint64, neg, ok bool) {
	if v, plain := plainDigits(tok); plain {
		return v, false, true
	}
	return strtoMagnitudeC(tok)
}

// strtoMagnitudeC is strtoMagnitude without the fast path: glibc's rules, step by step.
func strtoMagnitudeC(tok []byte) (mag uint64, neg, ok bool) {
	i := 0
	for i < len(tok) && isCSpace(tok[i]) {
		i++
	}
	if i < len(tok) && (tok[i] == '+' || tok[i] == '-') {
		neg = tok[i] == '-'
		i++
	}
	start := i
	overflow := false
	for i < len(tok) && tok[i] >= '0' && tok[i] <= '9' {
		d := uint64(tok[i] - '0')
		if mag > (^uint64(0)-d)/10 {
			overflow = true // glibc keeps consuming digits, then reports ERANGE
		} else {
			mag = mag*10 + d
		}
		i++
	}
	if i == start || overflow {
		return 0, neg, false
	}
	if i < len(tok) && !isCSpace(tok[i]) {
		return 0, neg, false
	}
	return mag, neg, true
}

// maxPlainDigits is the longest run of decimal digits that cannot overflow a uint64.
const maxPlainDigits = 19

// plainDigits parses a token of 1 to maxPlainDigits decimal digits and nothing else, the form clients
// send, without strtoMagnitude's per-digit overflow test; plain is false for any other token, which then
// takes the general path. A set line carries three numbers, and the general path was 8% of a set.
func plainDigits(tok []byte) (v uint64, plain bool) {
	if len(tok) == 0 || len(tok) > maxPlainDigits {
		return 0, false
	}
	for _, c := range tok {
		d := c - '0'
		if d > 9 {
			return 0, false
		}
		v = v*10 + uint64(d)
	}
	return v, true
}

// containsMinus reports whether tok has a '-' anywhere (memcached's strchr check).
func containsMinus(tok []byte) bool {
	for _, c := range tok {
		if c == '-' {
			return true
		}
	}
	return false
}

// parseUint64 is safe_strtoull.
func parseUint64(tok []byte) (uint64, bool) {
	mag, neg, ok := strtoMagnitude(tok)
	if !ok {
		return 0, false
	}
	v := mag
	if neg {
		v = -mag // strtoull negates in unsigned arithmetic
	}
	if int64(v) < 0 && containsMinus(tok) {
		return 0, false
	}
	return v, true
}

// parseUint32 is safe_strtoul: a 64-bit unsigned long parse truncated to 32 bits.
func parseUint32(tok []byte) (uint32, bool) {
	v, ok := parseUint64(tok) // identical rules on LP64, where unsigned long is 64-bit
	return uint32(v), ok
}

// parseInt32 is safe_strtol: a 64-bit signed long parse (ERANGE outside int64) truncated to 32
// bits, sign-extended back for the caller.
func parseInt32(tok []byte) (int32, bool) {
	mag, neg, ok := strtoMagnitude(tok)
	if !ok {
		return 0, false
	}
	const minInt64Mag = 1 << 63
	if (!neg && mag >= minInt64Mag) || (neg && mag > minInt64Mag) {
		return 0, false // ERANGE
	}
	v := int64(mag)
	if neg {
		v = -v
	}
	return int32(v), true
}

// SafeStrtoull, SafeStrtoul and SafeStrtol are the rules above for tokens read after parsing: meta
// flag values and admin arguments, which the server interprets at execution time. One implementation
// keeps every number in the protocol read the same way.
func SafeStrtoull(tok []byte) (uint64, bool) { return parseUint64(tok) }

// SafeStrtoul is memcached's safe_strtoul: SafeStrtoull truncated to 32 bits.
func SafeStrtoul(tok []byte) (uint32, bool) { return parseUint32(tok) }

// SafeStrtol is memcached's safe_strtol into an int32.
func SafeStrtol(tok []byte) (int32, bool) { return parseInt32(tok) }
