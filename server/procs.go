package server

import "runtime"

// raiseProcs makes sure the runtime has a P for every event loop and the acceptor, plus one for everything
// else: GOMAXPROCS becomes at least loops + 2. It is never lowered, and it is raised even when the GOMAXPROCS
// environment variable asks for less.
//
// Our gnet's pollers wait in raw system calls, and a busy one keeps its P through them
// (third_party/gnet/LEASECACHED.md, item 3): with no spare P, timers, the GC's workers and every other
// goroutine would wait up to 10 ms at a time for a loop to be preempted.
func raiseProcs(loops int) {
	if want := loops + 2; runtime.GOMAXPROCS(0) < want {
		runtime.GOMAXPROCS(want)
	}
}
