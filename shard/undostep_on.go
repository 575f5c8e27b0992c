//go:build undosteps

package shard

// undoStepHook, when set, is called at each step of a change in place (undo.go), under the shard lock: the
// tests of build tag undosteps take crash images there.
var undoStepHook func(sh *shard, step int)

func (sh *shard) undoStep(step int) {
	if undoStepHook != nil {
		undoStepHook(sh, step)
	}
}
