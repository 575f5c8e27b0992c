// Package protocol parses memcached text-protocol requests and encodes replies.
//
// It does no I/O and touches no storage: Parser.Parse looks at the front of a byte buffer (the
// connection's inbound bytes) and either fills a Request, asks for more bytes, or returns an *Error
// that tells the caller exactly what memcached 1.6.18 would answer, how many bytes to drop and
// whether to close the connection. The Append* functions build replies into a caller-owned buffer.
//
// Contract highlights:
//   - Behaviour mirrors memcached 1.6.18's proto_text.c, verified against the real binary; where we
//     deliberately differ (over-long lines, see MaxLineLength) the reason is documented at the
//     constant.
//   - Parsing is split-invariant: feeding the same bytes in any chunking yields the same sequence of
//     requests and errors, provided the caller honours Error.Swallow.
//   - Steady-state parsing and encoding allocate nothing: Request and Parser carry reusable scratch,
//     and every []byte in a Request aliases the input buffer.
//   - The common requests (one-key get, gets and lease-get, plain set) take a hot path that reads them
//     straight off the buffer (parse_hot.go); it hands anything unusual to the general path and only
//     ever agrees with it (FuzzParseHot).
//   - Leases (lease-get, lease-set) are parsed with the same rules as memcached's get and set; the
//     wire contract is doc/leases.md.
package protocol
