package server

// inbuf is the input buffer of a transport that reads for itself (the stream transport, TLS on the loops):
// buf[r:w] is input received and not yet consumed. It gives the engine conn.serve's view of it (Peek,
// Discard, InboundBuffered). The engine leaves at most one incomplete request smaller than bigRequestMin
// in it (it gathers larger ones itself), so the buffer stays below bigRequestMin plus one read.
type inbuf struct {
	buf  []byte
	r, w int
}

func (ib *inbuf) Peek(int) ([]byte, error) { return ib.buf[ib.r:ib.w], nil }
func (ib *inbuf) InboundBuffered() int     { return ib.w - ib.r }

func (ib *inbuf) Discard(n int) (int, error) {
	n = min(n, ib.w-ib.r)
	ib.r += n
	if ib.r == ib.w {
		ib.r, ib.w = 0, 0
	}
	return n, nil
}

// room returns the free tail to read into, at least streamReadMin bytes: the unconsumed input moved to
// the front, the buffer grown when that is not enough. The caller adds what it read to w.
func (ib *inbuf) room() []byte {
	if ib.r > 0 {
		ib.w = copy(ib.buf, ib.buf[ib.r:ib.w])
		ib.r = 0
	}
	if len(ib.buf)-ib.w < streamReadMin {
		grown := make([]byte, max(2*len(ib.buf), ib.w+streamReadMin))
		copy(grown, ib.buf[:ib.w])
		ib.buf = grown
	}
	return ib.buf[ib.w:]
}

// shrink gives back a buffer a large request grew, once nothing is left in it.
func (ib *inbuf) shrink() {
	if ib.w == 0 && len(ib.buf) > keepBufferCap/4 {
		ib.buf = make([]byte, streamReadMin)
	}
}
