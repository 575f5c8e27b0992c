package server

// Numeric meta-flag values, read the way memcached 1.6.18's safe_strtol / safe_strtoul /
// safe_strtoull read them on 64-bit Linux (the protocol package does the same for command lines;
// its helpers are private to the parser, and meta flags are parsed here, at execution):
//   - optional leading C whitespace and one sign;
//   - digits, then the end or a whitespace byte (anything may follow it);
//   - 64-bit parse, then truncation to the destination width;
//   - an unsigned parse accepts '-' unless the result looks negative as int64.

func isCSpace(c byte) bool { return c == ' ' || (c >= '\t' && c <= '\r') }

// strtoMag parses [space*][sign]digits and reports magnitude, sign and acceptability.
func strtoMag(tok []byte) (mag uint64, neg, ok bool) {
	i := 0
	for i < len(tok) && isCSpace(tok[i]) {
		i++
	}
	if i < len(tok) && (tok[i] == '+' || tok[i] == '-') {
		neg = tok[i] == '-'
		i++
	}
	start, overflow := i, false
	for ; i < len(tok) && tok[i] >= '0' && tok[i] <= '9'; i++ {
		d := uint64(tok[i] - '0')
		if mag > (^uint64(0)-d)/10 {
			overflow = true
		} else {
			mag = mag*10 + d
		}
	}
	if i == start || overflow || (i < len(tok) && !isCSpace(tok[i])) {
		return 0, neg, false
	}
	return mag, neg, true
}

// safeStrtoull is memcached's safe_strtoull.
func safeStrtoull(tok []byte) (uint64, bool) {
	mag, neg, ok := strtoMag(tok)
	if !ok {
		return 0, false
	}
	v := mag
	if neg {
		v = -mag // strtoull negates in unsigned arithmetic
	}
	if int64(v) < 0 {
		for _, c := range tok {
			if c == '-' {
				return 0, false // memcached's strchr(str, '-') check
			}
		}
	}
	return v, true
}

// safeStrtol is memcached's safe_strtol into an int32.
func safeStrtol(tok []byte) (int32, bool) {
	mag, neg, ok := strtoMag(tok)
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

// safeStrtoul is memcached's safe_strtoul into a uint32: unsigned long is 64-bit on LP64, so the rules
// are safe_strtoull's and the result is truncated ("4294967297" reads as 1).
func safeStrtoul(tok []byte) (uint32, bool) {
	v, ok := safeStrtoull(tok)
	return uint32(v), ok
}
