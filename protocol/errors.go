package protocol

// Error is a protocol error found by Parse. It carries everything the caller needs to behave like
// memcached: the reply line to write, how many more bytes to swallow, whether to close.
//
// Errors are preallocated (package-level values, or a field of the Parser when Swallow varies), so
// the error path allocates nothing. Treat them as read-only, and copy an Error that comes from a
// Parser if you need it past the next Parse call.
type Error struct {
	// Reply is the full reply line including "\r\n" (e.g. "CLIENT_ERROR bad data chunk\r\n").
	// It is empty when memcached stays silent: a classic command with "noreply", or a
	// connection that is simply closed.
	Reply []byte
	// Swallow is how many further bytes, beyond the n returned by Parse, the caller must discard
	// as they arrive (memcached's conn_swallow), e.g. the rest of a too-large value.
	Swallow int
	// Close asks the caller to flush pending replies and close the connection.
	Close bool
	// DropKey, when not nil, is a key whose stored value the caller must delete: memcached removes
	// the old value of a "set" (and of any "ms") refused as too large, so a reader never sees data
	// older than a write that failed. It aliases the input buffer, like Request's slices.
	DropKey []byte
	// Refused is a storage request refused before anything was stored (too large, or no memory for
	// it): its command and key, for the caller's mutation log (memcached logs an item_store with
	// status too_large or no_memory for it). Key aliases the input; nil when the error is not one.
	Refused Refusal
}

// Refusal is a storage request refused before its value was stored (Error.Refused).
type Refusal struct {
	Cmd      Command
	Key      []byte
	NoMemory bool // refused for lack of memory, not for its size
}

// Error describes the protocol error for logs. It allocates; the hot path never calls it.
func (e *Error) Error() string {
	msg := e.Reply
	for len(msg) > 0 && (msg[len(msg)-1] == '\n' || msg[len(msg)-1] == '\r') {
		msg = msg[:len(msg)-1]
	}
	s := "protocol: "
	switch {
	case len(msg) > 0:
		s += string(msg)
	case e.Close:
		s += "connection must be closed"
	default:
		s += "silent error (noreply)"
	}
	if e.Close && len(msg) > 0 {
		s += " (closing)"
	}
	return s
}

// Reply texts of the errors Parse can produce, exactly as memcached 1.6.18 writes them.
var (
	replyError             = ReplyError // encode.go has the replies the server writes too
	replyBadFormat         = ReplyClientErrorBadFormat
	replyBadDataChunk      = ReplyClientErrorBadChunk
	replyTooLarge          = ReplyServerErrorTooLarge
	replyBadDelta          = []byte("CLIENT_ERROR invalid numeric delta argument\r\n")
	replyBadExptime        = []byte("CLIENT_ERROR invalid exptime argument\r\n")
	replyDeleteUsage       = []byte("CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n")
	replyMgFlagsTooLong    = []byte("CLIENT_ERROR options flags are too long\r\n") // mg's wording
	replyMetaFlagsTooLong  = []byte("CLIENT_ERROR options flags too long\r\n")     // ms, md, ma
	ReplyDuplicateFlag     = []byte("CLIENT_ERROR duplicate flag\r\n")
	ReplyInvalidFlag       = []byte("CLIENT_ERROR invalid flag\r\n")
	ReplyBadToken          = []byte("CLIENT_ERROR bad token in command line format\r\n")
	ReplyDecodingKey       = []byte("CLIENT_ERROR error decoding key\r\n")
	ReplyBadMLength        = []byte("CLIENT_ERROR incorrect length for M token\r\n")
	ReplyBadInitial        = []byte("CLIENT_ERROR invalid numeric initial value\r\n")
	ReplyBadDeltaValue     = []byte("CLIENT_ERROR invalid numeric delta value\r\n")
	ReplyOpaqueTooLong     = []byte("CLIENT_ERROR opaque token too long\r\n")
	ReplyInvalidMsModeFlag = []byte("CLIENT_ERROR invalid mode for ms M token\r\n")
)

// Replies to a connection that has not authenticated (-Y; ParseAuth), in memcached's words.
var (
	ReplyUnauthenticated    = []byte("CLIENT_ERROR unauthenticated\r\n")
	ReplyAuthFailure        = []byte("CLIENT_ERROR authentication failure\r\n")
	ReplyBadAuthTokenFormat = []byte("CLIENT_ERROR bad authentication token format\r\n")
	ReplyBadLineTermination = []byte("CLIENT_ERROR bad command line termination\r\n")
)

// Replies of the meta commands that only executing them can produce, in memcached's words.
var (
	ReplyInvalidMaModeFlag           = []byte("CLIENT_ERROR invalid mode for ma M token\r\n")
	ReplyInvalidOrDuplicateFlag      = []byte("CLIENT_ERROR invalid or duplicate flag\r\n") // md and ma say only this
	ReplyServerErrorOOMVivify        = []byte("SERVER_ERROR Out of memory allocating new item\r\n")
	ReplyServerErrorUnhandledStorage = []byte("SERVER_ERROR Unhandled storage type.\r\n")
)

// Preallocated errors. The *Quiet variants are what memcached does when the command line ended in
// "noreply": set_noreply_maybe runs before validation, so the error reply is suppressed (verified
// with 1.6.18: "set k abc 0 5 noreply" answers nothing, then the data line is parsed as a command).
var (
	errUnknown         = &Error{Reply: replyError}
	errUnknownQuiet    = &Error{}
	errHTTP            = &Error{Close: true}
	errBadFormat       = &Error{Reply: replyBadFormat}
	errBadFormatQuiet  = &Error{}
	errBadDataChunk    = &Error{Reply: replyBadDataChunk}
	errBadChunkQuiet   = &Error{}
	errBadDelta        = &Error{Reply: replyBadDelta}
	errBadDeltaQuiet   = &Error{}
	errBadExptime      = &Error{Reply: replyBadExptime}
	errBadExptimeQuiet = &Error{}
	errDeleteUsage     = &Error{Reply: replyDeleteUsage}
	errDeleteQuiet     = &Error{}
	errMgTooLong       = &Error{Reply: replyMgFlagsTooLong}
	errMetaTooLong     = &Error{Reply: replyMetaFlagsTooLong}
	// errLineTooLong closes silently, as memcached does (conn_closing, no reply).
	errLineTooLong = &Error{Close: true}
)

// quiet picks the silent variant of an error when the request asked for noreply.
func quiet(noreply bool, loud, silent *Error) *Error {
	if noreply {
		return silent
	}
	return loud
}
