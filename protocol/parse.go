package protocol

// Parser turns the front of a connection's inbound bytes into Requests. One Parser per connection
// (it holds reusable scratch); the zero value is ready to use.
type Parser struct {
	// MaxItemSize is memcached's -I limit in bytes (item_size_max); 0 means DefaultMaxItemSize.
	// It decides "SERVER_ERROR object too large for cache" with memcached's exact arithmetic.
	MaxItemSize int

	toks    [][]byte // token scratch, reused across calls
	swallow Error    // the one error whose Swallow varies; returned by pointer, reused
	need    int      // what Need reports
	pend    pending  // the storage request that Need describes, for RefuseNoMemory
}

// pending is what Parse keeps of a storage request whose data block has not all arrived.
type pending struct {
	next, n int    // where its data block starts, and its length without "\r\n"
	noreply bool   // the refusal is silent
	drop    []byte // the key whose old value a refusal removes (set, ms), aliasing the input; nil: none
	cmd     Command
	key     []byte // the request's key, aliasing the input
}

// RefuseNoMemory refuses the request that the last Parse of buf found waiting for its data block
// (Need() > 0) as memcached refuses a store it cannot allocate the item for: "SERVER_ERROR out of
// memory storing object" (nothing with noreply), the data block swallowed, and the key's old value
// dropped for set and ms. It returns what Parse returns for a refused request.
func (p *Parser) RefuseNoMemory(buf []byte) (int, error) {
	reply := ReplyServerErrorOOMStore
	if p.pend.noreply {
		reply = nil
	}
	n, err := p.swallowBlock(buf, p.pend.next, p.pend.n, reply)
	p.swallow.DropKey = p.pend.drop
	p.swallow.Refused = Refusal{Cmd: p.pend.cmd, Key: p.pend.key, NoMemory: true}
	p.need = 0
	return n, err
}

// Need is, after a Parse that found its request incomplete, how many bytes from the start of buf that
// request spans in all, when its command line has arrived and only its data block is short; 0 when not
// known (the line itself is incomplete). A caller waiting for a large value can leave the bytes
// unparsed until that many have arrived, instead of parsing the command line again after every read.
func (p *Parser) Need() int { return p.need }

// Parse parses one request from the front of buf.
//   - complete request: n > 0, err == nil, req filled.
//   - incomplete (need more bytes): n == 0, err == nil, nothing consumed, req unspecified.
//   - protocol error: err is *Error; n is how many bytes to discard now (the line, and as much of
//     a swallowed data block as is already in buf). The caller writes err.Reply unless empty,
//     discards err.Swallow further bytes as they arrive, and closes after flushing if err.Close.
//
// Like memcached, an invalid storage command line does not consume its data block: the next Parse
// reads the data as a command line (memcached 1.6.18 answers "CLIENT_ERROR bad command line
// format" and then "ERROR" for "set k abc 0 5\r\nhello\r\n").
func (p *Parser) Parse(buf []byte, req *Request) (n int, err error) {
	if n, ok := p.parseHot(buf, req); ok {
		return n, nil
	}
	return p.parseGeneral(buf, req)
}

// parseGeneral is Parse without the hot path: every request, by memcached's rules.
func (p *Parser) parseGeneral(buf []byte, req *Request) (n int, err error) {
	if len(buf) == 0 {
		p.need = 0
		return 0, nil
	}
	toks, next, st := splitLine(buf, p.toks)
	p.toks = toks
	switch st {
	case lineNeedMore:
		p.need = 0
		return 0, nil
	case lineTooLong:
		return len(buf), errLineTooLong
	}
	// memcached: no command has fewer than 1 token or a name shorter than 2 bytes.
	if len(toks) == 0 || len(toks[0]) < 2 {
		return next, errUnknown
	}
	cmd, kind := lookupCommand(toks[0])
	req.reset(cmd)
	var perr *Error
	switch kind {
	case kindUnknown:
		perr = errUnknown
		if isHTTPRequest(toks) {
			perr = errHTTP
		}
	case kindFetch:
		perr = parseFetch(req, toks)
	case kindStorage:
		return p.parseStorage(buf, next, req, toks)
	case kindMetaSet:
		return p.parseMetaSet(buf, next, req, toks)
	case kindArith:
		perr = parseArith(req, toks)
	case kindTouch:
		perr = parseTouch(req, toks)
	case kindDelete:
		perr = parseDelete(req, toks)
	case kindFlushAll:
		perr = parseFlushAll(req, toks)
	case kindVerbosity:
		perr = parseVerbosity(req, toks)
	case kindFreeArgs:
		req.Args = append(req.Args, toks[1:]...)
		if cmd == CmdRefreshCerts || cmd == CmdWatch {
			req.Noreply = hasNoreply(toks) // memcached's set_noreply_maybe
		}
	case kindMeta:
		perr = parseMeta(req, toks)
	case kindMemlimit:
		perr = parseMemlimit(req, toks)
	}
	if perr != nil {
		return next, perr
	}
	return next, nil
}

// maxItemSize resolves the configured -I limit.
func (p *Parser) maxItemSize() int {
	if p.MaxItemSize > 0 {
		return p.MaxItemSize
	}
	return DefaultMaxItemSize
}

// swallowError fills the Parser's reusable variable error.
func (p *Parser) swallowError(reply []byte, swallow int) *Error {
	p.swallow = Error{Reply: reply, Swallow: swallow}
	return &p.swallow
}

// isHTTPRequest reports whether an unknown command line looks like HTTP ("GET / HTTP/1.1"): memcached
// closes such connections without a reply rather than answer every header line with ERROR (verified
// with 1.6.18: the last token starting "HTTP/" is what it checks).
func isHTTPRequest(toks [][]byte) bool {
	last := toks[len(toks)-1]
	return len(last) >= 5 && string(last[:5]) == "HTTP/"
}
