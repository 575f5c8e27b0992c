package shard

import "github.com/leasecached/leasecached/slab"

// Pages that hold no item go to the class that needs one before anything is evicted.
//
// A shard's pages go to size classes as items arrive, and a page stays with its class once its items are
// gone. A shard has about as many pages as there are classes (64 pages a shard by the sizing rule, 62
// classes), and a chained item's last chunk can fall in any class, so a workload of varied sizes soon has
// every page of a shard assigned to some class, most of them empty. A class that then needed a chunk evicted
// one of its own live items (sweep) although pages sat empty in other classes: the integrity soak
// (integration/soak_test.go) lost a 346 KB value at -m 1024 with 12.7 MB stored. memcached's automover
// gives the pages of classes with free chunks back to its global pool for the same reason. So allocChunk
// first takes an empty page from another class, a move that costs no item, and a shard over its page
// allowance (the limit lowered, a hash table grown) gives back an empty page before it drains one that
// holds items (releasePage).
//
// Finding one: every page of a class with no chunk in use is empty, at no cost to check; a class with at
// least a page's worth of free chunks may hold an empty page, found by reading the state byte of each chunk
// of its pages (a page's first chunk in use ends the look at it). What a look costs is bounded by time: a
// class that looked and found no empty page does not look again within the same second
// (classStats.emptyLook), and a class whose pages were read through without finding one is not read again
// within the same second (classStats.emptyScan). A cache that evicts steadily (where a look finds nothing)
// thus pays for a look once a second per evicting class, not once per store (BenchmarkSetEvicting: a look
// at 62 classes, one cache miss each, cost more than the eviction itself).

// takeEmptyPage moves a page that holds no item from another class to class to; false if there is none.
func (sh *shard) takeEmptyPage(to int, now int64) bool {
	if sh.cls[to].emptyLook == now {
		return false
	}
	p, ok := sh.emptyPage(to, now)
	if !ok {
		sh.cls[to].emptyLook = now
		return false
	}
	if err := sh.al.MovePage(p, to); err != nil {
		return false // emptyPage checked the page; a page move under way elsewhere refuses a second one
	}
	sh.stats.slabsMoved++
	return true
}

// emptyPage finds a page of a class other than keep with no chunk in use (see above).
func (sh *shard) emptyPage(keep int, now int64) (uint32, bool) {
	for id := range sh.cls {
		if id == keep {
			continue
		}
		st := sh.al.Stats(id)
		switch {
		case st.Pages == 0:
			continue
		case st.UsedChunks == 0:
			return sh.al.PageAt(id, 0), true
		case st.FreeChunks < st.ChunksPerPage || sh.cls[id].emptyScan == now:
			continue
		}
		for i := range st.Pages {
			if p := sh.al.PageAt(id, i); sh.pageEmpty(p) {
				return p, true
			}
		}
		sh.cls[id].emptyScan = now
	}
	return 0, false
}

// pageEmpty says whether no chunk handed out in page p is in use.
func (sh *shard) pageEmpty(p uint32) bool {
	first, size, n := sh.al.PageChunks(p)
	for i := range n {
		if sh.chunk(first + slab.Ref(i*size))[slab.StateOffset] != slab.StateFree {
			return false
		}
	}
	return true
}
