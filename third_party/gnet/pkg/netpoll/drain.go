// leasecached patch: what is left in the task queues once the engine has stopped. See LEASECACHED.md,
// item 10.

//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package netpoll

import "github.com/panjf2000/gnet/v2/pkg/queue"

// DrainTasks empties both task queues without running the tasks, calling f with each task's parameter.
// Only the poller's own goroutine may call it, after Polling has returned: Polling leaves the tasks queued
// behind the one that ended it, and Trigger may queue more until every goroutine that calls it has stopped.
func (p *Poller) DrainTasks(f func(param any)) {
	for _, q := range []queue.AsyncTaskQueue{p.urgentAsyncTaskQueue, p.asyncTaskQueue} {
		for task := q.Dequeue(); task != nil; task = q.Dequeue() {
			f(task.Param)
			queue.PutTask(task)
		}
	}
}
