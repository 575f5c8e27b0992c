package server

import "github.com/leasecached/leasecached/protocol"

// shutdown serves memcached's `shutdown` and `shutdown graceful` (enabled by -A): the connection closes
// and the daemon stops as it does on SIGINT. memcached's graceful form is for its -e restart; a clean stop
// is already what a restart from --data-dir wants (doc/design/restart.md), so both forms do the same.
func (cn *conn) shutdown(req *protocol.Request) outcome {
	switch {
	case cn.srv.cfg.Shutdown == nil:
		cn.out = append(cn.out, protocol.ReplyShutdownDisabled...)
	case len(req.Args) == 0 || len(req.Args) == 1 && string(req.Args[0]) == "graceful":
		cn.closeWhy = closeShutdown
		cn.srv.cfg.Shutdown()
		return closeConn
	default:
		cn.out = append(cn.out, protocol.ReplyShutdownBadMode...)
	}
	return keepOpen
}
