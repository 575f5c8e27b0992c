package shard

// Shared pieces of the meta commands (mg, ms, md, ma, me). memcached 1.6.18 applies the exptime
// flags T and N, and evaluates R, in the order the client wrote them, printing t from the item as it
// stands at that point; so requests carry their exptime flags as an ordered list and results carry
// the TTL after each step for the server to print in place.

// ExpKind is one exptime-related meta flag.
type ExpKind uint8

const (
	ExpTouch   ExpKind = iota + 1 // T: set the exptime
	ExpVivify                     // N: set the exptime of an item this request created
	ExpRecache                    // R: win the recache token if the item expires before this
)

// MaxExpOps bounds ExpOps: memcached rejects a repeated flag, so T, N and R each appear at most once.
const MaxExpOps = 3

// ExpOp is one exptime flag with its protocol exptime (relative seconds, absolute unix time, or <0).
type ExpOp struct {
	Kind    ExpKind
	Exptime int64
}

// ExpOps is an ordered list of exptime flags, fixed-size so requests allocate nothing.
type ExpOps struct {
	ops [MaxExpOps]ExpOp
	n   int
}

// Add appends an op; ops beyond MaxExpOps are ignored (the protocol cannot produce them).
func (o *ExpOps) Add(kind ExpKind, exptime int64) {
	if o.n < MaxExpOps {
		o.ops[o.n] = ExpOp{Kind: kind, Exptime: exptime}
		o.n++
	}
}

// Len is the number of ops.
func (o *ExpOps) Len() int { return o.n }

// applied is the exptime an item whose exptime is exp ends the request with: T applied, and N when the
// request created the item. The item is made or changed with it at once, so that a command is one change
// (doc/design/restart.md rule 2), not a change and a move.
func (o *ExpOps) applied(exp uint32, created bool, now int64) uint32 {
	for _, op := range o.ops[:o.n] {
		if op.Kind == ExpTouch || op.Kind == ExpVivify && created {
			exp = absExptime(op.Exptime, now)
		}
	}
	return exp
}

// TTLs holds the remaining TTL as mg/ma's t flag prints it: TTLs[0] before any exptime op, TTLs[i]
// after the first i. NoTTL means the item never expires.
type TTLs [MaxExpOps + 1]int64

// NoTTL is the t value of an item without exptime.
const NoTTL = -1

// rel converts an absolute unix time to memcached's rel_time_t, seconds since its process_started;
// times at or before the start are 1, as memcached's realtime() makes them.
func (s *Store) rel(abs int64) uint32 {
	if abs <= s.started {
		return 1
	}
	return uint32(abs - s.started)
}

// ttl is the t flag's value: -1 for no exptime, else exptime minus now in memcached's unsigned
// 32-bit arithmetic (an already expired exptime prints as a huge number, as it does there).
func (s *Store) ttl(exp uint32, now int64) int64 {
	if exp == 0 {
		return NoTTL
	}
	return int64(s.rel(int64(exp)) - s.rel(now))
}

// memcached's default slab geometry (-n 48, -f 1.25, 1 MiB pages): me reports an item's class in it.
const (
	mcSmallestSlab = 96      // sizeof(item) + the default -n 48
	mcGrowthFactor = 1.25    // the default -f
	mcSlabAlign    = 8       // CHUNK_ALIGN_BYTES
	mcChunkMax     = 1 << 19 // slab_chunk_size_max: half a page; larger items are chunked
	mcMaxClasses   = 63      // MAX_NUMBER_OF_SLAB_CLASSES - 1
)

// mcClassSizes are memcached's default slab class chunk sizes; class ids start at 1.
var mcClassSizes = func() []int {
	var sizes []int
	size := float64(mcSmallestSlab)
	for len(sizes) < mcMaxClasses-1 && size <= mcChunkMax/mcGrowthFactor {
		n := int(size)
		if n%mcSlabAlign != 0 {
			n += mcSlabAlign - n%mcSlabAlign
		}
		sizes = append(sizes, n)
		size = float64(n) * mcGrowthFactor
	}
	return append(sizes, mcChunkMax)
}()

// mcClassOf is the memcached slab class of an item of ntotal bytes; chunked items report the largest.
func mcClassOf(ntotal int) int {
	for i, size := range mcClassSizes {
		if ntotal <= size {
			return i + 1
		}
	}
	return len(mcClassSizes)
}

// countMissCause counts a lookup that found only a dead item, as memcached's do_item_get does.
func (sh *shard) countMissCause() {
	switch sh.missCause {
	case causeExpire:
		sh.stats.getExpired++
	case causeFlush:
		sh.stats.getFlushed++
	}
}
