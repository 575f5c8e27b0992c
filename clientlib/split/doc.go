// Package split is optional key splitting ("sharded replicas") over a clientlib.Client: a key too hot
// for one server is kept as N copies on N distinct servers, reads spread over the copies, and writes
// and deletes through this package reach every copy. The core package knows nothing of it: a service
// that wants it imports this package and wraps its client.
//
// The contract, in brief (doc/design/key-splitting.md has the reasons and the measurements):
//
//   - Which keys: Config.Keys always; with Config.HotKeysPoll, also the keys the servers list in
//     "stats hotkeys" at Config.HotShare percent of a server's requests or more, until a poll no longer
//     lists them.
//   - Copy 0 is the key itself, where the client places it, so a process that does not split the key
//     still reads and writes the right value. Copy j (1..N-1) is named "<key>#split<c>" for the
//     smallest c whose server, over the client's configured list (ejected servers included), no earlier
//     copy has: every process with the same server list derives the same names. There are at most as
//     many copies as servers.
//   - Get and GetOrFill read one copy picked at random. A replica that misses (or fails) is filled from
//     copy 0: Get falls back to reading it and adds it back to the replica for ReplicaTTL (2 s by
//     default); GetOrFill fills the replica under the replica's own lease with a fill that is GetOrFill
//     of copy 0, so the source is called once per expiry of copy 0 in the whole fleet, as for a key not
//     split.
//   - Set, Delete and Touch go to every copy, copy 0 first. A copy that fails keeps what it held: its
//     readers (1/N of the key's reads) may see the previous value until that copy's TTL ends or a later
//     write reaches it; the error names each copy that failed.
//   - CompareAndSwap, Increment and Decrement of a split key are refused (ErrSplitKey): N copies cannot
//     be changed atomically. Other writes of a split key through the core client reach copy 0 only.
//   - Replicas of hot-listed keys live at most Config.ReplicaTTL (2 s unless set), which bounds how long
//     a write by a process that does not split the key leaves them stale; so do the replicas Get adds.
package split
