package deploy

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/leasecached/leasecached/internal/testdaemon"
)

// ociImage is what these tests read of an OCI image archive (the image-spec's index, manifest and
// config): the config's runtime fields, and the files of each layer by path.
type ociImage struct {
	Architecture, OS string
	Config           struct {
		User         string
		ExposedPorts map[string]struct{}
		Entrypoint   []string
		Cmd          []string
		WorkingDir   string
	}
	layers []map[string]imageFile
}

// imageFile is one entry of a layer.
type imageFile struct {
	typeflag byte
	mode     int64
	data     []byte
}

// readOCIArchive reads an oci-archive (a tar of an OCI image layout holding one image).
func readOCIArchive(t *testing.T, archive string) ociImage {
	t.Helper()
	f, err := os.Open(archive)
	require.NoError(t, err)
	defer f.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			require.NoError(t, err)
			files[path.Clean(h.Name)] = b
		}
	}
	type descriptor struct{ MediaType, Digest string }
	blob := func(d descriptor) []byte {
		algo, hexSum, _ := strings.Cut(d.Digest, ":")
		require.Equal(t, "sha256", algo, "digest %q", d.Digest)
		b, ok := files["blobs/sha256/"+hexSum]
		require.True(t, ok, "blob %s is in the archive", d.Digest)
		sum := sha256.Sum256(b)
		require.Equal(t, hexSum, hex.EncodeToString(sum[:]), "blob %s matches its digest", d.Digest)
		return b
	}
	var index struct{ Manifests []descriptor }
	require.NoError(t, json.Unmarshal(files["index.json"], &index))
	require.Len(t, index.Manifests, 1, "one image")
	var manifest struct {
		Config descriptor
		Layers []descriptor
	}
	require.NoError(t, json.Unmarshal(blob(index.Manifests[0]), &manifest))
	var img ociImage
	require.NoError(t, json.Unmarshal(blob(manifest.Config), &img))
	for _, l := range manifest.Layers {
		var r io.Reader = bytes.NewReader(blob(l))
		switch l.MediaType {
		case "application/vnd.oci.image.layer.v1.tar+gzip":
			zr, err := gzip.NewReader(r)
			require.NoError(t, err)
			r = zr
		case "application/vnd.oci.image.layer.v1.tar":
		default:
			t.Fatalf("layer media type %q", l.MediaType)
		}
		layer := map[string]imageFile{}
		lr := tar.NewReader(r)
		for {
			h, err := lr.Next()
			if err == io.EOF {
				break
			}
			require.NoError(t, err)
			b, err := io.ReadAll(lr)
			require.NoError(t, err)
			layer[path.Clean("/"+h.Name)] = imageFile{typeflag: h.Typeflag, mode: h.Mode, data: b}
		}
		img.layers = append(img.layers, layer)
	}
	return img
}

// The image `make image` builds (with buildah, which needs no daemon) holds the static binary and nothing
// else, and its config says what the Containerfile says: the entrypoint, the user and the port. The binary
// taken from the image serves, started as the image's entrypoint in the image's files as the image's user
// (chroot with its user: what a container runtime does, less the namespaces).
func TestImage(t *testing.T) {
	builder, err := exec.LookPath("buildah")
	if err != nil {
		t.Skip("buildah is not installed, so the image is not built: it is Debian's buildah package, " +
			"which make test-deps installs")
	}
	bin := staticBinary(t)
	want, err := os.ReadFile(bin)
	require.NoError(t, err)
	in := containerfileInstructions(t)

	// make image, as an operator runs it, with a storage of the test's own (vfs: no overlay mounts).
	store := t.TempDir()
	flags := []string{"--root", filepath.Join(store, "root"), "--runroot", filepath.Join(store, "run"), "--storage-driver", "vfs"}
	const tag = "localhost/leasecached-image-test"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	mk := exec.CommandContext(ctx, "make", "-s", "-C", "..", "image", "STATIC_BIN="+bin, "CONTAINER="+builder,
		"CONTAINER_FLAGS="+strings.Join(flags, " "), "IMAGE="+tag)
	mk.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { // not a calling make's jobserver
		return strings.HasPrefix(kv, "MAKEFLAGS=") || strings.HasPrefix(kv, "MFLAGS=") || strings.HasPrefix(kv, "MAKELEVEL=")
	})
	out, err := mk.CombinedOutput()
	require.NoError(t, err, "make image:\n%s", out)
	archive := filepath.Join(store, "image.tar")
	out, err = exec.CommandContext(ctx, builder, append(flags, "push", "--quiet", tag, "oci-archive:"+archive)...).CombinedOutput()
	require.NoError(t, err, "buildah push:\n%s", out)
	t.Logf("make image and the export took %v", time.Since(start).Round(100*time.Millisecond))

	img := readOCIArchive(t, archive)
	assert.Equal(t, "linux", img.OS)
	assert.Equal(t, runtime.GOARCH, img.Architecture)
	var entry []string
	require.NoError(t, json.Unmarshal([]byte(in["ENTRYPOINT"][0]), &entry))
	assert.Equal(t, entry, img.Config.Entrypoint)
	assert.Empty(t, img.Config.Cmd, "memcached's flags are the run's arguments, after the entrypoint's")
	assert.Equal(t, in["USER"][0], img.Config.User)
	ports := map[string]struct{}{}
	for _, p := range in["EXPOSE"] {
		ports[p+"/tcp"] = struct{}{}
	}
	assert.Equal(t, ports, img.Config.ExposedPorts)

	require.Len(t, img.layers, 1, "one layer: the COPY")
	layer := img.layers[0]
	paths := make([]string, 0, len(layer))
	for p := range layer {
		paths = append(paths, p)
	}
	require.Equal(t, []string{entry[0]}, paths, "the binary and nothing else")
	f := layer[entry[0]]
	assert.Equal(t, byte(tar.TypeReg), f.typeflag)
	assert.Equal(t, int64(0o755), f.mode&0o7777, "executable by the image's user")
	assert.True(t, bytes.Equal(want, f.data), "the binary is make static's (%d bytes, image %d)", len(want), len(f.data))

	// The image's files as a root directory, run as the entrypoint says, by the image's user.
	rootfs := t.TempDir()
	require.NoError(t, os.Chmod(rootfs, 0o755)) // its "/", which the user must be able to search
	for p, f := range layer {
		require.NoError(t, os.WriteFile(filepath.Join(rootfs, p), f.data, os.FileMode(f.mode&0o7777)))
	}
	exe, args := filepath.Join(rootfs, entry[0]), slices.Clone(entry[1:])
	args[slices.Index(args, "0.0.0.0")] = "127.0.0.1" // tests listen on loopback only
	chroot, err := exec.LookPath("chroot")
	jailed := err == nil && os.Geteuid() == 0
	if jailed {
		exe, args = chroot, append([]string{"--userspec=" + img.Config.User, rootfs, entry[0]}, args...)
	} else {
		t.Logf("not root (or no chroot): the image's binary runs on the host as this user")
	}
	d, err := testdaemon.Start(context.Background(), testdaemon.Spec{
		Name: "leasecached (image)", Path: exe,
		Args:  func(port int) []string { return append(slices.Clone(args), withPort(t, memcachedFlags[:2:2], port)...) },
		Ready: func(addr string) error { return versionReply(addr) },
	})
	require.NoError(t, err)
	if jailed { // chroot exec'd the daemon: its process is the image's user, in the image's files
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.Cmd.Process.Pid))
		require.NoError(t, err)
		uid, _, _ := strings.Cut(img.Config.User, ":")
		assert.Regexp(t, `(?m)^Uid:\s+`+uid+`\s`, string(status))
		root, err := os.Readlink(fmt.Sprintf("/proc/%d/root", d.Cmd.Process.Pid))
		require.NoError(t, err)
		assert.Equal(t, rootfs, root)
	}
	exited, err := d.Terminate(10 * time.Second)
	require.True(t, exited)
	assert.NoError(t, err, "output:\n%s", d.Out.String())
}
