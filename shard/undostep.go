//go:build !undosteps

package shard

// undoStep marks a step of a change in place (undo.go); only builds with the undosteps tag act on it.
func (sh *shard) undoStep(int) {}
