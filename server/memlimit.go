package server

import (
	"log/slog"

	"github.com/leasecached/leasecached/protocol"
)

// cache_memlimit <megabytes> [noreply]: memcached's run-time change of -m, with its replies and limits
// (process_memlimit_command). The store applies it (shard.Store.SetMemoryLimit documents how pages follow).
const (
	// memlimitMinMB is memcached's floor for cache_memlimit.
	memlimitMinMB = 8
	// memlimitMaxMB is where memcached assumes the client sent bytes, not megabytes.
	memlimitMaxMB = 1_000_000_000
)

var (
	replyMemlimitTooSmall = []byte("MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m\r\n")
	replyMemlimitNotBytes = []byte("MEMLIMIT_ADJUST_FAILED input value is megabytes not bytes\r\n")
	// replyMemlimitFailed is memcached's answer when its allocator refuses; ours refuses a limit below -I
	// or beyond the memory a slab reference can address (1 TiB).
	replyMemlimitFailed = []byte("MEMLIMIT_ADJUST_FAILED out of bounds or unable to adjust\r\n")
)

func (cn *conn) memlimit(req *protocol.Request) {
	mb := req.Delta
	switch {
	case mb < memlimitMinMB:
		cn.reply(req, replyMemlimitTooSmall)
	case mb > memlimitMaxMB:
		cn.reply(req, replyMemlimitNotBytes)
	default:
		if err := cn.srv.store.SetMemoryLimit(int64(mb) << 20); err != nil {
			cn.log(slog.LevelInfo, "cache_memlimit refused", slog.Uint64("megabytes", mb), slog.Any("err", err))
			cn.reply(req, replyMemlimitFailed)
			return
		}
		cn.log(slog.LevelInfo, "maxbytes adjusted", slog.Uint64("megabytes", mb))
		cn.reply(req, protocol.ReplyOK)
	}
}
