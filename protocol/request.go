package protocol

// Request is one parsed request. The caller reuses it across Parse calls so its slices keep their
// capacity and steady-state parsing allocates nothing.
//
// Every []byte in it (Keys, Data, Args) aliases the buffer passed to Parse and is valid only until
// the caller discards or overwrites those bytes: copy anything that must outlive the request.
type Request struct {
	Cmd Command
	// Keys: get/gets/gat/gats/lease-get carry all their keys (gat/gats may carry none, as in
	// memcached); every other keyed command carries exactly one, Keys[0]. Meta keys are the raw
	// token as sent (base64 is not decoded here).
	Keys [][]byte
	// Flags are the client flags of storage commands (32-bit, like memcached).
	Flags uint32
	// Exptime is the expiry of storage commands, touch and gat/gats, and flush_all's delay (0 when
	// absent). It is the value memcached would use: parsed as a C long and truncated to 32 bits.
	Exptime int64
	// Bytes is the declared data length of storage commands and ms.
	Bytes int
	// Cas is the unique of cas and the lease token of lease-set.
	Cas uint64
	// Delta is the incr/decr amount; for verbosity it holds the parsed level.
	Delta uint64
	// Noreply is set when memcached would suppress the reply (classic commands' trailing
	// "noreply"). Meta commands express quiet mode as the 'q' flag in Args instead.
	Noreply bool
	// Data is the data block of storage commands and ms, without its trailing "\r\n".
	Data []byte
	// Args are the raw remaining tokens: stats sub-command tokens, verbosity tokens, shutdown and
	// version arguments, meta flag tokens (e.g. "v", "t", "N30", "Oabc", "q").
	Args [][]byte
	// Meta is the preparse of mg, ms, md and ma (set only for them): the key as stored (base64-decoded
	// with b, into a buffer the Request owns), typed flag values and the ordered exptime operations.
	// MetaErr is the reply its flags get, in the command's words, or nil. ms is refused by Parse instead.
	Meta    MetaFlags
	MetaErr []byte
	metaKey []byte
}

// Key returns Keys[0], or nil when the request has no key.
func (r *Request) Key() []byte {
	if len(r.Keys) == 0 {
		return nil
	}
	return r.Keys[0]
}

// reset clears the request for a new parse, keeping slice capacity.
func (r *Request) reset(cmd Command) {
	// Field by field: a whole-struct assignment compiled to a zeroing of the struct plus write-barrier
	// checked copies of every slice header, measurably slower on the per-request path.
	r.Cmd = cmd
	r.Keys = r.Keys[:0]
	r.Flags, r.Exptime, r.Bytes, r.Cas, r.Delta, r.Noreply = 0, 0, 0, 0, 0, false
	r.Data = nil
	r.Args = r.Args[:0]
}
