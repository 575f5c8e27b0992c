// Package near is an optional in-process near-cache for hot keys over a clientlib.Client. The core
// package knows nothing of it: a service that wants one imports this package and wraps its client.
//
// A key is copied into the near-cache only while it is hot (read HotReads times within HotWindow by
// this process, or listed by a server's "stats hotkeys"), for at most TTL, within MaxEntries and
// MaxBytes. Each server that holds a near copy is watched on a dedicated connection with
// "watch mutations deletions": every item_store, deleted and flush_all line drops the copies it
// concerns, a skipped= notice or a lost stream drops every copy from that server. A server that
// refuses "deletions" (memcached before 1.6.20) is watched with "watch mutations" alone, so its
// deletes and flush_all reach near copies only through TTL; one that refuses watch altogether is
// TTL-only. Watch connections are dialled as the client dials (its TLS and -Y credentials included),
// and follow the client's server list (SetServers). doc/design/near-cache.md has the guarantees and
// measurements.
package near
