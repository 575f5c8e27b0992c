// Package rawconn lets clientlib's own subpackages open a connection to a server the way the client
// opens its own: through Config.DialContext if set, with Config.TLS's handshake done and
// Config.Username's authentication accepted. It is internal so that the core package's exported
// surface does not grow (issue 29, point 0): only packages under clientlib/ can import it.
//
// The near-cache (clientlib/near) needs it for its watch streams, which are connections of their own
// outside the client's pool: against a TLS or -Y server they must carry the same settings the
// client's requests do, without the service configuring them twice. See doc/design/near-cache.md.
package rawconn

import (
	"context"
	"net"
)

// Dial connects to addr with c's settings, within ctx and c's DialTimeout; c must be a
// *clientlib.Client. The connection is the caller's: the client neither pools nor closes it. Package
// clientlib sets Dial when it is initialised.
var Dial func(c any, ctx context.Context, addr string) (net.Conn, error)
