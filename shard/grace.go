package shard

import "github.com/leasecached/leasecached/slab"

// Grace (doc/leases.md, "Grace and hold"): with Config.Grace, an expired value is kept as a grace copy
// (a stale value marked metaGrace, ghost.go), and a get-family read that misses is answered from it: the
// first such read in a lease window takes the key's lease and misses, so that its client refills the
// key; every other read gets the grace copy as an ordinary hit. The lease is the one lease-get shares
// (rule 2), so a key has one refiller whichever command asked. Writes end the grace as they end any stale
// value (rule 4: a store drops it); a delete never leaves a grace copy (its stale value lacks metaGrace).

// graceRead is a get-family read of key that found no live item, under the shard lock. It returns the
// grace copy to answer with; or nil and refill, when this read now holds the key's refill lease; or nil
// alone when the key is not in grace.
func (sh *shard) graceRead(h uint64, key []byte, now int64) (g []byte, refill bool) {
	if sh.st.graceSecs == 0 {
		return nil, false
	}
	ref, g := sh.findGhost(h, key, now)
	if ref == slab.NilRef || g[offMeta]&(metaGrace|metaStale) != metaGrace || int64(itemExp(g))+sh.st.graceSecs <= now {
		return nil, false
	}
	if _, granted := sh.leases.Claim(h, sh.st.nowNano()); granted {
		sh.leases.Counters.GraceRefills++
		sh.claimGhost(g)
		return nil, true
	}
	sh.leases.Counters.GraceHits++
	return g, false
}

// endGrace is a delete of the key hashed to h: a grace copy it has stays a stale value for lease-get
// (rule 4) but answers no plain read any more (read-after-delete is a miss). A delete that finds a live
// item replaces any stale value anyway (toGhost).
func (sh *shard) endGrace(h uint64) { sh.markGhosts(h, metaStale, 0) }

// unclaimGhost is claimGhost undone: a write cancelled the refill lease of the key hashed to h, so the
// next grant is not a lapse.
func (sh *shard) unclaimGhost(h uint64) { sh.markGhosts(h, 0, metaTokenSent) }

// markGhosts sets the meta bits set and clears clear on the stale values of the key hashed to h, when
// grace is on. Keys are matched by their 64-bit hash, as leases are (lease.Table).
func (sh *shard) markGhosts(h uint64, set, clear byte) {
	if sh.st.graceSecs == 0 || sh.ghosts.count == 0 {
		return
	}
	p := sh.ghosts.probe(h)
	for {
		_, ref, ok := sh.ghosts.next(&p)
		if !ok {
			return
		}
		if sh.hashOf(ref) == h {
			g := sh.chunk(ref)
			g[offMeta] = g[offMeta]&^clear | set
		}
	}
}

// ghostEnded counts, for a stale value leaving for why, a refill that was handed out for its grace copy
// and never landed (a store would have replaced the copy): grace_lease_lapses counts each failed refill
// once, here or when the next one is handed out (claimGhost).
func (sh *shard) ghostEnded(g []byte, why cause) {
	if why == causeExpire && g[offMeta]&(metaGrace|metaTokenSent) == metaGrace|metaTokenSent {
		sh.leases.Counters.GraceLapses++
	}
}

// claimGhost records on stale value g that a refill lease was just granted for its key (by a grace read
// or a lease-get): a second grant for the same stale value means the first lapsed without a write.
func (sh *shard) claimGhost(g []byte) {
	if g[offMeta]&metaGrace == 0 {
		return
	}
	if g[offMeta]&metaTokenSent != 0 {
		sh.leases.Counters.GraceLapses++
	}
	g[offMeta] |= metaTokenSent
}
