// leasecached patch: serving the connections that became readable in one poll together. See LEASECACHED.md
// and reactor_batch.go.

//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package gnet

// TrafficBatchHandler is an EventHandler that can serve several connections' new data in one call. When
// the engine's handler implements it, edge-triggered I/O is off and the system is Linux (batchReads), an
// event loop first reads every connection that one poll reported readable, then hands them all to
// OnTrafficBatch, instead of reading and serving them one by one. A server that looks up each request's
// data in memory much larger than the CPU caches can then start loading all of it before it waits for any
// of it.
//
// OnTrafficBatch must set actions[i] to what OnTraffic would return for conns[i]; both slices have the
// same length, and actions is all None on entry. Each connection's new data is its whole input (nothing
// is left over from an earlier read), and what the handler does not consume is kept for the next read, as
// after OnTraffic. The slices and the connections' data are valid only during the call.
type TrafficBatchHandler interface {
	OnTrafficBatch(conns []Conn, actions []Action)
}

// readBatchSpare is how much of the loop's read buffer must still be free for a connection to join the
// batch; with less, the batch is served first. A connection that has more to say than it was given room
// for is read again in the next round (reads are level-triggered).
const readBatchSpare = 16 << 10

// readBatch is the connections read so far in this round, with their data in the loop's read buffer.
type readBatch struct {
	handler TrafficBatchHandler
	conns   []Conn // each a *conn
	actions []Action
	used    int // bytes of el.buffer the batch's data takes
}
