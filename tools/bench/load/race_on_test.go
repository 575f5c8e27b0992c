//go:build race

package load

// raceEnabled: under the race detector sync.Pool drops a share of what it is given, so crypto/tls's record
// buffers are allocated anew now and then and allocation counts over TLS mean nothing.
const raceEnabled = true
