package shard

// Mode selects a store command's semantics.
type Mode uint8

const (
	ModeSet     Mode = iota // store unconditionally
	ModeAdd                 // only if the key is absent
	ModeReplace             // only if the key is present
	ModeAppend              // add data after the existing value (keeps flags and exptime)
	ModePrepend             // add data before the existing value (keeps flags and exptime)
	ModeCas                 // only if the key's CAS unique equals the given one
)

var modeNames = [...]string{"set", "add", "replace", "append", "prepend", "cas"}

func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return "mode?"
}

// Result is an operation's outcome, named after memcached's replies.
type Result uint8

const (
	Stored     Result = iota + 1 // STORED (and a successful incr/decr)
	NotStored                    // NOT_STORED
	Exists                       // EXISTS: CAS mismatch
	NotFound                     // NOT_FOUND
	Deleted                      // DELETED
	Touched                      // TOUCHED
	TooLarge                     // SERVER_ERROR object too large for cache
	NoMemory                     // SERVER_ERROR out of memory storing object
	NonNumeric                   // CLIENT_ERROR cannot increment or decrement non-numeric value
)

var resultNames = [...]string{"", "STORED", "NOT_STORED", "EXISTS", "NOT_FOUND", "DELETED", "TOUCHED",
	"TOO_LARGE", "NO_MEMORY", "NON_NUMERIC"}

func (r Result) String() string {
	if r > 0 && int(r) < len(resultNames) {
		return resultNames[r]
	}
	return "RESULT?"
}
