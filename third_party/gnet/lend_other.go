// leasecached patch: see lend.go.

//go:build darwin || dragonfly || freebsd || netbsd || openbsd || (linux && poll_opt)

package gnet

import errorx "github.com/panjf2000/gnet/v2/pkg/errors"

// Lend implements Lender: these pollers do not lend.
func (c *conn) Lend() error { return errorx.ErrUnsupportedOp }

// TakeBack implements Lender: these pollers do not lend.
func (c *conn) TakeBack() error { return errorx.ErrUnsupportedOp }
