package clientlib

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error the client returns either is one of these (compare with errors.Is), a
// context error, or wraps a network error with the server address and operation.
var (
	// ErrCacheMiss: the key is not in the cache (get, gat, touch, delete, incr/decr, mg/md/ma miss).
	ErrCacheMiss = errors.New("clientlib: cache miss")
	// ErrNotStored: a conditional write was refused (add on an existing key, replace/append/prepend on a
	// missing one, lease-set with a token that is not the key's current lease).
	ErrNotStored = errors.New("clientlib: item not stored")
	// ErrCASConflict: a compare-and-swap lost: the item changed since its CAS value was read.
	ErrCASConflict = errors.New("clientlib: compare-and-swap conflict")
	// ErrMalformedKey: the key is empty, longer than MaxKeyLength, or holds spaces or control bytes.
	// It is detected before any I/O.
	ErrMalformedKey = errors.New("clientlib: malformed key")
	// ErrNoServers: the client has no server to send the key to (none configured, or all ejected).
	ErrNoServers = errors.New("clientlib: no servers available")
	// ErrServerError matches every *ServerError (errors.Is(err, ErrServerError)).
	ErrServerError = errors.New("clientlib: server error")
	// ErrClientError matches a CLIENT_ERROR or ERROR reply: the server judged the request malformed.
	ErrClientError = errors.New("clientlib: server rejected request")
	// ErrProtocol: the server's reply did not follow the protocol; the connection was discarded.
	ErrProtocol = errors.New("clientlib: protocol error")
	// ErrClosed: the Client was closed.
	ErrClosed = errors.New("clientlib: client closed")
	// ErrValueTooLarge: the value exceeds Config.MaxValueSize; nothing was sent.
	ErrValueTooLarge = errors.New("clientlib: value too large")
	// ErrLeaseWaitExhausted: GetOrFill waited MaxWait for another process's fill and the fallback mode
	// is FallbackError.
	ErrLeaseWaitExhausted = errors.New("clientlib: gave up waiting for another process to fill the key")
)

// ServerError is a SERVER_ERROR (or CLIENT_ERROR / ERROR) reply. The request was complete and the
// connection stays usable.
type ServerError struct {
	Addr string // server that replied
	Line string // the reply line without CRLF, e.g. "SERVER_ERROR out of memory storing object"
	kind error  // ErrServerError or ErrClientError
}

func (e *ServerError) Error() string { return fmt.Sprintf("clientlib: %s replied %q", e.Addr, e.Line) }

// Is makes errors.Is(err, ErrServerError) (or ErrClientError) true for the matching kind of reply.
func (e *ServerError) Is(target error) bool { return target == e.kind }

// connError is an I/O or framing failure: the connection is no longer trustworthy and is closed, and
// (unless the caller's context caused it) it counts against the server's health.
type connError struct {
	addr string
	op   string
	err  error
}

func (e *connError) Error() string { return fmt.Sprintf("clientlib: %s %s: %v", e.op, e.addr, e.err) }
func (e *connError) Unwrap() error { return e.err }

// Outcomes of a pipelined request that concern its connection, not the server's health (conn.send).
var (
	// errAbandoned: the caller's context ended before its reply began; the drainer reads the reply.
	errAbandoned = errors.New("request abandoned by its caller")
	// errPipelineBroken: an earlier request on the connection failed before this one's reply was read;
	// the request may or may not have been carried out.
	errPipelineBroken = errors.New("connection broken by an earlier request's failure")
)

// resumable reports whether err leaves the connection in a known state (a complete, recognised reply).
// The conn layer returns *connError unwrapped, so a type assertion suffices (and, unlike errors.As,
// costs no allocation on the hot path).
func resumable(err error) bool {
	_, broken := err.(*connError)
	return !broken
}
