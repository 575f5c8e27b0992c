package protocol

// Line-only commands: fetches, incr/decr, touch, delete, flush_all, verbosity, meta framing.
// Token counts below are memcached's WANT_TOKENS bounds minus its terminal pseudo-token.

// hasNoreply is memcached's set_noreply_maybe: the last token is exactly "noreply". memcached
// evaluates it before validating anything else, which is why later errors become silent.
func hasNoreply(toks [][]byte) bool {
	return string(toks[len(toks)-1]) == "noreply"
}

// keyTooLong reports a key memcached refuses with "bad command line format".
func keyTooLong(key []byte) bool { return len(key) > KeyMaxLength }

// parseFetch handles get, gets, bget, lease-get (keys from token 1) and gat, gats (exptime, then
// keys). Any over-long key fails the whole command: memcached 1.6.18 discards the replies for the
// keys before it and answers only "CLIENT_ERROR bad command line format" (verified).
func parseFetch(req *Request, toks [][]byte) *Error {
	if len(toks) < 2 {
		return errUnknown // "get" alone is ERROR; "gat 0" with no keys is valid (END)
	}
	keys := toks[1:]
	if req.Cmd == CmdGat || req.Cmd == CmdGats {
		exp, ok := parseInt32(toks[1])
		if !ok {
			return errBadExptime
		}
		req.Exptime = int64(exp)
		keys = toks[2:]
	}
	for _, k := range keys {
		if keyTooLong(k) {
			return errBadFormat
		}
	}
	req.Keys = append(req.Keys, keys...)
	return nil
}

// parseArith handles "incr|decr <key> <delta> [noreply]"; a fourth token that is not noreply is
// ignored, as in memcached ("incr k 1 x" is a normal incr).
func parseArith(req *Request, toks [][]byte) *Error {
	if len(toks) != 3 && len(toks) != 4 {
		return errUnknown
	}
	req.Noreply = hasNoreply(toks)
	if keyTooLong(toks[1]) {
		return quiet(req.Noreply, errBadFormat, errBadFormatQuiet)
	}
	delta, ok := parseUint64(toks[2])
	if !ok {
		return quiet(req.Noreply, errBadDelta, errBadDeltaQuiet)
	}
	req.Keys = append(req.Keys, toks[1])
	req.Delta = delta
	return nil
}

// parseTouch handles "touch <key> <exptime> [noreply]".
func parseTouch(req *Request, toks [][]byte) *Error {
	if len(toks) != 3 && len(toks) != 4 {
		return errUnknown
	}
	req.Noreply = hasNoreply(toks)
	if keyTooLong(toks[1]) {
		return quiet(req.Noreply, errBadFormat, errBadFormatQuiet)
	}
	exp, ok := parseInt32(toks[2])
	if !ok {
		return quiet(req.Noreply, errBadExptime, errBadExptimeQuiet)
	}
	req.Keys = append(req.Keys, toks[1])
	req.Exptime = int64(exp)
	return nil
}

// parseDelete handles "delete <key> [0] [noreply]": memcached still accepts the legacy hold time
// when it is exactly "0"; anything else gets the usage error.
func parseDelete(req *Request, toks [][]byte) *Error {
	if len(toks) < 2 || len(toks) > 4 {
		return errUnknown
	}
	if len(toks) > 2 {
		zero := string(toks[2]) == "0"
		req.Noreply = hasNoreply(toks)
		valid := (len(toks) == 3 && (zero || req.Noreply)) ||
			(len(toks) == 4 && zero && req.Noreply)
		if !valid {
			return quiet(req.Noreply, errDeleteUsage, errDeleteQuiet)
		}
	}
	if keyTooLong(toks[1]) {
		return quiet(req.Noreply, errBadFormat, errBadFormatQuiet)
	}
	req.Keys = append(req.Keys, toks[1])
	return nil
}

// parseFlushAll handles "flush_all [delay] [noreply]". As in memcached, a token after the delay
// that is not noreply is ignored ("flush_all 1 2" answers OK).
func parseFlushAll(req *Request, toks [][]byte) *Error {
	if len(toks) > 3 {
		return errUnknown
	}
	req.Noreply = hasNoreply(toks)
	bare := 1
	if req.Noreply {
		bare = 2
	}
	if len(toks) != bare {
		exp, ok := parseInt32(toks[1])
		if !ok {
			return quiet(req.Noreply, errBadExptime, errBadExptimeQuiet)
		}
		req.Exptime = int64(exp)
	}
	return nil
}

// parseVerbosity handles "verbosity <level> [noreply]"; the level goes to Delta and Args.
func parseVerbosity(req *Request, toks [][]byte) *Error {
	if len(toks) != 2 && len(toks) != 3 {
		return errUnknown
	}
	req.Noreply = hasNoreply(toks)
	level, ok := parseUint32(toks[1])
	if !ok {
		return quiet(req.Noreply, errBadFormat, errBadFormatQuiet)
	}
	req.Delta = uint64(level)
	req.Args = append(req.Args, toks[1:]...)
	return nil
}

// parseMemlimit handles "cache_memlimit <megabytes> [noreply]"; the megabytes go to Delta. As in memcached,
// noreply is looked for before the number is checked, a bad number is a plain ERROR (silent with noreply),
// and a third token that is not noreply is ignored. The limits on the value are the server's to check.
func parseMemlimit(req *Request, toks [][]byte) *Error {
	if len(toks) != 2 && len(toks) != 3 {
		return errUnknown
	}
	req.Noreply = hasNoreply(toks)
	mb, ok := parseUint32(toks[1])
	if !ok {
		return quiet(req.Noreply, errUnknown, errUnknownQuiet)
	}
	req.Delta = uint64(mb)
	return nil
}

// parseMeta frames mg, md, ma and me: key and flag tokens. Flag semantics (and their errors) are
// the server's job; only the checks memcached makes before looking at flags live here.
func parseMeta(req *Request, toks [][]byte) *Error {
	if len(toks) < 2 {
		if req.Cmd == CmdMetaDebug {
			return errBadFormat // "me" alone: process_meta_command's own check
		}
		return errUnknown
	}
	if keyTooLong(toks[1]) {
		return errBadFormat
	}
	if req.Cmd != CmdMetaDebug && len(toks)+1 > metaMaxTokens {
		if req.Cmd == CmdMetaGet {
			return errMgTooLong
		}
		return errMetaTooLong
	}
	req.Keys = append(req.Keys, toks[1])
	req.Args = append(req.Args, toks[2:]...)
	if req.Cmd != CmdMetaDebug {
		req.preparseMeta()
	}
	return nil
}
