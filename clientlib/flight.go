package clientlib

import (
	"context"
	"sync"
)

// flightGroup is in-process single-flight for GetOrFill and GetMultiOrFill: concurrent callers for one
// key share one execution and all receive its result or its error. Unlike x/sync/singleflight, the
// execution runs on its own goroutine, detached from any one caller: a caller whose context ends returns
// at once, while a fill in progress (which holds the key's lease for the whole fleet) runs to completion
// and caches its value. Only when every caller of every key an execution serves has left is its waiting
// phase abandoned. One execution serves one key (GetOrFill) or many (a GetMultiOrFill batch); a caller
// of either joins whatever execution already serves its key.
type flightGroup struct {
	mu sync.Mutex
	m  map[string]*flight
}

// flight is one key's result to come.
type flight struct {
	done    chan struct{}
	val     Value
	err     error
	waiters int        // callers still waiting; guarded by flightGroup.mu
	run     *flightRun // the execution that resolves it
}

// flightRun is one execution: its context is cancelled when none of the flights it serves has a caller
// left (or when it ends).
type flightRun struct {
	ctx    context.Context
	cancel context.CancelFunc
	live   int // its flights that still have callers; guarded by flightGroup.mu
}

func (g *flightGroup) init() { g.m = make(map[string]*flight) }

// newRun starts an execution's context from a caller's: its values, no deadline, no cancellation.
func newRun(ctx context.Context) *flightRun {
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	return &flightRun{ctx: rctx, cancel: cancel}
}

// add registers a new flight for key served by run. g.mu must be held.
func (g *flightGroup) add(key string, run *flightRun) *flight {
	f := &flight{done: make(chan struct{}), run: run}
	run.live++
	g.m[key] = f
	return f
}

// do runs fn once per key at a time. joined reports whether this caller shared another's execution.
// fn receives a context that keeps the first caller's values, has no deadline of its own, and is
// cancelled when all callers have gone.
func (g *flightGroup) do(ctx context.Context, key string, fn func(ctx context.Context) (Value, error)) (v Value, joined bool, err error) {
	g.mu.Lock()
	f, joined := g.m[key]
	if !joined {
		run := newRun(ctx)
		f = g.add(key, run)
		go func() {
			defer run.cancel()
			v, err := fn(run.ctx)
			g.finish(key, f, v, err)
		}()
	}
	f.waiters++
	g.mu.Unlock()

	select {
	case <-f.done:
		return f.val, joined, f.err
	case <-ctx.Done():
		g.leave(key, f)
		return Value{}, joined, ctx.Err()
	}
}

// leave takes one caller off f. When it was the last, nobody is left to answer: f is forgotten, so that
// the next caller starts afresh rather than join an execution that is winding down, and the execution
// stops waiting once none of its flights has a caller.
func (g *flightGroup) leave(key string, f *flight) {
	g.mu.Lock()
	defer g.mu.Unlock()
	f.waiters--
	if f.waiters > 0 {
		return
	}
	if g.m[key] == f {
		delete(g.m, key)
	}
	if f.run.live--; f.run.live == 0 {
		f.run.cancel()
	}
}

// finish hands f its result. Each flight is finished exactly once.
func (g *flightGroup) finish(key string, f *flight, v Value, err error) {
	f.val, f.err = v, err
	g.mu.Lock()
	if g.m[key] == f {
		delete(g.m, key)
	}
	g.mu.Unlock()
	close(f.done)
}
