package main

import (
	"context"
	"io"
)

func storageMain(ctx context.Context, args []string, out io.Writer) error { return nil }
