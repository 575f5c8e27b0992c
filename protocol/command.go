package protocol

// Command identifies the request kind. The zero value, CmdNone, never comes out of a successful
// Parse.
type Command uint8

// Commands, in the order of the public contract; do not reorder (the server may index tables).
const (
	CmdNone Command = iota
	CmdGet
	CmdGets
	CmdGat
	CmdGats
	CmdSet
	CmdAdd
	CmdReplace
	CmdAppend
	CmdPrepend
	CmdCas
	CmdIncr
	CmdDecr
	CmdTouch
	CmdDelete
	CmdFlushAll
	CmdVersion
	CmdVerbosity
	CmdStats
	CmdQuit
	CmdShutdown
	CmdLeaseGet
	CmdLeaseSet
	CmdMetaGet
	CmdMetaSet
	CmdMetaDelete
	CmdMetaArithmetic
	CmdMetaNoop
	CmdMetaDebug
	CmdCacheMemlimit
	CmdLruCrawler
	CmdRefreshCerts
	CmdWatch

	numCommands // sentinel: keep last
)

// commandNames are the wire names; String returns them so logs read like the protocol.
var commandNames = [numCommands]string{
	CmdNone:           "none",
	CmdGet:            "get",
	CmdGets:           "gets",
	CmdGat:            "gat",
	CmdGats:           "gats",
	CmdSet:            "set",
	CmdAdd:            "add",
	CmdReplace:        "replace",
	CmdAppend:         "append",
	CmdPrepend:        "prepend",
	CmdCas:            "cas",
	CmdIncr:           "incr",
	CmdDecr:           "decr",
	CmdTouch:          "touch",
	CmdDelete:         "delete",
	CmdFlushAll:       "flush_all",
	CmdVersion:        "version",
	CmdVerbosity:      "verbosity",
	CmdStats:          "stats",
	CmdQuit:           "quit",
	CmdShutdown:       "shutdown",
	CmdLeaseGet:       "lease-get",
	CmdLeaseSet:       "lease-set",
	CmdMetaGet:        "mg",
	CmdMetaSet:        "ms",
	CmdMetaDelete:     "md",
	CmdMetaArithmetic: "ma",
	CmdMetaNoop:       "mn",
	CmdMetaDebug:      "me",
	CmdCacheMemlimit:  "cache_memlimit",
	CmdLruCrawler:     "lru_crawler",
	CmdRefreshCerts:   "refresh_certs",
	CmdWatch:          "watch",
}

// String returns the command's wire name ("get", "lease-set", "mg", ...).
func (c Command) String() string {
	if c < numCommands {
		return commandNames[c]
	}
	return "unknown"
}

// IsStorage reports whether the command carries a data block (set family, cas, lease-set, ms).
func (c Command) IsStorage() bool {
	switch c {
	case CmdSet, CmdAdd, CmdReplace, CmdAppend, CmdPrepend, CmdCas, CmdLeaseSet, CmdMetaSet:
		return true
	}
	return false
}

// IsMeta reports whether the command is one of memcached's meta commands (mg, ms, md, ma, mn, me).
func (c Command) IsMeta() bool {
	return c >= CmdMetaGet && c <= CmdMetaDebug
}
