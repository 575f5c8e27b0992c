package server

import "github.com/leasecached/leasecached/protocol"

// memcached's -F, -X and -W turn commands off for clients an operator does not trust with them; the
// refusals are memcached 1.6.18's own words (process_flush_all_command, process_stat's cachedump,
// process_lru_crawler_command's metadump, process_watch_command, process_bin_flush).
var (
	replyFlushNotAllowed     = []byte("CLIENT_ERROR flush_all not allowed\r\n")
	replyCachedumpNotAllowed = []byte("CLIENT_ERROR stats cachedump not allowed\r\n")
	replyMetadumpNotAllowed  = []byte("ERROR metadump not allowed\r\n")
	replyWatchNotAllowed     = []byte("CLIENT_ERROR watch commands not allowed\r\n")
)

// watchRefused answers a watch that -W turned off, and reports whether it did. As memcached, a trailing
// noreply (set_noreply_maybe, before any other check) silences the refusal.
func (cn *conn) watchRefused(req *protocol.Request) bool {
	if !cn.srv.cfg.DisableWatch {
		return false
	}
	if n := len(req.Args); n == 0 || string(req.Args[n-1]) != "noreply" {
		cn.out = append(cn.out, replyWatchNotAllowed...)
	}
	return true
}
