// Package clientlib is the Go client for leasecached and any memcached 1.6 server.
//
// The contract, in brief:
//
//   - Every call takes a context.Context. Its deadline bounds the call (waiting for a connection,
//     dialing, waiting for its reply) and cancelling it returns at once. Concurrent requests to a server
//     share a few connections (Config.MaxOpenPerAddr, 4), written back to back with replies read in
//     order; a reply its caller no longer waits for is read and dropped in the background, so the
//     connection stays in step and no caller ever gets another's reply. A reply that has begun to arrive
//     is read to its end (within Config.Timeout) even if its caller's context ends meanwhile.
//     doc/design/client-pipelining.md has the details.
//   - Errors are typed: ErrCacheMiss, ErrNotStored, ErrCASConflict, ErrMalformedKey, *ServerError
//     (errors.Is(err, ErrServerError)), ErrNoServers, ... Context errors come back as the context's own
//     error, so errors.Is(err, context.DeadlineExceeded) works.
//   - Keys are spread over servers by consistent hashing (ketama, placement compatible with
//     libmemcached and twemproxy) or by gomemcache's crc32-modulo ServerList rule, for drop-in
//     migrations: NewFromAddrs, the counterpart of gomemcache's memcache.New, uses the latter. A server is ejected after FailureLimit consecutive failures (2 by default): network
//     errors, and requests it leaves unanswered for Config.Timeout (1 s), whether or not their callers
//     waited that long, so a hung server is out of the ring about a second after it stopped. It is put
//     back once it answers a probe again; callers whose keys live on other servers are never held up by it.
//   - GetOrFill is the heart: one fill per key per expiry across a whole fleet of processes,
//     single-flight inside a process and, across processes, the best the key's server offers, learned
//     once per server: leasecached's leases (lease-get / lease-set), memcached 1.6's meta commands
//     (mg N, ms C), or behind twemproxy the classic commands (then per process only). A fill that fails
//     gives the key back at once. Optionally (FillOptions.EarlyRefresh) a hot key is refreshed before it
//     expires by one reader in the fleet, in the background, so that its readers never miss.
//     GetMultiOrFill does the same for many keys: one request per server and one call of a batch fill.
//     See doc/leases.md, "A client's side".
//   - Stats returns counters a service can export (fills, coalesced callers, hot-miss waits, stale
//     values served, rejected lease-sets, fallbacks, per-server errors) without any metrics dependency,
//     and Config.Observe sees every request and fill (for histograms and tracing spans).
//   - Typed values (a Cache[T] with JSON or gob codecs and compression) live in the subpackage
//     clientlib/typed; a near-cache for hot keys, invalidated by the servers' watch streams, in
//     clientlib/near; key splitting (a hot key's reads spread over copies on distinct servers) in
//     clientlib/split.
//   - Servers are "host:port" addresses or Unix socket paths, over TLS (Config.TLS, or a Config.DialContext
//     of one's own) and with -Y authentication (Config.Username) when asked; SetServers changes the list
//     while the client is in use, and Ping checks that each server answers.
//
// A Client is safe for concurrent use and should be shared: it owns the connection pools.
package clientlib
