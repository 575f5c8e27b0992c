package main

import (
	"context"
	"io"
)

func compareMain(ctx context.Context, args []string, out io.Writer) error { return nil }
