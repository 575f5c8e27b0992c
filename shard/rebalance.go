package shard

import (
	"math"

	"github.com/leasecached/leasecached/slab"
)

// Page rebalancing: memory follows the workload (memcached's slab automover, done inline).
//
// A class that has to evict a live item has too few pages for its working set, unless every other class
// is just as pressed. What measures pressure fairly across classes is age: how long an item survives
// before its class evicts it (CLOCK's hand visits items roughly in last-access order). A class evicting
// young items loses hits that another class, sitting on items nobody has touched for much longer, could
// afford to give up. So every time a class has evicted a page's worth of items, it compares the age of
// its last eviction with the age of the item under every other class's CLOCK hand (what that class would
// evict next), and takes one page from the class whose next victim is oldest when that is more than
// rebalanceAgeRatio times older plus rebalanceAgeSlack seconds. The page under that class's hand is the
// one moved: its items are the ones it would have evicted next anyway, and the ones among them CLOCK would
// keep move to other chunks of the class first (drain.go).
//
// The slack keeps classes whose items all live for about the same short time (ages of 0 or 1 second, a
// steady mixed workload) from trading pages back and forth; the ratio does the same for longer lives. The
// check costs a loop over the classes once per page of evictions, nothing on other stores.
//
// Measured (TestPagesFollowWorkload): after 100-byte values fill the cache and the workload switches to
// 10 KB values, the 10 KB working set goes from a 1-page class (0% hits) to over 90% hits within a few
// seconds of ages, each page of evictions moving one page over.
const (
	rebalanceAgeRatio = 2
	rebalanceAgeSlack = 1 // seconds
	// rebalanceMinPages is what a donor class keeps: a class is never emptied by the rebalancer (a class
	// with no page gets one from movePage when it needs it, as before).
	rebalanceMinPages = 2
)

// rebalanceDue says whether class id has evicted a page's worth of live items since its last check.
func (sh *shard) rebalanceDue(id int) bool {
	c := &sh.cls[id]
	if c.evictsSinceCheck < uint32(sh.st.classes.PerPage(id)) {
		return false
	}
	c.evictsSinceCheck = 0
	return true
}

// rebalance moves one page to class to from the class whose next eviction is oldest, if it is old
// enough compared with to's last eviction (see above); false if no page moved.
func (sh *shard) rebalance(to int, now int64) bool {
	if sh.al.ParkedPages() > 0 {
		return false // one page a shard waits for the next sync at a time (drain.go)
	}
	donor, donorAge := -1, int64(-1)
	for id := range sh.cls {
		if id == to || sh.al.Pages(id) < rebalanceMinPages {
			continue
		}
		if age := sh.handAge(id, now); age > donorAge {
			donor, donorAge = id, age
		}
	}
	recvAge := max(sh.cls[to].evictedTime, 0)
	if donor < 0 || donorAge <= rebalanceAgeRatio*recvAge+rebalanceAgeSlack {
		return false
	}
	r := sh.al.PeekHand(donor)
	p := r.Page()
	if sh.pagePinned(p) {
		return false
	}
	gave, parked := sh.endDrain(to, sh.drainPage(p, now, true))
	if parked {
		sh.stats.slabsMoved++ // it left the donor; class to takes a page once it is released
	}
	if !gave {
		return false
	}
	sh.stats.slabsMoved++
	sh.cls[to].pagesGained++
	return true
}

// handAge is how long ago the item under class id's CLOCK hand was last stored or read: the age of what
// the class would evict next. A free chunk or a stale value there counts as infinitely old (memory the
// class does not need). An item read since the hand last passed it (its CLOCK bit set) may have been read
// after its time (bump moves it only on some reads), but not after its page's last read: that bounds it,
// so a class read every second is young however old its items' times (TestReadClassKeepsPages).
func (sh *shard) handAge(id int, now int64) int64 {
	r := sh.al.PeekHand(id)
	if r == slab.NilRef {
		return -1
	}
	head, b, ok := sh.itemOf(r)
	if !ok || isGhost(b) {
		return math.MaxInt64
	}
	last := int64(itemTime(b))
	if b[offState]&flagVisited != 0 {
		last = max(last, int64(sh.al.PageRead(head)))
	}
	return now - last
}
