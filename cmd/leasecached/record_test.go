package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStartRecording(t *testing.T) {
	magic := map[string][]byte{
		"cpuprofile": {0x1f, 0x8b},    // pprof profiles are gzipped
		"trace":      []byte("go 1."), // execution traces start with their version header
	}
	for _, r := range recorders {
		t.Run(r.flag, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), r.flag)
			stop, err := startRecording(r, path)
			if err != nil {
				t.Fatal(err)
			}
			stop()
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(b, magic[r.flag]) {
				t.Fatalf("%s file starts %q, want %q", r.flag, b[:min(len(b), 8)], magic[r.flag])
			}

			_, err = startRecording(r, filepath.Join(t.TempDir(), "missing", "dir", "file"))
			if err == nil || !strings.HasPrefix(err.Error(), "--"+r.flag+": ") {
				t.Fatalf("unwritable path: err = %v, want one naming --%s", err, r.flag)
			}
		})
	}
}
