package protocol

// cmdKind groups commands that share a parsing routine.
type cmdKind uint8

const (
	kindUnknown   cmdKind = iota
	kindFetch             // get, gets, bget, gat, gats, lease-get
	kindStorage           // set, add, replace, append, prepend, cas, lease-set
	kindMetaSet           // ms
	kindArith             // incr, decr
	kindTouch             // touch
	kindDelete            // delete
	kindFlushAll          // flush_all
	kindVerbosity         // verbosity
	kindFreeArgs          // version, stats, quit, shutdown, mn, refresh_certs, watch: any arguments, kept in Args
	kindMeta              // mg, md, ma, me
	kindMemlimit          // cache_memlimit
)

// lookupCommand maps a command token (case-sensitive, as memcached) to its Command and parsing
// kind. A switch on the string conversion compiles to comparisons without allocating.
func lookupCommand(name []byte) (Command, cmdKind) {
	switch string(name) {
	case "get":
		return CmdGet, kindFetch
	case "bget": // memcached's undocumented legacy alias of get
		return CmdGet, kindFetch
	case "gets":
		return CmdGets, kindFetch
	case "gat":
		return CmdGat, kindFetch
	case "gats":
		return CmdGats, kindFetch
	case "lease-get":
		return CmdLeaseGet, kindFetch
	case "set":
		return CmdSet, kindStorage
	case "add":
		return CmdAdd, kindStorage
	case "replace":
		return CmdReplace, kindStorage
	case "append":
		return CmdAppend, kindStorage
	case "prepend":
		return CmdPrepend, kindStorage
	case "cas":
		return CmdCas, kindStorage
	case "lease-set":
		return CmdLeaseSet, kindStorage
	case "incr":
		return CmdIncr, kindArith
	case "decr":
		return CmdDecr, kindArith
	case "touch":
		return CmdTouch, kindTouch
	case "delete":
		return CmdDelete, kindDelete
	case "flush_all":
		return CmdFlushAll, kindFlushAll
	case "version":
		return CmdVersion, kindFreeArgs
	case "verbosity":
		return CmdVerbosity, kindVerbosity
	case "stats":
		return CmdStats, kindFreeArgs
	case "quit":
		return CmdQuit, kindFreeArgs
	case "shutdown":
		return CmdShutdown, kindFreeArgs
	case "mn":
		return CmdMetaNoop, kindFreeArgs
	case "refresh_certs": // memcached's, in a build with TLS (Debian's): answers even without -Z
		return CmdRefreshCerts, kindFreeArgs
	case "mg":
		return CmdMetaGet, kindMeta
	case "ms":
		return CmdMetaSet, kindMetaSet
	case "md":
		return CmdMetaDelete, kindMeta
	case "ma":
		return CmdMetaArithmetic, kindMeta
	case "me":
		return CmdMetaDebug, kindMeta
	case "cache_memlimit":
		return CmdCacheMemlimit, kindMemlimit
	case "lru_crawler":
		return CmdLruCrawler, kindFreeArgs
	case "watch":
		return CmdWatch, kindFreeArgs
	}
	return CmdNone, kindUnknown
}
