// leasecached patch: the raw I/O of raw_linux.go exists on Linux only; elsewhere these are the ordinary calls.

//go:build darwin || dragonfly || freebsd || netbsd || openbsd

package io

import "golang.org/x/sys/unix"

// RawRead is unix.Read.
func RawRead(fd int, p []byte) (int, error) { return unix.Read(fd, p) }

// RawWrite is unix.Write.
func RawWrite(fd int, p []byte) (int, error) { return unix.Write(fd, p) }

// RawWritev is Writev.
func RawWritev(fd int, bs [][]byte) (int, error) { return Writev(fd, bs) }
