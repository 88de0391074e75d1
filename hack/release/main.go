// Command release packs relay binaries for distribution without a
// container engine: `make image` and `make dist` run it (see the Makefile),
// after building each binary with CGO_ENABLED=0 and -trimpath.
//
//	release image -o DIR -version V -revision C -created T -source URL OS/ARCH=BINARY...
//	release sums -o FILE BINARY...
//
// image writes an OCI image layout to DIR whose index.json names one
// multi-platform image index (annotated org.opencontainers.image.ref.name=V):
// one image per OS/ARCH, each a single layer on an empty base holding
// /relay, /etc/passwd and /etc/group with the user nonroot (65532), /tmp
// and /var/lib/canopy (owned by nonroot, the default data directory);
// user 65532, entrypoint /relay, OCI labels version, revision, source and
// created. Every timestamp is T (the commit time), so the same binaries
// give the same digests. Each binary must be a static executable for its
// platform.
//
// sums writes FILE in sha256sum's format ("HASH  NAME", names relative to
// FILE's directory), for `sha256sum -c`.
//
// It is a command of this module, not a module of its own: the packages
// of go-containerregistry it uses add that module alone to go.mod and
// change no other version.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's user, what it runs and where it keeps its data.
const (
	uid        = 65532 // "nonroot", as in the distroless images
	entrypoint = "/relay"
	dataDir    = "/var/lib/canopy"
)

// OCI annotation keys, used as image labels and index annotations.
const (
	labelVersion  = "org.opencontainers.image.version"
	labelRevision = "org.opencontainers.image.revision"
	labelSource   = "org.opencontainers.image.source"
	labelCreated  = "org.opencontainers.image.created"
	labelTitle    = "org.opencontainers.image.title"
	refName       = "org.opencontainers.image.ref.name"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("missing command: image or sums")
	}
	switch cmd, args := args[0], args[1:]; cmd {
	case "image":
		return runImage(args)
	case "sums":
		fs := flag.NewFlagSet("sums", flag.ContinueOnError)
		out := fs.String("o", "", "the checksum file to write")
		if err := fs.Parse(args); err != nil {
			return err
		}
		if *out == "" || fs.NArg() == 0 {
			return errors.New("sums: -o FILE and at least one file are required")
		}
		return writeSums(*out, fs.Args())
	default:
		return fmt.Errorf("unknown command %q: image or sums", cmd)
	}
}

// meta is what the labels of an image say about it.
type meta struct {
	Version, Revision, Source string
	Created                   time.Time
}

func runImage(args []string) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	out := fs.String("o", "", "the OCI layout directory to write (replaced)")
	var m meta
	fs.StringVar(&m.Version, "version", "", "the version label (git describe)")
	fs.StringVar(&m.Revision, "revision", "", "the revision label (git commit)")
	fs.StringVar(&m.Source, "source", "", "the source label (the repository's URL)")
	created := fs.String("created", "", "the creation time, RFC 3339 (the commit time); every timestamp in the image")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var err error
	if m.Created, err = time.Parse(time.RFC3339, *created); err != nil {
		return fmt.Errorf("-created: %w", err)
	}
	for _, f := range []struct{ name, v string }{{"-o", *out}, {"-version", m.Version}, {"-revision", m.Revision}, {"-source", m.Source}} {
		if f.v == "" {
			return fmt.Errorf("%s is empty (the Makefile takes VERSION, COMMIT and SOURCE from git; pass them outside a git checkout)", f.name)
		}
	}
	if fs.NArg() == 0 {
		return errors.New("no OS/ARCH=BINARY given")
	}
	bins := map[string]string{}
	var platforms []v1.Platform
	for _, a := range fs.Args() {
		spec, bin, ok := strings.Cut(a, "=")
		if !ok {
			return fmt.Errorf("%q: want OS/ARCH=BINARY", a)
		}
		p, err := v1.ParsePlatform(spec)
		if err != nil {
			return fmt.Errorf("%q: %w", a, err)
		}
		if p.Architecture == "arm64" && p.Variant == "" {
			p.Variant = "v8" // what registries and runtimes expect of arm64
		}
		if _, dup := bins[p.String()]; dup {
			return fmt.Errorf("%s given twice", p)
		}
		bins[p.String()] = bin
		platforms = append(platforms, *p)
	}
	idx, err := buildIndex(m, platforms, func(p v1.Platform) string { return bins[p.String()] })
	if err != nil {
		return err
	}
	return writeLayout(*out, idx, m.Version)
}

// buildIndex is the multi-platform image index of relay for platforms, in that
// order, the binary of each at binary(p).
func buildIndex(m meta, platforms []v1.Platform, binary func(v1.Platform) string) (v1.ImageIndex, error) {
	var adds []mutate.IndexAddendum
	for _, p := range platforms {
		img, err := buildImage(m, p, binary(p))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...)
	return mutate.Annotations(idx, m.labels()).(v1.ImageIndex), nil
}

func (m meta) labels() map[string]string {
	return map[string]string{
		labelTitle: "relay", labelVersion: m.Version, labelRevision: m.Revision, labelSource: m.Source,
		labelCreated: m.Created.UTC().Format(time.RFC3339),
	}
}

// buildImage is the image of one platform: one layer holding the binary at
// /relay and the files around it (see the command's doc).
func buildImage(m meta, p v1.Platform, binary string) (v1.Image, error) {
	if err := checkBinary(binary, p); err != nil {
		return nil, err
	}
	data, err := layerTar(binary, m.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(gzip.DefaultCompression), tarball.WithCompressedCaching)
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: m.Created.UTC()}
	cfg := &v1.ConfigFile{
		Architecture: p.Architecture, OS: p.OS, Variant: p.Variant, Created: created,
		Config: v1.Config{
			User:       fmt.Sprintf("%d:%d", uid, uid),
			Entrypoint: []string{entrypoint},
			WorkingDir: dataDir,
			Labels:     m.labels(),
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
	img, err := mutate.ConfigFile(mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON), cfg)
	if err != nil {
		return nil, err
	}
	return mutate.Append(img, mutate.Addendum{Layer: layer, MediaType: types.OCILayer,
		History: v1.History{Created: created, CreatedBy: "hack/release image", Comment: "relay " + m.Version}})
}

// layerTar is the layer's file system, uncompressed, every entry dated at.
func layerTar(binary string, at time.Time) ([]byte, error) {
	exe, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	entry := func(name string, mode int64, owner int, data []byte) error {
		h := &tar.Header{Name: name, Mode: mode, Uid: owner, Gid: owner, ModTime: at.UTC(), Format: tar.FormatPAX}
		switch {
		case strings.HasSuffix(name, "/"):
			h.Typeflag = tar.TypeDir
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:%s:/sbin/nologin\n", uid, uid, dataDir)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", uid)
	for _, e := range []struct {
		name  string
		mode  int64
		owner int
		data  []byte
	}{
		{"etc/", 0o755, 0, nil},
		{"etc/group", 0o644, 0, []byte(group)},
		{"etc/passwd", 0o644, 0, []byte(passwd)},
		{"relay", 0o755, 0, exe},
		{"tmp/", 0o1777, 0, nil},
		{"var/", 0o755, 0, nil},
		{"var/lib/", 0o755, 0, nil},
		{strings.TrimPrefix(dataDir, "/") + "/", 0o700, uid, nil},
	} {
		if err := entry(e.name, e.mode, e.owner, e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// checkBinary makes sure binary is a statically linked executable for p:
// an image without a C library cannot run anything else.
func checkBinary(binary string, p v1.Platform) error {
	if p.OS != "linux" {
		return fmt.Errorf("%s: an image's binary runs on linux", p)
	}
	f, err := elf.Open(binary)
	if err != nil {
		return fmt.Errorf("%s is not a Linux executable: %w", binary, err)
	}
	defer f.Close()
	want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64, "arm": elf.EM_ARM, "386": elf.EM_386,
		"ppc64le": elf.EM_PPC64, "s390x": elf.EM_S390, "riscv64": elf.EM_RISCV}[p.Architecture]
	if f.Machine != want {
		return fmt.Errorf("%s is for %s, not %s", binary, f.Machine, p.Architecture)
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked (build it with CGO_ENABLED=0)", binary)
		}
	}
	return nil
}

// writeLayout writes idx as the one entry of a new OCI image layout at
// dir, named ref (replacing whatever dir held).
func writeLayout(dir string, idx v1.ImageIndex, ref string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{refName: ref}))
}

// writeSums writes the SHA-256 of each file into out.
func writeSums(out string, files []string) error {
	var b strings.Builder
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(filepath.Dir(out), name)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(h.Sum(nil)), filepath.ToSlash(rel))
	}
	return os.WriteFile(out, []byte(b.String()), 0o644)
}
