package testdaemon

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"
)

// Leasecached is the daemon's package, for Build.
const Leasecached = "github.com/leasecached/leasecached/cmd/leasecached"

// Build is a Go command built once per test binary run, for the tests that run it: the first Path
// builds it into a temporary directory, which Remove (from TestMain) deletes.
type Build struct {
	Pkg string // the command's import path

	once sync.Once
	dir  string
	path string
	err  error
}

// Path returns the built binary, building it on the first call; a failed build's error carries the
// compiler's output.
func (b *Build) Path() (string, error) {
	b.once.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", "testdaemon-build-"); b.err != nil {
			return
		}
		b.path = filepath.Join(b.dir, filepath.Base(b.Pkg))
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", b.path, b.Pkg).CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %w\n%s", b.Pkg, err, out)
		}
	})
	return b.path, b.err
}

// Remove deletes what Path built, if anything.
func (b *Build) Remove() {
	if b.dir != "" {
		_ = os.RemoveAll(b.dir)
	}
}
