package protocol

// Limits. Each mirrors a memcached 1.6.18 constant unless stated otherwise.
const (
	// KeyMaxLength is memcached's KEY_MAX_LENGTH: longer keys get
	// "CLIENT_ERROR bad command line format".
	KeyMaxLength = 250

	// MaxLineLength is how many bytes of a request line (excluding the "\n") memcached tolerates
	// without a newline before closing the connection (try_read_command_ascii: rbytes > 2048).
	//
	// Deliberate deviation: memcached only checks while the newline has not arrived yet, so a longer
	// line that happens to land in one read() is accepted. That makes its behaviour depend on TCP
	// segmentation; we instead reject every such line (complete or not) so parsing is
	// split-invariant. Multi-key fetch lines are exempt (see MaxMultiKeyLineLength).
	MaxLineLength = 2048

	// MaxMultiKeyLineLength bounds lines of the multi-key fetch commands (get, gets, gat, gats,
	// bget, lease-get). memcached exempts get/gets lines from MaxLineLength and grows its buffer
	// without bound; we exempt all multi-key fetches (memcached closes split gat lines over 2 KB,
	// which we consider a bug) but cap them so one connection cannot pin unbounded memory.
	MaxMultiKeyLineLength = 2 << 20

	// maxLeadingSpaces is how many leading spaces memcached skips when deciding whether a long,
	// unterminated line is a multi-get ("ptr - c->rcurr > 100").
	maxLeadingSpaces = 100

	// DefaultMaxItemSize is memcached's default -I (item_size_max), used when Parser.MaxItemSize
	// is zero.
	DefaultMaxItemSize = 1 << 20

	// itemHeaderSize is sizeof(item) on 64-bit memcached 1.6 (48) plus the 8-byte CAS it stores
	// when CAS is enabled (the default). memcached refuses a value when
	// itemHeaderSize + nkey + 1 + nsuffix + bytes + 2 > item_size_max, where nsuffix is 4 when
	// the client flags are non-zero and 0 otherwise. Verified against the 1.6.18 binary with -I 1m:
	// key "k", flags 0: 1048516 bytes stored, 1048517 too large; flags 1: 1048512 / 1048513.
	itemHeaderSize = 48 + 8

	// flagsSuffixSize is the space memcached reserves for non-zero client flags.
	flagsSuffixSize = 4

	// maxValueLength is the largest <bytes> memcached accepts before "bad command line format"
	// (vlen > INT_MAX - 2 check in process_update_command / process_mset_command).
	maxValueLength = 1<<31 - 1 - 2

	// ReadBufferSize is memcached's READ_BUFFER_SIZE, its read buffer for a request's line or binary
	// header, extras and key. It bounds what a connection that has not authenticated can send
	// (ParseAuth): its line must end within it, and its data block fit in it. A binary request whose
	// header, extras and key are longer closes the connection once this much of it has arrived
	// (memcached's read of 0 bytes into a full buffer reads as the client's close).
	ReadBufferSize = 16384

	// metaMaxTokens is MFLAG_MAX_OPT_LENGTH: a meta command line whose token count plus
	// memcached's terminal token exceeds it is refused ("options flags (are) too long").
	metaMaxTokens = 20

	// metaMaxOpaqueLength is MFLAG_MAX_OPAQUE_LENGTH: longest O(paque) flag token, including 'O'.
	metaMaxOpaqueLength = 32
)
