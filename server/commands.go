package server

import (
	"log/slog"
	"strconv"

	"github.com/leasecached/leasecached/protocol"
	"github.com/leasecached/leasecached/shard"
	"github.com/leasecached/leasecached/watch"
)

type outcome uint8

const (
	keepOpen outcome = iota
	closeConn
	// suspended: a multi-key fetch stopped part-way because its connection is over its reply bound
	// (conn.yield); the request stays unconsumed and resumes at conn.resume once the client has read.
	suspended
)

// Fixed replies that have no home in protocol/ because they are this server's policy, in memcached's words.
var (
	replyVersion        = []byte("VERSION " + ProtocolVersion + "\r\n")
	replyInternalResult = []byte("SERVER_ERROR unexpected storage result\r\n")
)

// storeModes maps each storage command to the store's mode; a table keeps execute() free of a second switch.
var storeModes = [...]shard.Mode{
	protocol.CmdSet:     shard.ModeSet,
	protocol.CmdAdd:     shard.ModeAdd,
	protocol.CmdReplace: shard.ModeReplace,
	protocol.CmdAppend:  shard.ModeAppend,
	protocol.CmdPrepend: shard.ModePrepend,
	protocol.CmdCas:     shard.ModeCas,
}

// execute runs one parsed request and appends its reply (unless noreply) to cn.out.
func (cn *conn) execute(req *protocol.Request) outcome {
	if cn.again { // executed before and suspended (suspend): traced, counted and logged then
		cn.again = false
	} else {
		if cn.srv.tracing.Load() { // -vvv (logger.go)
			cn.traceCommand(slog.String("cmd", req.Cmd.String()), req.Key(), len(req.Keys))
		}
		if cn.loop.hot.Due(len(req.Keys)) { // hot-key detection: rarely taken (hotkeys.go)
			cn.sampleText(req)
		}
		if cn.srv.watch.On(watch.Fetchers) {
			cn.watchLookups(req)
		}
	}
	switch req.Cmd {
	case protocol.CmdGet, protocol.CmdGets, protocol.CmdGat, protocol.CmdGats:
		if cn.retrieve(req) {
			return cn.suspend()
		}
	case protocol.CmdSet, protocol.CmdAdd, protocol.CmdReplace, protocol.CmdAppend, protocol.CmdPrepend, protocol.CmdCas:
		cn.storeCmd(req)
	case protocol.CmdIncr, protocol.CmdDecr:
		cn.arith(req)
	case protocol.CmdTouch:
		cn.local[statCmdTouch]++
		res := cn.srv.store.Touch(req.Key(), req.Exptime)
		cn.countHit(res == shard.Touched, statTouchHits, statTouchMisses)
		cn.reply(req, resultReply(res))
	case protocol.CmdDelete:
		cn.srv.detail.record(req.Key(), prefixDel, false)
		lk := cn.peekDeleted(req.Key())
		res := cn.srv.store.Delete(req.Key())
		if res == shard.Deleted && cn.srv.watch.On(watch.Deletions) {
			cn.logDeleted("delete", req.Key(), lk)
		}
		cn.countHit(res == shard.Deleted, statDeleteHits, statDeleteMisses)
		cn.reply(req, resultReply(res))
	case protocol.CmdFlushAll:
		cn.local[statCmdFlush]++ // counted even when -F refuses it, as memcached does
		if cn.srv.cfg.DisableFlush {
			cn.reply(req, replyFlushNotAllowed)
			break
		}
		cn.srv.store.FlushAll(req.Exptime)
		if cn.srv.watch.On(watch.Deletions) {
			cn.logFlush(req.Exptime)
		}
		cn.reply(req, protocol.ReplyOK)
	case protocol.CmdVersion:
		cn.out = append(cn.out, replyVersion...)
	case protocol.CmdVerbosity:
		if len(req.Args) > 0 {
			if v, err := strconv.Atoi(string(req.Args[0])); err == nil {
				cn.srv.setVerbosity(v)
			}
		}
		cn.reply(req, protocol.ReplyOK)
	case protocol.CmdStats:
		cn.statsCmd(req)
	case protocol.CmdQuit:
		return closeConn
	case protocol.CmdShutdown:
		return cn.shutdown(req)
	case protocol.CmdMetaNoop:
		cn.out = append(cn.out, protocol.ReplyMN...)
		cn.sentMark = len(cn.out)
	case protocol.CmdMetaGet:
		cn.metaGet(req)
	case protocol.CmdMetaSet:
		cn.metaSet(req)
	case protocol.CmdMetaDelete:
		cn.metaDelete(req)
	case protocol.CmdMetaArithmetic:
		cn.metaArith(req)
	case protocol.CmdMetaDebug:
		cn.metaDebug(req)
	case protocol.CmdLruCrawler:
		if cn.lruCrawler(req) {
			return cn.suspend()
		}
	case protocol.CmdLeaseGet:
		if cn.leaseGet(req) {
			return cn.suspend()
		}
	case protocol.CmdLeaseSet:
		cn.leaseSet(req)
	case protocol.CmdCacheMemlimit:
		cn.memlimit(req)
	case protocol.CmdRefreshCerts:
		cn.refreshCerts(req)
	case protocol.CmdWatch:
		return cn.startWatch(req)
	default:
		cn.out = append(cn.out, protocol.ReplyError...)
	}
	return keepOpen
}

// reply appends msg unless the client asked for noreply.
func (cn *conn) reply(req *protocol.Request, msg []byte) {
	if !req.Noreply {
		cn.out = append(cn.out, msg...)
	}
}

func (cn *conn) countHit(hit bool, hitStat, missStat statID) {
	if hit {
		cn.local[hitStat]++
	} else {
		cn.local[missStat]++
	}
}

// suspend ends an execution of a request that stopped part-way (a yield, a parked read): it stays in the
// input and is executed again, and that execution neither traces it, nor counts its keys for hot-key
// detection, nor logs its lookups (watch.md) again.
func (cn *conn) suspend() outcome {
	cn.again = true
	return suspended
}

// retrieve serves get, gets, gat and gats: one VALUE block per hit, misses silent, one END. It reports
// whether it stopped part-way (yield), to go on from key cn.resume.
func (cn *conn) retrieve(req *protocol.Request) bool {
	touch := req.Cmd == protocol.CmdGat || req.Cmd == protocol.CmdGats
	withCas := req.Cmd == protocol.CmdGets || req.Cmd == protocol.CmdGats
	store := cn.srv.store
	if cn.hold != nil && cn.resume == 0 {
		cn.hold.refills = cn.hold.refills[:0] // a new request (hold.go)
	}
	for i := cn.resume; i < len(req.Keys); i++ {
		key := req.Keys[i]
		var ok bool
		if touch {
			var info shard.Info
			cn.scratch, info, ok = store.GetAndTouch(cn.scratch[:0], key, req.Exptime)
			if ok {
				cn.out = protocol.AppendValueHeader(cn.out, key, info.Flags, len(cn.scratch), info.Cas, withCas)
				cn.out = append(append(cn.out, cn.scratch...), "\r\n"...)
			}
		} else {
			// The store appends the whole VALUE block straight into the output: one copy of the value.
			cn.out, ok = store.AppendGetHashed(cn.out, key, cn.hashOf(i, key), withCas, protocol.AppendValueHeader)
		}
		if !ok && store.Herd() { // grace or hold (hold.go)
			var park bool
			if ok, park = cn.missed(key, cn.hashOf(i, key), withCas); park {
				cn.resume = i
				return true
			}
		}
		if cn.hold != nil {
			cn.hold.answered(ok, &cn.srv.stats.hold)
		}
		// memcached counts gat/gats only as touches, never in cmd_get/get_hits/get_misses.
		if touch {
			cn.local[statCmdTouch]++
			cn.countHit(ok, statTouchHits, statTouchMisses)
		} else {
			cn.local[statCmdGet]++
			cn.countHit(ok, statGetHits, statGetMisses)
		}
		cn.srv.detail.record(key, prefixGet, ok)
		if cn.yield(i+1 < len(req.Keys)) {
			cn.resume = i + 1
			return true
		}
	}
	cn.resume = 0
	cn.out = append(cn.out, protocol.ReplyEnd...)
	cn.sentMark = len(cn.out)
	return false
}

// storeCmd serves set, add, replace, append, prepend and cas.
func (cn *conn) storeCmd(req *protocol.Request) {
	cn.local[statCmdSet]++
	cn.srv.detail.record(req.Key(), prefixSet, false)
	key := req.Key()
	res := cn.srv.store.StoreHashed(storeModes[req.Cmd], key, cn.hashOf(0, key), req.Flags, req.Exptime, req.Data, req.Cas)
	if req.Cmd == protocol.CmdCas {
		cn.countCas(res)
	}
	if cn.srv.watch.On(watch.Mutations) {
		cn.logStore(storeModes[req.Cmd], storeCmdName(storeModes[req.Cmd]), key, res, req.Flags, req.Exptime, len(req.Data))
	}
	cn.countStoreFailure(res)
	cn.reply(req, resultReply(res))
}

// countCas counts a compare-and-swap's outcome as memcached does (cas, and ms with C).
func (cn *conn) countCas(res shard.Result) {
	switch res {
	case shard.Stored:
		cn.local[statCasHits]++
	case shard.Exists:
		cn.local[statCasBadval]++
	case shard.NotFound:
		cn.local[statCasMisses]++
	}
}

func (cn *conn) countStoreFailure(res shard.Result) {
	switch res {
	case shard.TooLarge:
		cn.local[statStoreTooLarge]++
	case shard.NoMemory:
		cn.local[statStoreNoMemory]++
	}
}

// arith serves incr and decr.
func (cn *conn) arith(req *protocol.Request) {
	incr := req.Cmd == protocol.CmdIncr
	val, res := cn.srv.store.Arith(req.Key(), incr, req.Delta)
	hitStat, missStat := statDecrHits, statDecrMisses
	if incr {
		hitStat, missStat = statIncrHits, statIncrMisses
	}
	if res == shard.NotFound {
		cn.local[missStat]++
	} else if res == shard.Stored {
		cn.local[hitStat]++
	}
	if req.Noreply {
		return
	}
	if res == shard.Stored {
		cn.out = protocol.AppendUint(cn.out, val)
		return
	}
	cn.out = append(cn.out, resultReply(res)...)
}

// resultReply is the memcached reply line for a store result.
func resultReply(res shard.Result) []byte {
	switch res {
	case shard.Stored:
		return protocol.ReplyStored
	case shard.NotStored:
		return protocol.ReplyNotStored
	case shard.Exists:
		return protocol.ReplyExists
	case shard.NotFound:
		return protocol.ReplyNotFound
	case shard.Deleted:
		return protocol.ReplyDeleted
	case shard.Touched:
		return protocol.ReplyTouched
	case shard.TooLarge:
		return protocol.ReplyServerErrorTooLarge
	case shard.NoMemory:
		return protocol.ReplyServerErrorOOMStore
	case shard.NonNumeric:
		return protocol.ReplyClientErrorNonNumber
	}
	return replyInternalResult
}
