package clientlib

import (
	"bufio"
	"bytes"
	"sync/atomic"
	"time"

	"github.com/leasecached/leasecached/clientlib/ketama"
)

// server is one configured cache server and its health. Health is simple on purpose: FailureLimit
// consecutive network failures eject the server from the ring; a prober puts it back as soon as it
// answers a version command, and any success resets the count.
type server struct {
	addr string
	node ketama.Node
	pool *pool

	failures atomic.Int32  // consecutive network failures
	dead     atomic.Bool   // ejected from the ring
	errors   atomic.Uint64 // network failures ever, for Stats
	ejects   atomic.Uint64 // times ejected, for Stats
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
