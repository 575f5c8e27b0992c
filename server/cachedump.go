package server

import (
	"strconv"

	"github.com/leasecached/leasecached/protocol"
	"github.com/leasecached/leasecached/shard"
)

// `stats cachedump <class> <limit>`: memcached's item listing of one slab class, "ITEM <key> [<bytes> b;
// <exptime> s]" lines then END. Which items are listed is the store's model of memcached's COLD segment
// (shard/dump.go explains it); the checks, classes and limits here are memcached 1.6.18's
// (process_stats, item_cachedump).
const (
	// cachedumpMaxBytes is item_cachedump's response cap: lines stop before END would pass it.
	cachedumpMaxBytes = 2 << 20
	// cachedumpTrailer is what item_cachedump reserves after the last line: "END\r\n" and its NUL.
	cachedumpTrailer = 6
	// maxSlabClasses is memcached's MAX_NUMBER_OF_SLAB_CLASSES: class ids from it on are illegal; ids
	// below it that have no class (0, and ours past the last) list nothing.
	maxSlabClasses = 64
	// cachedumpMinArgs is "cachedump <class> <limit>" after "stats".
	cachedumpMinArgs = 3
)

var (
	replyBadCommandLine = []byte("CLIENT_ERROR bad command line\r\n")
	replyIllegalSlabID  = []byte("CLIENT_ERROR Illegal slab id\r\n")
)

func (cn *conn) cachedump(req *protocol.Request) {
	if len(req.Args) < cachedumpMinArgs {
		cn.out = append(cn.out, replyBadCommandLine...)
		return
	}
	id, okID := protocol.SafeStrtoul(req.Args[1])
	limit, okLimit := protocol.SafeStrtoul(req.Args[2])
	switch {
	case !okID || !okLimit:
		cn.out = append(cn.out, protocol.ReplyClientErrorBadFormat...)
		return
	case id >= maxSlabClasses:
		cn.out = append(cn.out, replyIllegalSlabID...)
		return
	}
	if id > 0 {
		cn.out = appendCachedump(cn.out, cn.srv.store, int(id)-1, limit)
	}
	cn.out = append(cn.out, protocol.ReplyEnd...)
}

// appendCachedump appends the ITEM lines of class index id (0-based): at most limit of them (0: no
// limit), and none that would take the response past cachedumpMaxBytes.
func appendCachedump(dst []byte, store *shard.Store, id int, limit uint32) []byte {
	start, shown := len(dst), uint32(0)
	store.ColdItems(id, func(it shard.DumpItem) bool {
		if limit != 0 && shown >= limit {
			return false
		}
		end := len(dst)
		dst = append(dst, "ITEM "...)
		dst = append(dst, it.Key...)
		dst = append(dst, " ["...)
		dst = strconv.AppendInt(dst, int64(it.Bytes), 10)
		dst = append(dst, " b; "...)
		dst = strconv.AppendInt(dst, it.Exptime, 10)
		dst = append(dst, " s]\r\n"...)
		if len(dst)-start+cachedumpTrailer > cachedumpMaxBytes {
			dst = dst[:end]
			return false
		}
		shown++
		return true
	})
	return dst
}
