package protocol

// ms: "ms <key> <datalen> <flag>*\r\n<data>\r\n".
//
// memcached 1.6.18 (process_mset_command), verified with the binary:
//   - "ms" alone is ERROR; an over-long key, a missing or invalid <datalen> is
//     "CLIENT_ERROR bad command line format" and too many tokens is "CLIENT_ERROR options flags
//     too long"; none of these swallow the data block;
//   - once <datalen> is known, every later error (bad flag, opaque too long, bad mode, value too
//     large) swallows <datalen>+2 bytes without looking at them, so we validate the flags here:
//     it decides both the reply and the framing;
//   - a bad terminator is "CLIENT_ERROR bad data chunk"; ms errors are never silenced by 'q'.

func (p *Parser) parseMetaSet(buf []byte, next int, req *Request, toks [][]byte) (int, error) {
	if len(toks) < 2 {
		return next, errUnknown
	}
	key := toks[1]
	if keyTooLong(key) || len(toks) == 2 {
		return next, errBadFormat
	}
	if len(toks)+1 > metaMaxTokens {
		return next, errMetaTooLong
	}
	vlen, ok := parseInt32(toks[2])
	if !ok || vlen < 0 || int(vlen) > maxValueLength {
		return next, errBadFormat
	}
	n := int(vlen)
	flagToks := toks[3:]
	v := checkMetaSetFlags(key, flagToks)
	if v.reply != nil {
		return p.swallowBlock(buf, next, n, v.reply)
	}
	if p.tooLarge(v.nkey, v.clientFlags, n) {
		n, err := p.swallowBlock(buf, next, n, replyTooLarge)
		p.swallow.DropKey = key
		return n, err
	}
	data, end, st := dataBlock(buf, next, n)
	switch st {
	case blockNeedMore:
		p.need = end
		p.pend = pending{next: next, n: n, drop: key}
		return 0, nil
	case blockBadChunk:
		return end, errBadDataChunk
	}
	req.Keys = append(req.Keys, key)
	req.Bytes = n
	req.Flags = v.clientFlags
	req.Data = data
	req.Args = append(req.Args, flagToks...)
	return end, nil
}

// metaSetCheck is the outcome of validating ms flags.
type metaSetCheck struct {
	reply       []byte // error reply, nil when the flags are acceptable
	nkey        int    // key length as stored (base64-decoded with the 'b' flag)
	clientFlags uint32 // the F flag, 0 when absent
}

// checkMetaSetFlags reproduces memcached's _meta_flag_preparse plus the ms-specific checks that
// precede item allocation (opaque length, M mode), with memcached's precedence: a duplicate or
// unknown flag stops at once; value errors are remembered (the last one wins) and reported after
// the scan; an invalid mode outranks an over-long opaque.
func checkMetaSetFlags(key []byte, flags [][]byte) metaSetCheck {
	res := metaSetCheck{nkey: len(key)}
	var seen [127]bool
	errReply := replyBadFormat // memcached's default errstr, kept by a bad F value
	hasErr := false
	var mode byte
	for _, f := range flags {
		o := f[0]
		if o >= 127 || seen[o] {
			res.reply = replyDuplicateFlag
			return res
		}
		seen[o] = true
		arg := f[1:]
		switch o {
		case 'b':
			n, ok := base64DecodedLen(key)
			if !ok {
				errReply, hasErr = replyDecodingKey, true
			}
			res.nkey = n
		case 'N', 'T', 'R':
			if _, ok := parseInt32(arg); !ok {
				errReply, hasErr = replyBadToken, true
			}
		case 'F':
			v, ok := parseUint32(arg)
			if !ok {
				hasErr = true
			}
			res.clientFlags = v
		case 'C':
			if _, ok := parseUint64(arg); !ok {
				errReply, hasErr = replyBadToken, true
			}
		case 'M':
			if len(f) != 2 {
				errReply, hasErr = replyBadMLength, true
			} else {
				mode = f[1]
			}
		case 'J':
			if _, ok := parseUint64(arg); !ok {
				errReply, hasErr = replyBadInitial, true
			}
		case 'D':
			if _, ok := parseUint64(arg); !ok {
				errReply, hasErr = replyBadDeltaValue, true
			}
		case 'l', 'O', 'P', 'L', 'k', 's', 't', 'c', 'f', 'v', 'h', 'u', 'q', 'I':
		default:
			res.reply = replyInvalidFlag
			return res
		}
	}
	if hasErr {
		res.reply = errReply
		return res
	}
	opaqueTooLong := false
	for _, f := range flags {
		if f[0] == 'O' && len(f) > metaMaxOpaqueLength {
			opaqueTooLong = true
		}
	}
	switch mode {
	case 0, 'E', 'A', 'P', 'R', 'S':
	default:
		res.reply = replyInvalidMsModeFlag
		return res
	}
	if opaqueTooLong {
		res.reply = replyOpaqueTooLong
	}
	return res
}

// base64DecodedLen returns the length memcached's base64_decode produces for src, or false where
// it fails (it returns 0): bytes outside the alphabet are skipped, the alphabet count (with '=')
// must be a non-zero multiple of 4, decoding stops after the first block holding padding, and
// that block may hold at most two '='.
func base64DecodedLen(src []byte) (int, bool) {
	count := 0
	for _, c := range src {
		if isBase64Char(c) {
			count++
		}
	}
	if count == 0 || count%4 != 0 {
		return 0, false
	}
	out, inBlock, pad := 0, 0, 0
	for _, c := range src {
		if !isBase64Char(c) {
			continue
		}
		if c == '=' {
			pad++
		}
		inBlock++
		if inBlock < 4 {
			continue
		}
		out += 3
		inBlock = 0
		if pad > 0 {
			if pad > 2 {
				return 0, false
			}
			out -= pad
			break
		}
	}
	return out, out > 0
}

func isBase64Char(c byte) bool {
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		c == '+' || c == '/' || c == '='
}
