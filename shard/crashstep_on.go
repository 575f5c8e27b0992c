//go:build crashsteps

package shard

// crashStepHook, when set, is called at each step of a change (undo.go: the steps), under the shard lock: the
// tests of build tag crashsteps take crash images there.
var crashStepHook func(sh *shard, step int)

func (sh *shard) crashStep(step int) {
	if crashStepHook != nil {
		crashStepHook(sh, step)
	}
}
