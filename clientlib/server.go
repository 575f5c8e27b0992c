package clientlib

import (
	"bufio"
	"bytes"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasecached/leasecached/clientlib/ketama"
)

// server is one configured cache server, its health and what it speaks. Health is simple on purpose:
// FailureLimit consecutive failures (a network error, or no reply within Config.Timeout whoever's deadline
// ended first) eject the server from the ring; a prober puts it back as soon as it answers a version
// command, and any success resets the count.
type server struct {
	addr string
	node ketama.Node
	pool *pool

	failures atomic.Int32  // consecutive failures
	dead     atomic.Bool   // ejected from the ring
	errors   atomic.Uint64 // failures ever, for Stats
	ejects   atomic.Uint64 // times ejected, for Stats
	removed  atomic.Bool   // SetServers took it out of the list: never ejected or probed again

	// What GetOrFill speaks to it, learned once (caps.go); forgotten when it comes back from an ejection.
	proto       atomic.Int32 // a protocol; protoUnknown until learned
	leaseWindow atomic.Int64 // its lease window (stats settings), with protoLeases
	learnMu     sync.Mutex
	learning    chan struct{} // closed when the running probe ends; nil when none runs
	learnErr    error         // why the last probe failed
}

func (s *server) succeeded() {
	if s.failures.Load() != 0 {
		s.failures.Store(0)
	}
}

// probe dials the server and asks for its version; nil means it is answering again.
func (s *server) probe(dialTimeout time.Duration) error {
	nc, err := s.pool.dialer.dialTimeout(dialTimeout)
	if err != nil {
		return err
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(dialTimeout))
	if _, err := nc.Write([]byte("version\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(nc).ReadSlice('\n')
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(line, []byte("VERSION ")) {
		return &ServerError{Addr: s.addr, Line: string(bytes.TrimRight(line, "\r\n")), kind: ErrServerError}
	}
	return nil
}
