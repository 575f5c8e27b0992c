//go:build !linux

package top

import "errors"

// Elsewhere than Linux the view prints frames as to a pipe.
func isTerminal(uintptr) bool { return false }

func keyMode(uintptr) (func(), error) { return nil, errors.New("not supported") }

func termSize(uintptr) (int, int) { return 0, 0 }
