package main

import (
	"archive/tar"
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// `make image dist`, for this machine's architecture only (cross-compiling
// every platform is for `make image dist` by hand), into a temporary BIN:
// the image layout holds one image index for linux/GOARCH whose image runs
// /relay as user 65532 with the OCI labels of this commit, its one layer
// holding the stamped static binary and no shell; dist holds the binary
// and its checksum; `relay version` names the commit. A second run
// relinks nothing and writes the same digests.
func TestMakeImageAndDist(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatalf("this test runs make image dist: %v", err)
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %s (the Makefile stamps from git): %v", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out))
	}
	commit := git("rev-parse", "HEAD")
	created, err := time.Parse(time.RFC3339, git("show", "-s", "--format=%cI", "HEAD"))
	if err != nil {
		t.Fatal(err)
	}

	bin := t.TempDir()
	imagePlatform := v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	if runtime.GOARCH == "arm64" {
		imagePlatform.Variant = "v8"
	}
	hostBinary := filepath.Join(bin, "dist", "relay-"+runtime.GOOS+"-"+runtime.GOARCH)
	imageBinary := filepath.Join(bin, "dist", "relay-linux-"+runtime.GOARCH)
	makeImageDist := func() {
		t.Helper()
		cmd := exec.Command("make", "-s", "-C", repo, "image", "dist", "BIN="+bin,
			"IMAGE_PLATFORMS=linux/"+runtime.GOARCH, "DIST_PLATFORMS="+runtime.GOOS+"/"+runtime.GOARCH)
		// Not a sub-make of a make that runs this test.
		for _, kv := range os.Environ() {
			if k, _, _ := strings.Cut(kv, "="); k != "MAKEFLAGS" && k != "MAKELEVEL" && k != "MFLAGS" {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make image dist: %v\n%s", err, out)
		}
		t.Logf("make image dist: %v", time.Since(start).Round(time.Millisecond))
	}
	makeImageDist()

	// relay version: the stamp of this commit.
	out, err := exec.Command(hostBinary, "version").Output()
	if err != nil {
		t.Fatalf("%s version: %v", hostBinary, err)
	}
	lines := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		k, v, _ := strings.Cut(l, ":")
		lines[k] = strings.TrimSpace(v)
	}
	version, revision := lines["relay version"], lines["git commit"]
	if revision != commit && revision != commit+"-dirty" {
		t.Errorf("relay version says commit %q; HEAD is %s", revision, commit)
	}
	if version == "" || version == "unknown" || version == "(devel)" || strings.HasSuffix(version, "-dirty") != strings.HasSuffix(revision, "-dirty") {
		t.Errorf("relay version says version %q, commit %q", version, revision)
	}

	// SHA256SUMS names the binary with its hash.
	sums, err := os.ReadFile(filepath.Join(bin, "dist", "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	if want := sha256File(t, hostBinary) + "  " + filepath.Base(hostBinary) + "\n"; string(sums) != want {
		t.Errorf("SHA256SUMS is\n%s\nwant\n%s", sums, want)
	}

	// The layout: one image index, named by the version.
	lp, err := layout.FromPath(filepath.Join(bin, "image"))
	if err != nil {
		t.Fatal(err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	tm, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(tm.Manifests) != 1 || tm.Manifests[0].MediaType != types.OCIImageIndex || tm.Manifests[0].Annotations[refName] != version {
		t.Fatalf("index.json lists %+v; want one image index named %s", tm.Manifests, version)
	}
	idxDigest := tm.Manifests[0].Digest
	idx, err := top.ImageIndex(idxDigest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	wantLabels := map[string]string{labelTitle: "relay", labelVersion: version, labelRevision: revision,
		labelSource: "https://github.com/canopy-dev/canopy", labelCreated: created.UTC().Format(time.RFC3339)}
	checkLabels := func(what string, got map[string]string) {
		for k, v := range wantLabels {
			if got[k] != v {
				t.Errorf("%s: %s = %q, want %q", what, k, got[k], v)
			}
		}
	}
	checkLabels("the image index's annotations", im.Annotations)
	var platforms []string
	for _, d := range im.Manifests {
		platforms = append(platforms, d.Platform.String())
	}
	if !slices.Equal(platforms, []string{imagePlatform.String()}) {
		t.Fatalf("the image index lists %v; want %s", platforms, imagePlatform.String())
	}

	// The image's configuration.
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH || cf.Config.User != "65532:65532" ||
		!slices.Equal(cf.Config.Entrypoint, []string{"/relay"}) || len(cf.Config.Cmd) != 0 || !cf.Created.Time.Equal(created) {
		t.Errorf("the image's config: os %s, arch %s, user %q, entrypoint %q, cmd %q, created %s; want linux, %s, 65532:65532, [/relay], none, %s",
			cf.OS, cf.Architecture, cf.Config.User, cf.Config.Entrypoint, cf.Config.Cmd, cf.Created, runtime.GOARCH, created)
	}
	checkLabels("the image's labels", cf.Config.Labels)

	// Its one layer: /relay, the stamped binary, and no shell.
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers; want 1", len(layers))
	}
	if mt, _ := layers[0].MediaType(); mt != types.OCILayer {
		t.Errorf("the layer's media type is %s; want %s", mt, types.OCILayer)
	}
	if len(cf.RootFS.DiffIDs) != 1 {
		t.Fatalf("the config lists %d layers; want 1", len(cf.RootFS.DiffIDs))
	}
	files := layerFiles(t, layers[0], cf.RootFS.DiffIDs[0])
	relay, ok := files["relay"]
	switch {
	case !ok:
		t.Errorf("the layer has no /relay; it has %v", slices.Sorted(maps.Keys(files)))
	case relay.hdr.Typeflag != tar.TypeReg || relay.hdr.Mode != 0o755:
		t.Errorf("/relay: type %c, mode %o; want an executable file", relay.hdr.Typeflag, relay.hdr.Mode)
	case relay.sha256 != sha256File(t, imageBinary):
		t.Errorf("/relay is not %s", imageBinary)
	}
	if dir := files["var/lib/canopy/"]; dir.hdr == nil || dir.hdr.Uid != 65532 {
		t.Errorf("the data directory /var/lib/canopy is missing or not nonroot's: %+v", dir.hdr)
	}
	for name, f := range files {
		base := filepath.Base(strings.TrimSuffix(name, "/"))
		if strings.HasPrefix(name, "bin/") || strings.HasPrefix(name, "usr/") || strings.HasPrefix(name, "sbin/") || base == "sh" || base == "busybox" {
			t.Errorf("the layer holds %s: the image has no shell or tools", name)
		}
		if !f.hdr.ModTime.Equal(created) {
			t.Errorf("%s is dated %s, not the commit's %s", name, f.hdr.ModTime, created)
		}
	}

	// Again: nothing relinked, the same digests.
	built, err := os.Stat(hostBinary)
	if err != nil {
		t.Fatal(err)
	}
	makeImageDist()
	again, err := os.Stat(hostBinary)
	if err != nil {
		t.Fatal(err)
	}
	if !again.ModTime().Equal(built.ModTime()) {
		t.Errorf("a second make dist relinked %s", hostBinary)
	}
	lp2, err := layout.ImageIndexFromPath(filepath.Join(bin, "image"))
	if err != nil {
		t.Fatal(err)
	}
	if tm2, err := lp2.IndexManifest(); err != nil || len(tm2.Manifests) != 1 || tm2.Manifests[0].Digest != idxDigest {
		t.Errorf("a second make image wrote %+v (%v); the first %s", tm2, err, idxDigest)
	}
}

type layerFile struct {
	hdr    *tar.Header
	sha256 string
}

// layerFiles reads a layer's entries by name, and checks that its
// content is what the image's config says (diffID). gzip(1) inflates it:
// under the race detector compress/gzip takes about 20 s for 80 MB.
func layerFiles(t *testing.T, l v1.Layer, diffID v1.Hash) map[string]layerFile {
	t.Helper()
	rc, err := l.Compressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	gunzip := exec.Command("gzip", "-dc")
	gunzip.Stdin, gunzip.Stderr = rc, os.Stderr
	out, err := gunzip.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := gunzip.Start(); err != nil {
		t.Fatalf("gzip -dc: %v", err)
	}
	content := sha256.New()
	files := map[string]layerFile{}
	tr := tar.NewReader(io.TeeReader(out, content))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.New()
		if _, err := io.Copy(sum, tr); err != nil {
			t.Fatal(err)
		}
		files[h.Name] = layerFile{hdr: h, sha256: hex.EncodeToString(sum.Sum(nil))}
	}
	if _, err := io.Copy(content, out); err != nil { // the tar's end padding
		t.Fatal(err)
	}
	if err := gunzip.Wait(); err != nil {
		t.Fatalf("gzip -dc: %v", err)
	}
	if got := hex.EncodeToString(content.Sum(nil)); got != diffID.Hex {
		t.Errorf("the layer's content is sha256:%s; the config says %s", got, diffID)
	}
	return files
}

func sha256File(t *testing.T, name string) string {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, bufio.NewReader(f)); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// An image refuses a binary it could not run: not an executable, or for
// another architecture.
func TestImageRefusesWrongBinaries(t *testing.T) {
	notELF := filepath.Join(t.TempDir(), "relay")
	if err := os.WriteFile(notELF, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	other := "arm64"
	if runtime.GOARCH == "arm64" {
		other = "amd64"
	}
	for _, tc := range []struct {
		binary string
		p      v1.Platform
		want   string
	}{
		{notELF, v1.Platform{OS: "linux", Architecture: "amd64"}, "is not a Linux executable"},
		{self, v1.Platform{OS: "darwin", Architecture: "arm64"}, "an image's binary runs on linux"},
	} {
		if err := checkBinary(tc.binary, tc.p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("checkBinary(%s, %s) = %v; want %q", tc.binary, tc.p, err, tc.want)
		}
	}
	if runtime.GOOS == "linux" {
		if err := checkBinary(self, v1.Platform{OS: "linux", Architecture: other}); err == nil || !strings.Contains(err.Error(), "is for") {
			t.Errorf("checkBinary(this test, linux/%s) = %v; want a wrong architecture", other, err)
		}
	}
}
