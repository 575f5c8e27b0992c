package server

import (
	"fmt"
	"log/slog"

	"github.com/leasecached/leasecached/auth"
	"github.com/leasecached/leasecached/protocol"
)

// Text-protocol authentication (-Y), as memcached 1.6.18 does it: until a connection has authenticated,
// every request is an attempt (protocol.ParseAuth has the rules), and once it has, it is served as any
// other. The engine's only cost is conn.auth: nil with -Y off and once authenticated, so serve takes one
// predictable branch. See doc/design/auth.md.

// authPendingInput bounds the input held for a connection whose check runs on a checker goroutine: a
// client that sends more than this before it has its answer is closed. memcached, whose checks never
// wait, reads at most its 16 KB buffer from a connection that has not authenticated.
const authPendingInput = 1 << 20

// authWindow and authFirstWindow are memcached's reqs_per_event: after that many requests (one more in the
// first round of a read event) it sends what it has answered. See authConn.slot.
const (
	authFirstWindow = 21
	authWindow      = 20
)

// authConn is the state of a connection that has not authenticated.
type authConn struct {
	// slot is where in cn.out the answer to the last attempt starts, while memcached would not yet have
	// sent it (-1: none). memcached answers every attempt in one response object, so an answer replaces
	// the one before it until the object is sent: when its input runs out, or every authWindow requests.
	// "get a\r\nget b\r\n" in one read is answered once.
	slot int
	// pending is the check of the attempt at the front of the input, running on a checker goroutine
	// (auth.Verifier); the attempt spans pendingN bytes and stays in the input until the answer is in.
	// closeConn cancels it: a check still waiting for a checker is then not made. A check the Verifier's
	// queue has no room for is answered at once as a failure (auth.MaxQueued).
	pending  *auth.Pending
	pendingN int
}

// loadAuth loads cfg.AuthFile and cfg.SASLFile, if set, and registers their reloads. A file that does not
// load makes Run fail.
func (s *Server) loadAuth() {
	load := func(path, what string) *auth.Verifier {
		if path == "" || s.authErr != nil {
			return nil
		}
		v, err := auth.NewVerifier(path)
		if err != nil {
			s.authErr = fmt.Errorf("%s: %w", what, err)
			return nil
		}
		s.reloaders = append(s.reloaders, reloader{what: what, reload: v.Reload})
		return v
	}
	s.auth = load(s.cfg.AuthFile, "-Y")
	s.sasl = load(s.cfg.SASLFile, "--sasl-pwdb")
}

// newAuthConn is the state a new connection starts with: nil unless -Y is on.
func (s *Server) newAuthConn() *authConn {
	if s.auth == nil {
		return nil
	}
	return &authConn{slot: -1}
}

// serveAuth serves the front of buf while the connection has not authenticated. It returns how much of buf
// it consumed and the action; once the connection has authenticated (cn.auth nil, Continue), serve goes on
// with the rest of buf as usual.
func (cn *conn) serveAuth(c Transport, buf []byte) (int, Action) {
	a := cn.auth
	a.slot = -1 // what earlier serve calls answered has been written
	pos := 0
	if a.pending != nil {
		ok, done := a.pending.Result()
		if !done {
			if len(buf) > authPendingInput {
				return 0, Close
			}
			return 0, Continue
		}
		a.pending = nil
		pos = a.pendingN
		if cn.authAnswer(ok) {
			return pos, Continue
		}
	}
	for served := 1; ; served++ {
		at := cn.parser.ParseAuth(buf[pos:])
		switch at.Status {
		case protocol.AuthIncomplete:
			cn.need = at.Need
			return pos, Continue
		case protocol.AuthLineTooLong: // memcached closes at once: the answer it had not sent is lost
			if a.slot >= 0 {
				cn.out = cn.out[:a.slot]
			}
			cn.protocolError("authentication line too long")
			return pos, Close
		case protocol.AuthBlockTooLong: // memcached sent its answers while it waited for the block
			cn.protocolError("authentication data too long")
			return pos, Close
		case protocol.AuthNotAttempt:
			cn.authReply(protocol.ReplyUnauthenticated)
		case protocol.AuthBadTermination:
			cn.authReply(protocol.ReplyBadLineTermination)
		case protocol.AuthBadTokens:
			cn.authReply(protocol.ReplyBadAuthTokenFormat)
		case protocol.AuthCredentials:
			ok, p := cn.srv.auth.Check(at.User, at.Pass, wakerOf(c))
			if p != nil {
				a.pending, a.pendingN = p, at.N
				return pos, Continue
			}
			if cn.authAnswer(ok) {
				return pos + at.N, Continue
			}
		}
		pos += at.N
		if served == authFirstWindow || served > authFirstWindow && (served-authFirstWindow)%authWindow == 0 {
			a.slot = -1
		}
	}
}

// authAnswer answers a checked attempt and counts it; it reports whether the connection has authenticated.
func (cn *conn) authAnswer(ok bool) bool {
	cn.local[statAuthCmds]++
	if !ok {
		cn.local[statAuthErrors]++
		cn.log(slog.LevelInfo, "authentication failed")
		cn.authReply(protocol.ReplyAuthFailure)
		return false
	}
	cn.authReply(protocol.ReplyStored)
	cn.auth = nil
	return true
}

// authReply answers an attempt, replacing the answer memcached would not have sent yet (authConn.slot).
func (cn *conn) authReply(r []byte) {
	a := cn.auth
	if a.slot >= 0 {
		cn.out = cn.out[:a.slot]
	}
	a.slot = len(cn.out)
	cn.out = append(cn.out, r...)
}
