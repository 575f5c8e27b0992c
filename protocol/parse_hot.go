package protocol

// The hot path: the requests a cache mostly serves, in the form clients send them, parsed without
// tokenising the line. "get <key>", "gets <key>" and "lease-get <key>" with one key (lease-get must cost
// within 5% of get), and "set <key> <flags> <exptime> <bytes>" with plain digits, no noreply and its data
// block complete and well terminated. Anything else, however
// slightly different (a second key, a sign, a nineteenth digit, a NUL, a value too large, an incomplete block),
// is left to the general path, which answers it by memcached's rules; this one only ever agrees with it
// (FuzzParseHot checks that on arbitrary input).
//
// Why: on a pipelined get the general path's line split, command lookup and key copy were about 200 of the
// 1340 instructions a request cost, and on a set the split and the three number parses about 650 of 3000.
// callgrind, server benchmarks: get hit 1340 -> 1098 instructions, set 2922 -> 2507.

// hotMaxDigits bounds the numbers the hot path reads: eighteen digits never overflow an int, so the hot path
// needs no overflow check, and it truncates each to its field's width as the general path's
// safe_strtoul/safe_strtol do. Nine were enough for most fields, but flags that are a hash or a bit set
// take ten digits (as the load tool's do), and so does an absolute exptime.
const hotMaxDigits = 18

// parseHot parses the request at the front of buf if it is one the hot path knows, filling req, and returns
// its length; ok is false, with req untouched, when the general path must parse it.
func (p *Parser) parseHot(buf []byte, req *Request) (n int, ok bool) {
	if len(buf) < 6 {
		return 0, false
	}
	switch string(buf[:4]) {
	case "get ":
		return hotGet(buf, 4, CmdGet, req)
	case "gets":
		if buf[4] == ' ' {
			return hotGet(buf, 5, CmdGets, req)
		}
	case "set ":
		return p.hotSet(buf, req)
	case "leas":
		if len(buf) > 10 && string(buf[4:10]) == "e-get " {
			return hotGet(buf, 10, CmdLeaseGet, req)
		}
	}
	return 0, false
}

// hotGet parses a one-key fetch whose key starts at buf[i].
func hotGet(buf []byte, i int, cmd Command, req *Request) (int, bool) {
	key, end, ok := hotToken(buf, i)
	if !ok || keyTooLong(key) {
		return 0, false
	}
	n, ok := hotLineEnd(buf, end)
	if !ok {
		return 0, false
	}
	req.reset(cmd)
	req.Keys = append(req.Keys, key)
	return n, true
}

// hotSet parses "set <key> <flags> <exptime> <bytes>\r\n<data>\r\n".
func (p *Parser) hotSet(buf []byte, req *Request) (int, bool) {
	key, i, ok := hotToken(buf, 4)
	if !ok || keyTooLong(key) || i >= len(buf) || buf[i] != ' ' {
		return 0, false
	}
	var nums [3]int
	for f := range nums {
		v, end, ok := hotNumber(buf, i+1)
		if !ok {
			return 0, false
		}
		nums[f], i = v, end
		if f < len(nums)-1 && (i >= len(buf) || buf[i] != ' ') {
			return 0, false
		}
	}
	next, ok := hotLineEnd(buf, i)
	if !ok {
		return 0, false
	}
	flags, vlen := uint32(nums[0]), int(int32(nums[2]))
	if vlen < 0 || p.tooLarge(len(key), flags, vlen) {
		return 0, false
	}
	data, end, st := dataBlock(buf, next, vlen)
	if st != blockComplete {
		return 0, false
	}
	req.reset(CmdSet)
	req.Keys = append(req.Keys, key)
	req.Flags, req.Exptime, req.Bytes, req.Data = flags, int64(int32(nums[1])), vlen, data
	return end, true
}

// hotToken is the run of bytes above ' ' starting at buf[i] (at least one), and where it ends.
func hotToken(buf []byte, i int) (tok []byte, end int, ok bool) {
	end = plainEnd(buf, i)
	return buf[i:end], end, end > i
}

// hotNumber reads 1 to hotMaxDigits decimal digits starting at buf[i], ended by any byte that is not one.
//
// It ranges over a window of the buffer: a loop that indexed buf itself carried a bounds check and two limits
// per digit and kept its counters on the stack, about 20 instructions a digit (callgrind).
func hotNumber(buf []byte, i int) (v, end int, ok bool) {
	if i >= len(buf) {
		return 0, i, false
	}
	n := 0
	for _, c := range buf[i:min(len(buf), i+hotMaxDigits+1)] {
		if c-'0' > 9 {
			break
		}
		v = v*10 + int(c-'0')
		n++
	}
	return v, i + n, n > 0 && n <= hotMaxDigits
}

// hotLineEnd is the offset past the line's end when the line ends at buf[i] with "\r\n" or "\n".
func hotLineEnd(buf []byte, i int) (int, bool) {
	switch {
	case i < len(buf) && buf[i] == '\n':
		return i + 1, true
	case i+1 < len(buf) && buf[i] == '\r' && buf[i+1] == '\n':
		return i + 2, true
	}
	return 0, false
}
