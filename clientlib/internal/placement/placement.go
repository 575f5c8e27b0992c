// Package placement lets clientlib's own subpackages ask where a client places a key over its
// configured servers, ejected ones included. It is internal so that the core package's exported
// surface does not grow (issue 29, point 0): only packages under clientlib/ can import it.
//
// Why not Client.ServerFor: it answers over the live servers, and which servers are live differs from
// process to process (each ejects on its own failures). Key splitting (clientlib/split) names a hot
// key's copies so that they land on distinct servers, and every process must derive the same names;
// that needs a placement that depends on the configured list alone. See doc/design/key-splitting.md.
package placement

// Ring places keys over one server list. A client returns the same Ring until its server list
// changes (New, SetServers), so a caller may cache what it derived from one and compare Rings to know
// when to derive again.
type Ring interface {
	// Addr returns the address of the configured server key belongs to.
	Addr(key string) string
	// Servers returns how many servers the list has.
	Servers() int
}

// Of returns c's Ring; c must be a *clientlib.Client. Package clientlib sets it when it is initialised.
var Of func(c any) Ring
