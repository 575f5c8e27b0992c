package server

import (
	"strconv"

	"github.com/leasecached/leasecached/protocol"
	"github.com/leasecached/leasecached/shard"
)

// replyBadClass is memcached's reply to `lru_crawler` naming a class that does not exist.
var replyBadClass = []byte("BADCLASS invalid class id\r\n")

// maxCrawlerClass is memcached's highest slab class id (MAX_NUMBER_OF_SLAB_CLASSES - 1).
const maxCrawlerClass = 63

// lruCrawler serves the `lru_crawler` sub-commands leasecached has machinery for: `metadump` (every live
// item's metadata in memcached's format: memcached-tool's `dump` and `keys` use it) and `crawl` (reclaim
// expired items now). The crawler's tunables (enable, disable, sleep, tocrawl) belong to memcached's
// crawler thread, which we do not have: they get ERROR like any unknown sub-command.
//
// It reports whether a metadump stopped part-way (conn.yield), to go on from cn.dump.
func (cn *conn) lruCrawler(req *protocol.Request) (suspend bool) {
	if len(req.Args) < 2 {
		cn.out = append(cn.out, protocol.ReplyError...)
		return false
	}
	classes, ok := parseClassList(req.Args[1])
	switch string(req.Args[0]) {
	case "metadump":
		// memcached sometimes refuses a dump pipelined behind other commands ("ERROR cannot pipeline
		// other commands before metadump": after version, set or stats replies, not after get or mn) and
		// sometimes returns an empty one (after two gets): artefacts of its response objects. We always
		// dump, which is what it does for a metadump sent on its own, as memcached-tool sends it.
		if cn.srv.cfg.DisableDump { // -X: before the class list is read, as memcached
			cn.out = append(cn.out, replyMetadumpNotAllowed...)
			return false
		}
		if !ok {
			cn.out = append(cn.out, replyBadClass...)
			return false
		}
		return cn.metadump(classes)
	case "crawl":
		if !ok {
			cn.out = append(cn.out, replyBadClass...)
			return false
		}
		cn.srv.store.ReclaimExpired()
		cn.out = append(cn.out, protocol.ReplyOK...)
	default:
		cn.out = append(cn.out, protocol.ReplyError...)
	}
	return false
}

// classSet is the classes a crawl or dump covers; nil means all.
type classSet *[maxCrawlerClass + 1]bool

// parseClassList reads "all", "hash" or a comma-separated list of class ids 1..63.
func parseClassList(arg []byte) (classSet, bool) {
	if s := string(arg); s == "all" || s == "hash" {
		return nil, true
	}
	set := new([maxCrawlerClass + 1]bool)
	for len(arg) > 0 {
		tok := arg
		if i := indexByte(arg, ','); i >= 0 {
			tok, arg = arg[:i], arg[i+1:]
		} else {
			arg = nil
		}
		id, err := strconv.Atoi(string(tok))
		if err != nil || id < 1 || id > maxCrawlerClass {
			return nil, false
		}
		set[id] = true
	}
	return set, true
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// metadump writes one line per item ("key=<uri-encoded> exp=<unix|-1> la=<unix> cas=<n> fetch=<yes|no>
// cls=<n> size=<n>\n", memcached's format and line ending) and END. A large dump is handed to gnet in
// pieces as it grows (gnet's write never blocks, so doing it inside the store's bounded batches is safe),
// and stops after each piece (conn.yield) to go on from cn.dump: it reports whether it stopped.
func (cn *conn) metadump(classes classSet) bool {
	done := cn.srv.store.AllItemsFrom(&cn.dump, func(it shard.MetadumpItem) bool {
		if classes != nil && (it.Class > maxCrawlerClass || !classes[it.Class]) {
			return true
		}
		cn.out = append(cn.out, "key="...)
		cn.out = appendURIEncoded(cn.out, it.Key)
		cn.out = append(cn.out, " exp="...)
		if it.Exptime == 0 {
			cn.out = append(cn.out, "-1"...)
		} else {
			cn.out = strconv.AppendInt(cn.out, it.Exptime, 10)
		}
		cn.out = append(cn.out, " la="...)
		cn.out = strconv.AppendInt(cn.out, it.LastAccess, 10)
		cn.out = append(cn.out, " cas="...)
		cn.out = strconv.AppendUint(cn.out, it.Cas, 10)
		if it.Fetched {
			cn.out = append(cn.out, " fetch=yes"...)
		} else {
			cn.out = append(cn.out, " fetch=no"...)
		}
		cn.out = append(cn.out, " cls="...)
		cn.out = strconv.AppendInt(cn.out, int64(it.Class), 10)
		cn.out = append(cn.out, " size="...)
		cn.out = strconv.AppendInt(cn.out, int64(it.Size), 10)
		cn.out = append(cn.out, '\n')
		return !cn.yield(true) && !cn.closed // a failed write closed the connection: stop dumping
	})
	if !done && !cn.closed {
		return true
	}
	cn.dump = shard.DumpCursor{}
	cn.out = append(cn.out, protocol.ReplyEnd...)
	return false
}

// appendURIEncoded writes key as memcached's uriencode does: unreserved characters (RFC 3986) as they
// are, every other byte as %XX in upper case.
func appendURIEncoded(dst, key []byte) []byte {
	const hex = "0123456789ABCDEF"
	for _, c := range key {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '.', c == '_', c == '~':
			dst = append(dst, c)
		default:
			dst = append(dst, '%', hex[c>>4], hex[c&15])
		}
	}
	return dst
}
