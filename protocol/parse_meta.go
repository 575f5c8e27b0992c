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
	req.Keys = append(req.Keys, key)
	req.Args = append(req.Args, flagToks...)
	v := p.checkMetaSetFlags(req)
	if v.reply != nil {
		return p.swallowBlock(buf, next, n, v.reply)
	}
	// The key as stored (base64-decoded with b) is the one a refusal drops, as memcached's is; it
	// aliases the Request, which stays as parsed until the refusal is answered.
	stored := req.Meta.Key
	if p.tooLarge(v.nkey, v.clientFlags, n) {
		n, err := p.swallowBlock(buf, next, n, replyTooLarge)
		p.swallow.DropKey = stored
		p.swallow.Refused = Refusal{Cmd: CmdMetaSet, Key: stored}
		return n, err
	}
	data, end, st := dataBlock(buf, next, n)
	switch st {
	case blockNeedMore:
		p.need = end
		p.pend = pending{next: next, n: n, drop: stored, cmd: CmdMetaSet, key: stored}
		return 0, nil
	case blockBadChunk:
		return end, errBadDataChunk
	}
	req.Bytes = n
	req.Flags = v.clientFlags
	req.Data = data
	return end, nil
}

// metaSetCheck is the outcome of validating ms flags.
type metaSetCheck struct {
	reply       []byte // error reply, nil when the flags are acceptable
	nkey        int    // key length as stored (base64-decoded with the 'b' flag)
	clientFlags uint32 // the F flag, 0 when absent
}

// checkMetaSetFlags is memcached's _meta_flag_preparse (Request.preparseMeta) plus the ms-specific checks
// that precede item allocation, with memcached's precedence: an invalid mode outranks an over-long opaque.
func (p *Parser) checkMetaSetFlags(req *Request) metaSetCheck {
	req.preparseMeta()
	if req.MetaErr != nil {
		return metaSetCheck{reply: req.MetaErr}
	}
	f := &req.Meta
	res := metaSetCheck{nkey: len(f.Key), clientFlags: f.ClientFlags}
	switch f.Mode {
	case 0, 'E', 'A', 'P', 'R', 'S':
	default:
		res.reply = ReplyInvalidMsModeFlag
		return res
	}
	if f.OpaqueAbort >= 0 {
		res.reply = ReplyOpaqueTooLong
	}
	return res
}
