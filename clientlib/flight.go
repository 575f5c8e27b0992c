package clientlib

import (
	"context"
	"sync"
)

// flightGroup is in-process single-flight for GetOrFill: concurrent callers for one key share one
// execution and all receive its result or its error. Unlike x/sync/singleflight, the execution runs
// on its own goroutine, detached from any one caller: a caller whose context ends returns at once,
// while a fill in progress (which holds the key's lease for the whole fleet) runs to completion and
// caches its value. Only when every caller has left is the execution's waiting phase abandoned.
type flightGroup struct {
	mu sync.Mutex
	m  map[string]*flight
}

type flight struct {
	done    chan struct{}
	val     Value
	err     error
	waiters int                // callers still waiting; guarded by flightGroup.mu
	ctx     context.Context    // cancelled when waiters drops to zero
	cancel  context.CancelFunc // cancels ctx
}

func (g *flightGroup) init() { g.m = make(map[string]*flight) }

// do runs fn once per key at a time. joined reports whether this caller shared another's execution.
// fn receives a context that keeps the first caller's values, has no deadline of its own, and is
// cancelled when all callers have gone.
func (g *flightGroup) do(ctx context.Context, key string, fn func(ctx context.Context) (Value, error)) (v Value, joined bool, err error) {
	g.mu.Lock()
	f, joined := g.m[key]
	if !joined {
		fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		f = &flight{done: make(chan struct{}), ctx: fctx, cancel: cancel}
		g.m[key] = f
		go g.run(key, f, fn)
	}
	f.waiters++
	g.mu.Unlock()

	select {
	case <-f.done:
		return f.val, joined, f.err
	case <-ctx.Done():
		g.mu.Lock()
		f.waiters--
		if f.waiters == 0 {
			// Nobody is left to answer: stop waiting, and let the next caller start afresh rather
			// than join an execution that is winding down.
			f.cancel()
			if g.m[key] == f {
				delete(g.m, key)
			}
		}
		g.mu.Unlock()
		return Value{}, joined, ctx.Err()
	}
}

func (g *flightGroup) run(key string, f *flight, fn func(ctx context.Context) (Value, error)) {
	defer f.cancel()
	f.val, f.err = fn(f.ctx)
	g.mu.Lock()
	if g.m[key] == f {
		delete(g.m, key)
	}
	g.mu.Unlock()
	close(f.done)
}
