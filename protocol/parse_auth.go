package protocol

import "bytes"

// The text protocol's authentication (memcached's -Y): before a connection has authenticated, every request
// is read as an attempt, by rules of its own (memcached 1.6.18's try_read_command_asciiauth, each verified
// against the 1.6.18 binary):
//   - nothing is read while fewer than 2 bytes are held (a lone "\n" waits for more);
//   - the line ends at the first "\n" within memcached's read buffer (ReadBufferSize); with none there,
//     more than MaxLineLength held bytes close the connection silently (get lines are not exempt);
//   - the line is tokenised as any request line ("\r" stays in the last token, a NUL ends it); it is an
//     attempt only when it has at least 5 tokens, the first is "set", and the fifth is a safe_strtoul
//     number (flags, exptime, the key and any further token, noreply included, are not looked at);
//     otherwise the line alone is consumed and answered ReplyUnauthenticated;
//   - the data block is <bytes>+2 bytes, computed in 32 bits (so <bytes> 4294967294 is a 0-byte block
//     and 4294967295 a 1-byte one, both answered ReplyBadLineTermination); a block longer than the read
//     buffer can never be read: the connection is closed once more than a buffer's worth has arrived;
//   - a block not ending in "\r\n" is answered ReplyBadLineTermination, the connection kept and the block
//     consumed; otherwise its first two space-separated tokens (a NUL ends it) are the user and password,
//     and fewer than two are answered ReplyBadAuthTokenFormat.

// AuthStatus is what ParseAuth found at the front of the input.
type AuthStatus uint8

const (
	AuthIncomplete     AuthStatus = iota // more bytes are needed; nothing is consumed
	AuthNotAttempt                       // not an authentication attempt: ReplyUnauthenticated
	AuthBadTermination                   // the data block does not end in "\r\n": ReplyBadLineTermination
	AuthBadTokens                        // the data block has fewer than two tokens: ReplyBadAuthTokenFormat
	AuthCredentials                      // User and Pass are set
	AuthLineTooLong                      // no newline in more than MaxLineLength bytes: close, no reply
	AuthBlockTooLong                     // the data block can never fit memcached's read buffer: close
)

// AuthAttempt is the outcome of ParseAuth.
type AuthAttempt struct {
	Status AuthStatus
	// N is how many bytes the request spans (consumed unless Status is AuthIncomplete or a close).
	N int
	// Need, for AuthIncomplete once the line has arrived, is how many bytes from the start of the input
	// ParseAuth needs before it can answer (0: unknown, the line is incomplete).
	Need int
	// User and Pass alias the input.
	User, Pass []byte
}

// ParseAuth reads one request at the front of buf by memcached's rules for a connection that has not
// authenticated (above).
func (p *Parser) ParseAuth(buf []byte) AuthAttempt {
	if len(buf) < 2 {
		return AuthAttempt{Status: AuthIncomplete}
	}
	nl := bytes.IndexByte(buf[:min(len(buf), ReadBufferSize)], '\n')
	if nl < 0 {
		if len(buf) > MaxLineLength {
			return AuthAttempt{Status: AuthLineTooLong}
		}
		return AuthAttempt{Status: AuthIncomplete}
	}
	next := nl + 1
	p.toks = tokenize(cString(buf[:nl]), p.toks)
	toks := p.toks
	if len(toks) < 5 || string(toks[0]) != "set" {
		return AuthAttempt{Status: AuthNotAttempt, N: next}
	}
	size, ok := parseUint32(toks[4])
	if !ok {
		return AuthAttempt{Status: AuthNotAttempt, N: next}
	}
	block := int(size + 2) // 32-bit arithmetic, as memcached's
	if block > ReadBufferSize {
		if len(buf)-next > ReadBufferSize {
			return AuthAttempt{Status: AuthBlockTooLong}
		}
		return AuthAttempt{Status: AuthIncomplete, Need: next + ReadBufferSize + 1}
	}
	end := next + block
	if len(buf) < end {
		return AuthAttempt{Status: AuthIncomplete, Need: end}
	}
	if block < 2 || buf[end-2] != '\r' || buf[end-1] != '\n' {
		return AuthAttempt{Status: AuthBadTermination, N: end}
	}
	p.toks = tokenize(cString(buf[next:end-2]), p.toks)
	if len(p.toks) < 2 {
		return AuthAttempt{Status: AuthBadTokens, N: end}
	}
	return AuthAttempt{Status: AuthCredentials, N: end, User: p.toks[0], Pass: p.toks[1]}
}

// cString is b up to its first NUL, as C's strlen sees it.
func cString(b []byte) []byte {
	if z := bytes.IndexByte(b, 0); z >= 0 {
		return b[:z]
	}
	return b
}
