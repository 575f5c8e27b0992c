//go:build !crashsteps

package shard

// crashStep marks a step between the writes of a change (undo.go: the steps) that a kill may fall
// between; only builds with the crashsteps tag act on it.
func (sh *shard) crashStep(int) {}
