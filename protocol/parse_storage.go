package protocol

// Storage commands: "set|add|replace|append|prepend <key> <flags> <exptime> <bytes> [noreply]",
// "cas <key> <flags> <exptime> <bytes> <unique> [noreply]",
// "lease-set <key> <token> <flags> <exptime> <bytes> [noreply]", each followed by a data block
// of <bytes> bytes and "\r\n".
//
// memcached's handling, reproduced here (all verified with 1.6.18):
//   - a bad command line consumes only the line; the data block is then parsed as commands;
//   - a value too large for -I is refused with "SERVER_ERROR object too large for cache" and
//     exactly <bytes>+2 bytes are swallowed, whatever they contain;
//   - otherwise exactly <bytes>+2 bytes are read; if the last two are not "\r\n" the reply is
//     "CLIENT_ERROR bad data chunk" and parsing resumes right after them ("set k 0 0 3\r\nabc\nget
//     k\r\n" eats "abc\ng" and then answers ERROR to "et k");
//   - with "noreply" all of these errors are silent.

// storageLayout says where each field sits in a storage command line.
type storageLayout struct {
	minToks, maxToks           int
	flags, exptime, bytes, cas int // token indexes; cas < 0 when absent
}

var (
	layoutSet      = storageLayout{minToks: 5, maxToks: 6, flags: 2, exptime: 3, bytes: 4, cas: -1}
	layoutCas      = storageLayout{minToks: 6, maxToks: 7, flags: 2, exptime: 3, bytes: 4, cas: 5}
	layoutLeaseSet = storageLayout{minToks: 6, maxToks: 7, flags: 3, exptime: 4, bytes: 5, cas: 2}
)

func (p *Parser) parseStorage(buf []byte, next int, req *Request, toks [][]byte) (int, error) {
	lay := &layoutSet
	switch req.Cmd {
	case CmdCas:
		lay = &layoutCas
	case CmdLeaseSet:
		lay = &layoutLeaseSet
	}
	if len(toks) < lay.minToks || len(toks) > lay.maxToks {
		return next, errUnknown
	}
	noreply := hasNoreply(toks)
	key := toks[1]
	if keyTooLong(key) {
		return next, quiet(noreply, errBadFormat, errBadFormatQuiet)
	}
	// Same evaluation order as process_update_command: flags, exptime, bytes, then the unique.
	flags, okF := parseUint32(toks[lay.flags])
	exp, okE := parseInt32(toks[lay.exptime])
	vlen, okB := parseInt32(toks[lay.bytes])
	if !okF || !okE || !okB {
		return next, quiet(noreply, errBadFormat, errBadFormatQuiet)
	}
	var cas uint64
	if lay.cas >= 0 {
		var ok bool
		if cas, ok = parseUint64(toks[lay.cas]); !ok {
			return next, quiet(noreply, errBadFormat, errBadFormatQuiet)
		}
	}
	if vlen < 0 || int(vlen) > maxValueLength {
		return next, quiet(noreply, errBadFormat, errBadFormatQuiet)
	}
	n := int(vlen)
	if p.tooLarge(len(key), flags, n) {
		reply := replyTooLarge
		if noreply {
			reply = nil
		}
		n, err := p.swallowBlock(buf, next, n, reply)
		if req.Cmd == CmdSet {
			p.swallow.DropKey = key
		}
		p.swallow.Refused = Refusal{Cmd: req.Cmd, Key: key}
		return n, err
	}
	data, end, st := dataBlock(buf, next, n)
	switch st {
	case blockNeedMore:
		p.need = end
		p.pend = pending{next: next, n: n, noreply: noreply, cmd: req.Cmd, key: key}
		if req.Cmd == CmdSet {
			p.pend.drop = key
		}
		return 0, nil
	case blockBadChunk:
		return end, quiet(noreply, errBadDataChunk, errBadChunkQuiet)
	}
	req.Keys = append(req.Keys, key)
	req.Flags = flags
	req.Exptime = int64(exp)
	req.Bytes = n
	req.Cas = cas
	req.Noreply = noreply
	req.Data = data
	return end, nil
}

// tooLarge is memcached's item_size_ok for a key of nkey bytes and a value of n bytes.
func (p *Parser) tooLarge(nkey int, flags uint32, n int) bool {
	return ItemSize(nkey, n, flags) > p.maxItemSize()
}

// ItemSize is the size memcached 1.6.18 gives an item of an nkey-byte key, an nvalue-byte value and
// client flags (ITEM_ntotal with CAS on): what its -I check compares with item_size_max, and what `me`
// and metadump report as size. leasecached's items are smaller; it reports and limits by this.
func ItemSize(nkey, nvalue int, flags uint32) int {
	total := itemHeaderSize + nkey + 1 + nvalue + 2
	if flags != 0 {
		total += flagsSuffixSize
	}
	return total
}

// swallowBlock answers reply and discards the n+2 byte data block starting at next: what is
// already buffered now, the rest via Error.Swallow.
func (p *Parser) swallowBlock(buf []byte, next, n int, reply []byte) (int, error) {
	block := n + 2
	have := min(len(buf)-next, block)
	return next + have, p.swallowError(reply, block-have)
}

// blockStatus is the outcome of reading a data block.
type blockStatus uint8

const (
	blockComplete blockStatus = iota
	blockNeedMore
	blockBadChunk
)

// dataBlock reads the n-byte data block plus its "\r\n" terminator starting at buf[start:].
// end is the offset just past the terminator: where the request ends once the block is all buffered.
func dataBlock(buf []byte, start, n int) (data []byte, end int, st blockStatus) {
	end = start + n + 2
	if len(buf) < end {
		return nil, end, blockNeedMore
	}
	if buf[end-2] != '\r' || buf[end-1] != '\n' {
		return nil, end, blockBadChunk
	}
	return buf[start : start+n : start+n], end, blockComplete
}
